"""Pure renderers of `top`: the board's documents in, table cells and plain text out.

The Textual screens fill their tables with the same cells that ``top --once`` prints, so the
terminal view and the script view never disagree. No I/O, no clock: ``now`` is passed in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from trainlaunch.diagnosis.values import duration

STATE_STYLE = {  # render.STATE_STYLE by state name: the board's documents carry names
    "SUCCEEDED": "green",
    "FAILED": "red",
    "CANCELLED": "yellow",
    "RUNNING": "cyan",
    "PENDING": "blue",
    "SUBMITTED": "blue",
    "UNKNOWN": "magenta",
    "UNSUBMITTED": "white",
}
APP_COLUMNS = ("handle", "backend", "state", "age", "ranks", "step", "steps/s")
APP_COLUMNS_AFTER = ("idle", "flags", "requeues")
RANK_COLUMNS = ("rank", "state", "step", "steps/s", "idle", "cpu%", "rss", "gpu", "last line")
SWEEP_COLUMNS = ("sweep", "component", "points", "age")
MIB = 1 << 20


def number(value: Any) -> str:
    """A metric value as people read it: 4 significant digits ('' when none)."""
    if value is None or isinstance(value, bool):
        return "" if value is None else str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def rate(value: float | None) -> str:
    """Steps (or anything) per second: 1 decimal under 100, none above."""
    if value is None:
        return ""
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def ago(seconds: float | None) -> str:
    """``45s``, ``12m``, ``2h05m`` ('' when unknown)."""
    return "" if seconds is None else duration(max(0.0, seconds))


def state_text(state: str) -> Text:
    """A state name in its color."""
    return Text(state, style=STATE_STYLE.get(state, ""))


def metric_column(doc: Mapping[str, Any]) -> str:
    """The metric column's title: the metric the rows show (one name, or 'metric')."""
    names = {r.get("metric") for r in doc.get("apps", []) if r.get("metric")}
    return names.pop() if len(names) == 1 else "metric"


def app_columns(doc: Mapping[str, Any]) -> tuple[str, ...]:
    """The overview's columns, the chosen metric's among them."""
    return (*APP_COLUMNS, metric_column(doc), *APP_COLUMNS_AFTER)


def app_cells(row: Mapping[str, Any], metric_title: str = "metric") -> list[Text]:
    """One app of the overview: a running app's live fields, a finished app's state and age
    (its metric's value alone under a column named after it, else ``name=value``)."""
    live = row.get("world") is not None
    value = number(row.get("metric_value"))
    if value and row.get("metric") != metric_title:
        value = f"{row.get('metric')}={value}"
    flags = list(row.get("flags") or [])
    if row.get("sweep"):
        flags.append(f"sweep {row['sweep']}")
    flag_style = "bold red" if any(f.startswith("hang") for f in flags) else "yellow"
    return [
        Text(str(row.get("handle", ""))),
        Text(str(row.get("backend", ""))),
        state_text(str(row.get("state", ""))),
        Text(ago(row.get("age_s"))),
        Text(f"{row.get('ranks_alive')}/{row.get('world')}" if live else ""),
        Text(number(row.get("step"))),
        Text(rate(row.get("steps_per_s"))),
        Text(value),
        Text(ago(row.get("idle_s"))),
        Text(", ".join(flags) or (str(row.get("msg") or "") if not live else ""), style=flag_style),
        Text(str(row.get("requeues") or "") if live else ""),
    ]


def sweep_cells(row: Mapping[str, Any], now: float) -> list[Text]:
    """One sweep of ``board.sweep.sweeps()``."""
    created = row.get("created")
    return [
        Text(str(row.get("handle") or row.get("id", ""))),
        Text(str(row.get("component") or row.get("error") or "")),
        Text(number(row.get("points"))),
        Text(ago(now - created) if isinstance(created, (int, float)) else ""),
    ]


def rank_state(row: Mapping[str, Any]) -> Text:
    """running / STALLED / exited (code)."""
    if row.get("running"):
        return Text("STALLED", style="bold red") if row.get("stalled") else Text("running", "cyan")
    code = row.get("exit_code")
    return Text("exited" + ("" if code is None else f" ({code})"), style="dim")


def gpu(value: Mapping[str, Any] | None) -> str:
    """``gpu 0 87% 1234MiB`` for a rank computing on a GPU ('' otherwise)."""
    if not value:
        return ""
    util = "" if value.get("util") is None else f" {value['util']}%"
    mem = "" if value.get("mem_mib") is None else f" {value['mem_mib']}MiB"
    return f"{value.get('gpu')}{util}{mem}"


def rank_cells(row: Mapping[str, Any]) -> list[Text]:
    """One rank of ``board.app.app_view(...)["ranks"]``."""
    rss = row.get("rss")
    cpu = row.get("cpu_percent")
    return [
        Text(str(row.get("rank"))),
        rank_state(row),
        Text(number(row.get("step"))),
        Text(rate(row.get("steps_per_s"))),
        Text(ago(row.get("idle_s"))),
        Text("" if cpu is None else f"{cpu:.0f}"),
        Text("" if rss is None else f"{rss / MIB:.0f}M"),
        Text(gpu(row.get("gpu"))),
        Text(str(row.get("last_line") or "")),
    ]


