"""The env contract, injection, and the app store's safety rules."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from trainlaunch import settings, store
from trainlaunch.errors import StoreError, UsageError
from trainlaunch.node import processes
from trainlaunch.specs import AppDef, Role


def test_rank_settings_env_round_trip() -> None:
    s = settings.RankSettings(
        seed=7,
        export_strategy="sampled",
        export_rank=-1,
        export_sample_rate=0.25,
        metrics_path="/m/{rank}.jsonl",
    )
    assert settings.RankSettings.from_env(s.to_env()) == s
    assert settings.RankSettings.from_env({}) == settings.RankSettings()


@pytest.mark.parametrize(
    "kw,needle",
    [
        ({"seed": -1}, "seed"),
        ({"seed": 2**64}, "seed"),
        ({"export_strategy": "nosuch"}, "unknown"),
        ({"export_sample_rate": 1.5}, "sample rate"),
        ({"export_sample_rate": float("nan")}, "rate"),
        ({"export_rank": -2}, "export rank"),
    ],
)
def test_invalid_settings(kw: dict, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        settings.RankSettings(**kw)


def test_custom_qualified_strategy_passes_through() -> None:
    assert settings.RankSettings(export_strategy="myproj:every_other").export_strategy


def test_inject_returns_new_app_with_every_variable() -> None:
    app = AppDef("a", [Role("r", "true", num_replicas=2, env={"MINE": "1"})])
    out = settings.inject(app, settings.RankSettings(seed=3), "local://s/")
    env = out.roles[0].env
    assert env[settings.SEED] == "3" and env["MINE"] == "1"
    assert env[settings.HANDLE] == "local://s/${app_id}"
    assert env[settings.REPLICA_ID] == "${replica_id}"
    assert "MINE" in app.roles[0].env and settings.SEED not in app.roles[0].env
    assert out.metadata["trainlaunch"]["seed"] == 3


def test_every_trainlaunch_name_is_defined_in_settings_only() -> None:
    root = Path(settings.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        if path.name == "settings.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if '"TRAINLAUNCH_' in line or "'TRAINLAUNCH_" in line:
                offenders.append(f"{path.relative_to(root)}:{n}")
    assert offenders == []


def test_store_is_private_and_refuses_shared_dirs(tmp_path: Path) -> None:
    env = {settings.HOME: str(tmp_path / "home")}
    apps = store.apps_dir(env)
    assert stat.S_IMODE(apps.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "home").stat().st_mode) == 0o700
    os.chmod(tmp_path / "home", 0o777)
    with pytest.raises(StoreError, match="writable by other users"):
        store.apps_dir(env)


def test_atomic_write_and_corrupt_record(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    store.write_json(p, {"a": 1})
    assert json.loads(p.read_text()) == {"a": 1}
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert [x.name for x in tmp_path.iterdir()] == ["r.json"]
    p.write_text('{"a": ')
    with pytest.raises(StoreError, match="unreadable record"):
        store.read_json(p)


def test_app_ids_are_unique_and_safe() -> None:
    ids = {store.new_app_id("My App!") for _ in range(1000)}
    assert len(ids) == 1000
    with pytest.raises(UsageError):
        store.app_dir("../../etc")


def test_process_identity() -> None:
    me = os.getpid()
    assert processes.same_process_alive(me, processes.start_ticks(me), processes.boot_id())
    assert not processes.same_process_alive(me, (processes.start_ticks(me) or 0) + 1)
    assert not processes.same_process_alive(me, None, "another-boot")
