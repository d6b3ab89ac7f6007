"""Pure renderers: values in, JSON-able dicts or plain text out (no I/O, no click)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping
from typing import Any

from trainlaunch.cli.redact import mask_text, redact_env, secret_values
from trainlaunch.rerun import META_KEY
from trainlaunch.schedulers.api import DescribeAppResponse, ListAppResponse
from trainlaunch.specs import AppDef, AppState, AppStatus, ReplicaStatus

SCHEMA_VERSION = 1

STATE_STYLE = {
    AppState.SUCCEEDED: "green",
    AppState.FAILED: "red",
    AppState.CANCELLED: "yellow",
    AppState.RUNNING: "cyan",
    AppState.PENDING: "blue",
    AppState.SUBMITTED: "blue",
    AppState.UNKNOWN: "magenta",
    AppState.UNSUBMITTED: "white",
}


def when(ts: float | None) -> str:
    """A unix time as ISO text in this machine's time zone ('' when unknown)."""
    if not ts:
        return ""
    return _dt.datetime.fromtimestamp(ts).isoformat(sep=" ", timespec="seconds")


def status_doc(handle: str, resp: DescribeAppResponse) -> dict[str, Any]:
    """The stable JSON document of `status`."""
    st = resp.status
    failed = first_failure(st)
    return {
        "schema": SCHEMA_VERSION,
        "handle": handle,
        "app_id": resp.app_id,
        "name": resp.app.name if resp.app else None,
        "state": st.state.name,
        "is_terminal": st.is_terminal,
        "exit_code": st.exit_code,
        "num_restarts": st.num_restarts,
        "msg": st.msg,
        "failed_replica": f"{failed.role}/{failed.id}" if failed else None,
        "log_dir": resp.log_dir,
        "ui_url": st.ui_url,
        "structured_error_msg": st.structured_error_msg,
        "roles": [r.to_dict() for r in st.roles],
        "stall": resp.stall or None,  # docs/hangs.md
        "progress": resp.progress,
        "hang": resp.hang,
        "num_requeues": st.num_requeues,
        "attempts": [a.to_dict() for a in st.attempts],
        "failure": resp.failure.to_dict() if resp.failure else None,  # docs/failures.md
        "waiting": dict(resp.waiting) if resp.waiting else None,  # a late node (docs/ddp.md)
    }


def waiting_line(resp: DescribeAppResponse, now: float | None = None) -> str:
    """``node 0 of 2 waiting for 1 more node at H:P (for 42s)`` ('' when no node waits)."""
    w = resp.waiting
    if not w:
        return ""
    import time

    from trainlaunch.diagnosis.values import duration

    since = w.get("since")
    took = (
        f" (for {duration((now or time.time()) - since)})"
        if isinstance(since, (int, float))
        else ""
    )
    return f"{w.get('line')}{took}"


def attempt_rows(st: AppStatus) -> list[tuple[str, str, str, str]]:
    """(attempt, reason, start, end) for every attempt of the history."""
    return [
        (
            str(a.attempt),
            a.reason or ("running" if a.end is None else "?"),
            when(a.start),
            when(a.end),
        )
        for a in st.attempts
    ]


def first_failure(st: AppStatus) -> ReplicaStatus | None:
    """The replica that explains a FAILED app (the one with a root-cause message)."""
    failed = [r for r in st.replicas() if r.state == AppState.FAILED]
    with_msg = [r for r in failed if r.message]
    chosen = with_msg or failed
    return chosen[0] if chosen else None


def replica_rows(st: AppStatus) -> list[tuple[str, str, str, str, str]]:
    """(replica, state, exit, restarts, host) for every replica."""
    rows = []
    for r in st.replicas():
        if r.signal:
            code = f"{r.exit_code} ({r.signal})"
        else:
            code = "" if r.exit_code is None else str(r.exit_code)
        rows.append((f"{r.role}/{r.id}", r.state.name, code, str(r.restarts), r.hostname))
    return rows