def app_lines(view: Mapping[str, Any]) -> list[Text]:
    """An app's head: handle, state, ranks, restarts/requeues; stall, failure, hang lines."""
    live, status = view.get("live") or {}, view.get("status") or {}
    state = str(live.get("state") or status.get("state") or "")
    head = Text.assemble((str(view.get("handle", "")), "bold"), "  ", state_text(state))
    if live.get("world"):
        head.append(f"  ranks {live.get('ranks_alive')}/{live.get('world')}")
    if status.get("exit_code") is not None:
        head.append(f"  exit {status['exit_code']}")
    for key in ("restarts", "requeues"):
        if live.get(key):
            head.append(f"  {key} {live[key]}")
    if live.get("sweep"):
        head.append(f"  sweep {live['sweep']}")
    lines = [head]
    if live.get("stall"):
        lines.append(Text(str(live["stall"]), style="bold yellow"))
    elif status.get("msg"):
        lines.append(Text(str(status["msg"]), style="dim"))
    failure = status.get("failure") or {}
    if failure.get("line"):
        lines.append(Text(f"why: {failure['line']}", style="bold red"))
        lines += [Text(f"     {e}", style="red") for e in failure.get("evidence") or []]
    hang = status.get("hang") or {}
    if hang:
        lines.append(
            Text(
                f"hang #{hang.get('hangs')}: no progress for {hang.get('idle_s')}s; "
                f"action: {hang.get('action')}; stacks: {hang.get('dump')}",
                style="bold red",
            )
        )
        shown = list((hang.get("collectives") or {}).get("lines") or [])
        lines += [Text(f"  {s}", style="red") for s in [*shown, *(hang.get("summary") or [])]]
    return lines


def tail_lines(view: Mapping[str, Any]) -> list[Text]:
    """The merged log tail, each line after who wrote it; or why there is none."""
    logs = view.get("logs") or []
    if not logs:
        note = view.get("logs_note") or "no log lines yet"
        return [Text(str(note), style="dim")]
    out = []
    for d in logs:
        label = d.get("label") or ""
        out.append(Text.assemble((f"{label} ", "dim"), str(d.get("line", ""))))
    return out


def sweep_columns(view: Mapping[str, Any]) -> tuple[str, ...]:
    """The columns of a sweep's points: index, each parameter, seed, state, the metric."""
    metric = view.get("metric") or "metric"
    return ("#", *view.get("params", []), "seed", "state", "steps", f"{metric} last", "best")


def point_cells(view: Mapping[str, Any], point: Mapping[str, Any]) -> list[Text]:
    """One point of ``board.sweep.sweep_view(...)``: its values, state and chosen metric."""
    metric = view.get("metric")
    params = point.get("params") or {}
    last = (point.get("last") or {}).get(metric) if metric else None
    best = (point.get("best") or {}).get(metric) if metric else None
    return [
        Text(str(point.get("index"))),
        *(Text(str(params.get(p, ""))) for p in view.get("params", [])),
        Text(number(point.get("seed"))),
        state_text(str(point.get("state", ""))),
        Text(number(point.get("steps"))),
        Text(number(last)),
        Text(number(best)),
    ]


def plain_table(columns: Sequence[str], rows: Sequence[Sequence[Text | str]]) -> str:
    """Aligned columns, two spaces apart, nothing cut (handles are copied into commands)."""
    cells = [[c.plain if isinstance(c, Text) else str(c) for c in r] for r in rows]
    cells = [[" ".join(c.split()) for c in r] for r in cells]  # one line per row
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(columns)]
    lines = [list(columns), *cells]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines
    )


def overview_text(doc: Mapping[str, Any], sweeps: Sequence[Mapping[str, Any]], now: float) -> str:
    """``top --once``: the apps table, the backends' notes, then the sweeps table."""
    parts = []
    apps = doc.get("apps") or []
    if apps:
        title = metric_column(doc)
        parts.append(plain_table(app_columns(doc), [app_cells(r, title) for r in apps]))
    parts += [f"note: {n}" for n in doc.get("notes") or []]
    if sweeps:
        parts.append("")
        parts.append(plain_table(SWEEP_COLUMNS, [sweep_cells(s, now) for s in sweeps]))
    return "\n".join(parts)


def app_text(view: Mapping[str, Any], log_lines: int = 20) -> str:
    """``top --once HANDLE``: the app's head, its ranks, its newest ``log_lines`` lines."""
    parts = [t.plain for t in app_lines(view)]
    if view.get("ranks"):
        parts += ["", plain_table(RANK_COLUMNS, [rank_cells(r) for r in view["ranks"]])]
    parts += ["", *(t.plain for t in tail_lines(view)[-log_lines:])]
    return "\n".join(parts)


def sweep_text(view: Mapping[str, Any]) -> str:
    """``top --once SWEEP``: the sweep's head and its points."""
    head = f"{view.get('handle')}  {view.get('component')} {' '.join(view.get('args', []))}"
    rows = [point_cells(view, p) for p in view.get("points", [])]
    return "\n".join([head.rstrip(), "", plain_table(sweep_columns(view), rows)])


__all__ = [
    "APP_COLUMNS",
    "RANK_COLUMNS",
    "SWEEP_COLUMNS",
    "ago",
    "app_cells",
    "app_columns",
    "app_lines",
    "app_text",
    "tail_lines",
    "number",
    "overview_text",
    "plain_table",
    "point_cells",
    "rank_cells",
    "sweep_cells",
    "sweep_columns",
    "sweep_text",
]
