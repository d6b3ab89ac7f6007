"""The one assembly of a backend's options (cfg) for `run`, `sweep` and `rerun`.

From lowest to highest precedence (docs/configuration.md):

1. the base: the config files' ``[scheduler.NAME]`` table (run, sweep) or the original app's
   recorded cfg (rerun);
2. ``values``: typed options (the Python API's ``cfg``);
3. ``texts``: every ``--cfg K=V,...`` in order, a later one winning;
4. the flags: ``--hang-timeout``, ``--on-hang``, ``--snapshot``/``--no-snapshot``,
   ``--preflight``/``--no-preflight``;
5. for apps that may start later than they are submitted (a sweep's points queued behind
   ``--max-parallel``), ``snapshot=on`` unless 1-4 chose: they must run the submitted code.

Every value is checked by the backend's schema (runopts) when the Runner dry-runs the app.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from trainlaunch.errors import UsageError
from trainlaunch.schedulers.api import Capabilities
from trainlaunch.specs import CfgVal, runopts
from trainlaunch.values import frozen


@frozen
class CfgRequest:
    """What a command (or a caller) asks of a backend's options, over the base."""

    values: Mapping[str, CfgVal] = dataclasses.field(default_factory=dict)
    texts: tuple[str, ...] = ()  # --cfg K=V,... in order
    snapshot: bool | None = None  # --snapshot / --no-snapshot
    hang_timeout: float | None = None  # --hang-timeout (cfg hang_timeout)
    on_hang: str | None = None  # --on-hang (cfg on_hang)
    preflight: bool | None = None  # --preflight / --no-preflight (cfg preflight; preflight.md)
    queued: bool = False  # the apps may start later than submitted (a sweep's --max-parallel)


def build_cfg(
    scheduler: str,
    opts: runopts,
    caps: Capabilities,
    base: Mapping[str, CfgVal] | None,
    request: CfgRequest,
) -> dict[str, CfgVal]:
    """The options to dry-run with: base < values < texts < flags < the queued default."""
    cfg: dict[str, CfgVal] = {}
    if base:
        cfg = {k: v for k, v in opts.resolve(base, scheduler).items() if v is not None}
    chosen = set(base or {}) | set(request.values)
    cfg.update(request.values)
    for text in request.texts:
        given = opts.cfg_from_str(text, scheduler)
        chosen |= set(given)
        cfg.update(given)
    hang = {"hang_timeout": request.hang_timeout, "on_hang": request.on_hang}  # docs/hangs.md
    cfg.update({k: v for k, v in hang.items() if v is not None})
    if request.preflight is not None:
        if "preflight" not in opts:
            raise UsageError(f"the {scheduler} backend has no preflight")
        cfg["preflight"] = request.preflight
    if request.snapshot is not None:
        if not caps.snapshots:
            raise UsageError(f"the {scheduler} backend does not take code snapshots")
        cfg["snapshot"] = "on" if request.snapshot else "off"
    elif request.queued and caps.snapshots and "snapshot" not in chosen:
        cfg["snapshot"] = "on"  # queued apps must run the code of the submission
    return cfg


__all__ = ["CfgRequest", "build_cfg"]