def status_text(handle: str, resp: DescribeAppResponse) -> str:
    """Plain-text `status` (used when stdout is not a terminal)."""
    st = resp.status
    stall = resp.stall
    lines = [f"{handle}", f"  state:    {st.state.name}" + (f" ({stall})" if stall else "")]
    if st.exit_code is not None:
        lines.append(f"  exit:     {st.exit_code}")
    if st.num_restarts:
        lines.append(f"  restarts: {st.num_restarts}")
    if st.num_requeues:
        lines.append(f"  requeues: {st.num_requeues}")
    if st.msg and st.msg != stall:
        lines.append(f"  message:  {st.msg}")
    if resp.waiting:
        lines.append(f"  waiting:  {waiting_line(resp)}")
    lines.extend(failure_lines(resp))
    if resp.log_dir:
        lines.append(f"  logs:     {resp.log_dir}")
    lines.append("  replicas:")
    for name, state, code, restarts, _host in replica_rows(st):
        extra = f" exit={code}" if code else ""
        extra += f" restarts={restarts}" if restarts != "0" else ""
        lines.append(f"    {name:<20} {state:<10}{extra}")
    if len(st.attempts) > 1:
        lines.append("  history:")
        for attempt, reason, start, end in attempt_rows(st):
            lines.append(f"    #{attempt:<3} {reason:<36} {start} .. {end}".rstrip())
    lines.extend(hang_lines(resp))
    failed = first_failure(st)
    if failed and failed.message:
        lines.append("  root cause:")
        lines.extend(f"    {line}" for line in failed.message.splitlines())
    return "\n".join(lines)


def failure_lines(resp: DescribeAppResponse, indent: str = "  ") -> list[str]:
    """``why:`` and the evidence under it (docs/failures.md); none when nothing failed."""
    f = resp.failure
    if f is None:
        return []
    return [f"{indent}why:      {f.line}", *(f"{indent}          {e}" for e in f.evidence)]


def hang_lines(resp: DescribeAppResponse) -> list[str]:
    """Per-rank time since progress (stragglers) and the watchdog's last hang dump."""
    lines = []
    if resp.progress:
        lines.append("  ranks (time since last output, metrics or heartbeat):")
        for p in resp.progress:
            if p.get("running") and p.get("starting"):  # the watchdog counts its CPU time
                how = f"starting {p['idle_s']:.0f}s (no output yet)"
            elif p.get("running"):
                how = f"{p['idle_s']:.0f}s" + ("  STALLED" if p.get("stalled") else "")
            else:
                how = "exited" + ("" if p.get("exit_code") is None else f" ({p['exit_code']})")
            lines.append(f"    rank {p['rank']:<4} {p['role']}/{p['replica_id']:<6} {how}")
    hang = resp.hang
    if hang:
        lines.append(
            f"  hang:     #{hang.get('hangs')} at {when(hang.get('at'))}: no progress for "
            f"{hang.get('idle_s')}s; action: {hang.get('action')}; stacks: {hang.get('dump')}"
        )
        view = hang.get("collectives") or {}
        shown = list(view.get("lines") or []) + (
            [view["unavailable"]] if view.get("unavailable") else []
        )
        lines.extend(f"    {line}" for line in [*shown, *(hang.get("summary") or [])])
    return lines


def list_doc(rows: Iterable[ListAppResponse]) -> list[dict[str, Any]]:
    """The JSON document of `list`."""
    return [
        {
            "handle": r.app_handle,
            "app_id": r.app_id,
            "name": r.name,
            "state": r.state.name,
            "created": r.created,
            "msg": r.msg,
        }
        for r in rows
    ]


def list_text(rows: Iterable[ListAppResponse]) -> str:
    """Plain-text `list`: one app per line, tab separated (easy to cut/awk)."""
    return "\n".join(
        f"{r.app_handle}\t{r.state.name}\t{r.name}\t{when(r.created)}"
        + (f"\t{r.msg}" if r.msg else "")
        for r in rows
    )


def app_doc(app: AppDef | None, show_secrets: bool = False) -> dict[str, Any] | None:
    """An AppDef as JSON with secret-looking env values masked."""
    if app is None:
        return None
    d = app.to_dict()
    for role in d["roles"]:
        role["env"] = redact_env(role["env"], show_secrets)
    run = d.get("metadata", {}).get(META_KEY)
    if isinstance(run, dict) and isinstance(run.get("args"), list) and not show_secrets:
        hidden = secret_values(r.env for r in app.roles)
        d["metadata"] = {
            **d["metadata"],
            META_KEY: {**run, "args": [mask_text(str(a), hidden) for a in run["args"]]},
        }
    return d


