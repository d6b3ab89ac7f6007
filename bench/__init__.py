"""Benchmarks of trainlaunch against torchrun, TorchX and NeMo Automodel (see bench/README.md).

Run them with ``python bench/run.py [--quick] [--only NAME]``. Nothing here is imported by the
``trainlaunch`` package, and the peers live in their own environment outside the repository.
"""
