"""The order the doctor's checks run in (each module's functions return values.Check)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from trainlaunch.doctor.values import Check, skip

if TYPE_CHECKING:
    from trainlaunch.config import Config


def ranks_python(config: Config, given: str | None) -> tuple[str, str]:
    """(the interpreter dist.ddp gives the ranks, where that comes from)."""
    if given:
        return given, "--python"
    configured = config.component_defaults("dist.ddp").get("python")
    if configured:
        return str(configured), 'the config\'s [component."dist.ddp"] python'
    return sys.executable, "dist.ddp's default"


def run_all(config: Config, environ: Mapping[str, str], python: str | None = None) -> list[Check]:
    """Every check, in the table's order (the torch probe runs while the others do)."""
    from trainlaunch.doctor import clusters, gpus, interpreter, machine

    ranks, origin = ranks_python(config, python)
    probe = interpreter.start_probe(ranks, environ)
    head = interpreter.python_checks(ranks, origin)
    rest = [
        *gpus.checks(),
        machine.shm(),
        machine.open_files(),
        machine.processes(),
        machine.app_store(environ),
        machine.pyspy(),
        machine.rendezvous_port(),
    ]
    default = config.default_scheduler()
    if clusters.slurm_configured(environ, default):
        rest += clusters.slurm(environ)
    else:
        rest.append(skip("slurm", "not configured (no sinfo, no SLURM_CONF)"))
    k8s = config.scheduler_cfg("kubernetes")
    if clusters.kubernetes_configured(environ, default, k8s):
        rest += clusters.kubernetes(k8s)
    else:
        rest.append(skip("kubernetes", "not configured (no kubeconfig, not in a cluster)"))
    return [*head, *interpreter.torch_checks(probe, ranks), *rest]
