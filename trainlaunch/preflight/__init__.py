"""Preflight: know before the ranks start that every node of an app can run it.

Values and rules only (docs/preflight.md); what runs where lives elsewhere:

* ``options``: the ``--cfg preflight*`` options every backend takes, and what they ask of
  the node agents (``--preflight*`` flags, inserted by ``agent/request.py``).
* ``facts``: what a node agent learns about its node without torch (hostname, variables,
  interfaces, driver, the entrypoint's imports); the probe in the ranks' interpreter
  (``trainlaunch.rank.preflight``) adds python, torch, CUDA, NCCL and the modules found.
* ``compare``: the fingerprints of all nodes -> the problems (which node, what, the fix).
* ``bandwidth``: the all-reduce results -> bus bandwidth per node, the slow ones.
* ``report``: the verdict as a value and as the one table a failed preflight prints.

The node agent (``agent/preflight.py``) runs it; ``trainlaunch doctor`` (``doctor/``) checks
this machine. Nothing here imports torch.
"""