def describe_doc(
    handle: str, resp: DescribeAppResponse, show_secrets: bool = False
) -> dict[str, Any]:
    """The JSON document of `describe`."""
    return {
        "schema": SCHEMA_VERSION,
        "handle": handle,
        "app_id": resp.app_id,
        "state": resp.status.state.name,
        "app": app_doc(resp.app, show_secrets),
        "cfg": dict(resp.cfg),
        "metadata": _jsonable({**recorded(resp), **resp.metadata}),
    }


def recorded(resp: DescribeAppResponse) -> dict[str, Any]:
    """The typed fields of a description that `describe --json` shows under "metadata"."""
    doc: dict[str, Any] = {
        "log_dir": resp.log_dir,
        "created": resp.created,
        "cwd": resp.cwd,
        "settings": dict(resp.settings),
        "snapshot": resp.snapshot,
    }
    if resp.progress is not None:  # a running app's (docs/hangs.md)
        doc.update(progress=resp.progress, stall=resp.stall)
    if resp.preflight is not None:  # node 0's agent's verdict (docs/preflight.md)
        doc["preflight"] = resp.preflight
    if resp.hang:
        doc["hang"] = resp.hang
    return doc


def describe_text(handle: str, resp: DescribeAppResponse, show_secrets: bool = False) -> str:
    """Plain-text `describe`."""
    lines = [handle, f"  state: {resp.status.state.name}"]
    if resp.settings:
        lines.append("  rank settings: " + ", ".join(f"{k}={v}" for k, v in resp.settings.items()))
    for key, value in (
        ("created", when(resp.created)),
        ("cwd", resp.cwd),
        ("log_dir", resp.log_dir),
    ):
        if value:
            lines.append(f"  {key}: {value}")
    run = (resp.app.metadata.get(META_KEY) if resp.app else None) or {}
    if run.get("component"):
        hidden = [] if show_secrets else secret_values(r.env for r in resp.app.roles)  # type: ignore[union-attr]
        args = mask_text(str(run.get("args", run.get("kwargs"))), hidden)
        lines.append(f"  component: {run['component']} {args}")
    if run.get("rerun_of"):
        lines.append(f"  rerun of: {run['rerun_of']}")
    if run.get("component") or "code" in run:  # the code of record (schedulers/coderecord.py)
        from trainlaunch.schedulers.coderecord import describe_line

        lines.append(f"  code: {describe_line(run.get('code'))}")
    if resp.snapshot:
        from trainlaunch.schedulers.snapshot import summary

        lines.append(f"  snapshot: {summary(resp.snapshot)}")
    if resp.cfg.get("preflight"):
        lines += preflight_lines(resp.preflight)
    if resp.cfg:
        lines.append(
            "  cfg: " + ", ".join(f"{k}={v}" for k, v in resp.cfg.items() if v is not None)
        )
    app = resp.app
    if app is not None:
        lines.append(f"  app: {app.name}")
        for role in app.roles:
            lines.append(
                f"  role {role.name}: {role.num_replicas} replica(s), "
                f"max_retries={role.max_retries} ({role.retry_policy.value})"
            )
            lines.append(f"    entrypoint: {role.entrypoint}")
            lines.append(f"    args: {list(role.args)}")
            for k, v in sorted(redact_env(role.env, show_secrets).items()):
                lines.append(f"    env {k}={v}")
    return "\n".join(lines)


def preflight_lines(recorded: Mapping[str, Any] | None) -> list[str]:
    """describe's lines for the preflight node 0's agent recorded (docs/preflight.md)."""
    if not recorded:
        return ["  preflight: asked for, not run (yet)"]
    from trainlaunch.preflight.report import Verdict, bandwidth_lines

    verdict = Verdict.from_dict(recorded)
    how = "passed" if verdict.ok else f"FAILED at {verdict.stage}"
    lines = [f"  preflight: {how} in {verdict.seconds:.1f} s ({verdict.nodes} nodes)"]
    lines += [f"    {p.fix}" for p in verdict.problems]
    lines += ["  " + ln for ln in bandwidth_lines(verdict.bandwidth, verdict.labels())]
    return lines


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
