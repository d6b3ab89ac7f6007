"""trainlaunch's per-node agent: ``python -m trainlaunch.agent [torchrun flags] script ...``.

Accepts every torchrun 2.13 flag and starts the node's workers with torchrun's exact
environment contract, without importing torch (``--engine auto``); elastic or external
rendezvous are handed to real torchrun. Modules: ``flags`` (the shared flag table),
``plan`` (pure: engine, rendezvous, per-rank env), ``dryrun`` (``rank_envs``), ``node`` (the
event loop), ``workers``, ``logs``, ``failures``, ``state`` (agent.json), ``torchrun``.
Nothing here imports torch or numpy.
"""
