"""`run --dryrun`: the exact request on stdout, a summary (resources, seed) on stderr.

What is only chosen at submission (the app id, a seed that was not fixed, a free port) is
shown as a placeholder: a later `run` draws its own, so a concrete value would be a lie.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from trainlaunch.cli import output
from trainlaunch.specs import AppDryRunInfo, Resource

PLACEHOLDERS = {
    "app_id": "<app-id: assigned at submission>",
    "seed": "<seed: drawn at submission>",
    "port": "<port: chosen at submission>",
}


def placeholder(key: str) -> str:
    """How a value drawn at submission is shown."""
    return PLACEHOLDERS.get(key, f"<{key}: chosen at submission>")


def with_placeholders(value: Any, drawn: Mapping[str, str]) -> Any:
    """value (text, or JSON-able data) with every drawn value replaced by its placeholder."""
    if isinstance(value, str):
        for key, concrete in drawn.items():
            if concrete:
                # whole words only: a port 4094 must not eat part of 40949
                pattern = rf"(?<![\w.]){re.escape(concrete)}(?![\w])"
                value = re.sub(pattern, placeholder(key), value)
        return value
    if isinstance(value, Mapping):
        return {k: with_placeholders(v, drawn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [with_placeholders(v, drawn) for v in value]
    return value


def memory(r: Resource) -> str:
    """memMB as a person reads it (0 asks for nothing: the cluster's default applies)."""
    return f"{r.memMB} MiB" if r.memMB else "not set (the cluster's default)"


def summary(info: AppDryRunInfo) -> dict[str, Any]:
    """What the request asks for: roles and their resources, and the seed."""
    app = info.app
    seed = (app.metadata.get("trainlaunch") or {}).get("seed") if app else None
    return {
        "app": app.name if app else None,
        "scheduler": info.scheduler,
        "roles": [
            {
                "name": r.name,
                "replicas": r.num_replicas,
                "cpu": r.resource.cpu,
                "gpu": r.resource.gpu,
                "memMB": r.resource.memMB or None,
            }
            for r in (app.roles if app else ())
        ],
        "seed": placeholder("seed") if "seed" in info.drawn else seed,
    }


def summary_text(info: AppDryRunInfo) -> str:
    """The summary for people (narration on stderr)."""
    doc = summary(info)
    lines = [f"dryrun of app {doc['app']!r} on {doc['scheduler']}: nothing was submitted"]
    for role, r in zip(doc["roles"], info.app.roles if info.app else (), strict=False):
        n = role["replicas"]
        lines.append(
            f"  role {role['name']}: {n} replica{'s' if n != 1 else ''}, each cpu {role['cpu']},"
            f" gpu {role['gpu']}, memory {memory(r.resource)}"
        )
    if "seed" in info.drawn:
        lines.append(f"  seed: {doc['seed']} (fix it with --seed N)")
    else:
        lines.append(f"  seed: {doc['seed']}")
    if "app_id" in info.drawn:
        lines.append(f"  app id: {placeholder('app_id')}")
    return "\n".join(lines)


def request_text(
    info: AppDryRunInfo, show_secrets: bool, apps: Sequence[AppDryRunInfo] = ()
) -> str:
    """The request as a dry run shows it: secrets masked, drawn values as placeholders, in a
    way that keeps its format valid (the backend's YAML still parses, its names stay names).

    Every dry run prints through here (run, sweep, rerun); apps: the apps whose secrets a
    request holds when it is not one app's (a sweep's job array)."""
    from trainlaunch.cli.redact import mask_text, secret_values

    owners = [i.app for i in (*apps, info) if i.app is not None]
    hidden = [] if show_secrets else secret_values(r.env for a in owners for r in a.roles)
    return info.text(lambda text: with_placeholders(mask_text(text, hidden), info.drawn))


def print_dryrun(info: AppDryRunInfo, as_json: bool, show_secrets: bool) -> None:
    """The request exactly (secrets masked, drawn values as placeholders) and the summary."""
    from trainlaunch.cli.redact import redact_env

    if as_json:
        doc: dict[str, Any] = {"scheduler": info.scheduler, "app_id": info.app_id}
        if info.replicas:
            doc["replicas"] = [
                {**r.to_dict(), "env": redact_env(r.env, show_secrets)} for r in info.replicas
            ]
        else:
            doc["request"] = request_text(info, show_secrets)
        doc["summary"] = summary(info)
        output.emit_json(with_placeholders(doc, info.drawn))
        return
    output.emit(request_text(info, show_secrets))
    output.narrate(summary_text(info))
