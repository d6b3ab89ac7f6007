"""4. `list` and `status` with 1,000 apps in the store.

The store is filled fast but faithfully: one real app is run to its end, then its records
(app.json, state.json, supervisor.json, logs) are cloned under fresh app ids with the id
rewritten inside them and creation times spread out, as if 1,000 apps had run and ended.
TorchX has no peer number here: `torchx list -s local_cwd` raises ("App handles cannot be
listed for local scheduler as they are not persisted by torchx").
"""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path

from bench.context import Context
from bench.harness import Table, Target, cmd_case, compare, cpu_note, measure, seconds

NAME = "store"
_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"


def clone_apps(template: Path, apps: Path, count: int) -> list[str]:
    """Write count terminal apps modelled on template into apps/; their ids."""
    old_id = template.name
    texts = {
        p.relative_to(template): p.read_text(errors="replace")
        for p in template.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }
    created = json.loads(texts[Path("app.json")]).get("created") or 1.7e9
    ids = []
    for i in range(count):
        new_id = f"bench-{''.join(secrets.choice(_ALPHABET) for _ in range(10))}"
        root = apps / new_id
        for rel, text in texts.items():
            path = root / rel
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            text = text.replace(old_id, new_id)
            if rel == Path("app.json"):
                doc = json.loads(text)
                doc["created"] = created - 60.0 * (count - i)
                text = json.dumps(doc, separators=(",", ":"), sort_keys=True)
            path.write_text(text)
            path.chmod(0o600)
        ids.append(new_id)
    return ids


def run(ctx: Context) -> list[Table]:
    """list and status against a 1-app store and a big store, round-robin."""
    count: int = ctx.pick(1000, 1000, 5)
    handle = ctx.finished_app()
    small, big = ctx.fresh_dir("store-1"), ctx.fresh_dir("store-big")
    template = ctx.app_dir(handle)
    for home in (small, big):
        (home / "apps").mkdir(mode=0o700, parents=True)
        home.chmod(0o700)
        shutil.copytree(template, home / "apps" / template.name)
    clone_apps(template, big / "apps", count - 1)
    cases = {}
    for label, home in (("1", small), ("big", big)):
        env = ctx.env(home)
        cases[f"list {label}"] = cmd_case([*ctx.tl, "list"], env=env, cwd=ctx.scratch)
        if not ctx.smoke:
            cases[f"list --json {label}"] = cmd_case(
                [*ctx.tl, "list", "--json"], env=env, cwd=ctx.scratch
            )
        cases[f"status {label}"] = cmd_case(
            [*ctx.tl, "status", "--json", handle], env=env, cwd=ctx.scratch
        )
    stats = measure(cases, repeats=ctx.pick(7, 3, 1), warmup=ctx.pick(1, 1, 0))
    n = f"{count:,} apps"
    goal = Target("<=", 0.3, on="value", unit="s")
    rows = [
        compare(
            f"list, {n}", stats["list big"].wall, seconds, "list, 1 app", stats["list 1"].wall, goal
        )
    ]
    if "list --json big" in stats:
        rows.append(
            compare(
                f"list --json, {n}",
                stats["list --json big"].wall,
                seconds,
                "list --json, 1 app",
                stats["list --json 1"].wall,
                goal,
            )
        )
    rows.append(
        compare(
            f"status --json, {n}",
            stats["status big"].wall,
            seconds,
            "status --json, 1 app",
            stats["status 1"].wall,
            Target("<=", 1.2),
        )
    )
    per_app = (stats["list big"].wall - stats["list 1"].wall) / max(count - 1, 1)
    notes = [
        f"wall time, median of {stats['list 1'].runs} interleaved runs; all apps ended "
        f"(SUCCEEDED); list costs {per_app * 1e6:.0f} us per extra app",
        "status target: flat in the number of apps (1,000 apps vs 1 app, ratio <= 1.2)",
        "TorchX: `torchx list -s local_cwd` raises (local apps are not persisted)",
        cpu_note(stats),
    ]
    return [Table("4. list and status with many apps", rows, notes)]
