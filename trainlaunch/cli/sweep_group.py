"""status/list/stop/wait/logs of a whole sweep (a handle like ``local://S/sweep:ID``)."""

from __future__ import annotations

import time
from typing import Any

from trainlaunch.cli import output
from trainlaunch.errors import AppFailed, AppNotFound, ExitCode, WaitTimeout
from trainlaunch.runner import Runner, get_runner
from trainlaunch.specs import AppState


def rows(runner: Runner, sweep_id: str) -> list[dict[str, Any]]:
    """One row per point: index, handle, params, seed, state, message."""
    from trainlaunch import sweep_runs

    out = []
    for p in sweep_runs.read_sweep(sweep_id)["points"]:
        state, msg = "UNSUBMITTED", ""
        if p.get("handle"):
            try:
                st = runner.status(p["handle"])
                state, msg = st.state.name, st.msg
            except AppNotFound as e:
                state, msg = "UNKNOWN", str(e)
        out.append({**p, "state": state, "msg": msg})
    return out


def _label(row: dict[str, Any]) -> str:
    vals = {
        **row.get("params", {}),
        **({"seed": row["seed"]} if row.get("seed") is not None else {}),
    }
    return " ".join(f"{k}={v}" for k, v in vals.items())


def render(handle: str, table: list[dict[str, Any]], as_json: bool) -> None:
    """Print the sweep's points (a table for people, one document with --json)."""
    if as_json:
        output.emit_json({"handle": handle, "points": table})
        return
    counts: dict[str, int] = {}
    for r in table:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    lines = [f"{handle}\t" + " ".join(f"{k}={v}" for k, v in sorted(counts.items()))]
    for r in table:
        lines.append(f"{r['index']}\t{r.get('handle') or '-'}\t{r['state']}\t{_label(r)}")
    output.emit("\n".join(lines))


def full_handle(sweep_id: str) -> str:
    """The sweep's handle as recorded (``scheduler://session/sweep:ID``)."""
    from trainlaunch import sweep_runs

    rec = sweep_runs.read_sweep(sweep_id)
    return sweep_runs.sweep_handle(rec["scheduler"], rec["session"], sweep_id)


def status(handle: str, sweep_id: str, as_json: bool) -> None:
    """`status SWEEP`."""
    handle = full_handle(sweep_id)
    with get_runner() as runner:
        render(handle, rows(runner, sweep_id), as_json)


def stop(handle: str, sweep_id: str, as_json: bool) -> None:
    """`stop SWEEP`: stop the queued points first (so none starts), then the running ones
    (a Slurm job array: one scancel of the array)."""
    from trainlaunch import sweep_runs

    handle = full_handle(sweep_id)
    with get_runner() as runner:
        handles = sweep_runs.expand_handle(handle)
        states = {h: runner.status(h).state for h in handles}
        order = sorted(handles, key=lambda h: states[h] != AppState.PENDING)
        runner.cancel_many([h for h in order if not states[h].is_terminal])  # slurm: one scancel
        render(handle, rows(runner, sweep_id), as_json)


def wait(handle: str, sweep_id: str, timeout: float | None, as_json: bool) -> None:
    """`wait SWEEP`: until every point ends; exit 1 if any failed, 6 if any was cancelled."""
    from trainlaunch import sweep_runs

    handle = full_handle(sweep_id)
    deadline = None if timeout is None else time.monotonic() + timeout
    with get_runner() as runner:
        pending = list(sweep_runs.expand_handle(handle))
        while pending:
            pending = [h for h in pending if not runner.status(h).is_terminal]
            if pending and deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"{handle}: {len(pending)} apps still running after {timeout:g}s",
                    hint="`trainlaunch wait` again, or `trainlaunch stop` it",
                )
            if pending:
                time.sleep(0.2)
        table = rows(runner, sweep_id)
    render(handle, table, as_json)
    failed = [r for r in table if r["state"] in ("FAILED", "UNKNOWN", "UNSUBMITTED")]
    cancelled = [r for r in table if r["state"] == "CANCELLED"]
    if failed:
        raise AppFailed(
            f"{handle}: {len(failed)} of {len(table)} apps FAILED (first: {failed[0]['handle']})",
            hint=f"trainlaunch logs {failed[0]['handle']}",
        )
    if cancelled:
        raise AppFailed(
            f"{handle}: {len(cancelled)} of {len(table)} apps CANCELLED",
            exit_code=ExitCode.CANCELLED,
        )


def logs(handle: str, stream: Any) -> None:
    """`logs SWEEP`: each app's logs in turn, under a ``==> HANDLE (point) <==`` header."""
    from trainlaunch import sweep_runs

    sid = sweep_runs.sweep_id_of(handle)
    with get_runner() as runner:
        for row in rows(runner, sid or ""):
            if row.get("handle"):
                output.emit(f"==> {row['handle']} ({_label(row)}) <==")
                stream(runner, row["handle"])


__all__ = ["logs", "render", "rows", "status", "stop", "wait"]
