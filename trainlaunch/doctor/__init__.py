"""``trainlaunch doctor``: this machine, checked line by line (docs/cli.md, docs/preflight.md).

Each check is a small function returning :class:`~trainlaunch.doctor.values.Check` values
(ok, warn, fail or skip, with a fix); ``cli/doctor.py`` only renders them. Modules:
``values`` (the line of the table), ``checks`` (the running order), ``interpreter`` (python, torch, CUDA, NCCL in
the ranks' interpreter, in a subprocess: the CLI never imports torch), ``gpus`` (NVML through
nvidia-smi or pynvml, Xid errors), ``machine`` (/dev/shm, limits, the app store, py-spy,
rendezvous ports), ``clusters`` (Slurm and Kubernetes, when configured).
"""
