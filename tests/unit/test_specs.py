"""specs: frozen, validated values."""

from __future__ import annotations

import dataclasses

import pytest

from trainlaunch.errors import UsageError
from trainlaunch.specs import (
    AppDef,
    AppState,
    AppStatus,
    ReplicaStatus,
    Resource,
    RetryPolicy,
    Role,
    RoleStatus,
    macros,
)


def role(**kw: object) -> Role:
    return Role(**{"name": "trainer", "entrypoint": "python", **kw})  # type: ignore[arg-type]


def test_values_are_frozen_and_not_shared_with_caller() -> None:
    env = {"A": "1"}
    args = ["x"]
    r = role(env=env, args=args)
    env["A"] = "2"
    args.append("y")
    assert r.env["A"] == "1" and r.args == ("x",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.env["B"] = "3"  # type: ignore[index]


def test_round_trip_through_dict() -> None:
    app = AppDef(
        "app",
        [
            role(
                num_replicas=3,
                max_retries=2,
                retry_policy=RetryPolicy.REPLICA,
                resource=Resource(cpu=4, gpu=1, memMB=2048),
                env={"K": "V"},
                port_map={"http": 80},
                metadata={"m": 1},
            )
        ],
    )
    assert AppDef.from_dict(app.to_dict()) == app


@pytest.mark.parametrize(
    "kw,needle",
    [
        ({"name": "bad/name"}, "invalid role name"),
        ({"name": ".."}, "invalid role name"),
        ({"entrypoint": ""}, "entrypoint"),
        ({"num_replicas": 0}, "num_replicas"),
        ({"num_replicas": True}, "num_replicas"),
        ({"max_retries": -1}, "max_retries"),
        ({"min_replicas": 5, "num_replicas": 2}, "min_replicas"),
        ({"env": {"A=B": "x"}}, "env name"),
        ({"env": {"A": 1}}, "env A"),
        ({"args": [1]}, "arg"),
    ],
)
def test_invalid_role_is_rejected_at_construction(kw: dict, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        role(**kw)


def test_appdef_validation() -> None:
    with pytest.raises(UsageError, match="no roles"):
        AppDef("a", [])
    with pytest.raises(UsageError, match="duplicate role"):
        AppDef("a", [role(), role()])
    with pytest.raises(UsageError, match="resource cpu"):
        Resource(cpu=-1)


def test_map_roles_returns_new_app() -> None:
    app = AppDef("a", [role()])
    new = app.map_roles(lambda r: r.replace(args=("--x",)))
    assert app.roles[0].args == () and new.roles[0].args == ("--x",)


def test_macros_substitute_args_and_env_only_known_names() -> None:
    r = role(args=("${app_id}", "${replica_id}", "${unknown}"), env={"H": "${rank0_env}"})
    out = macros.Values(img_root="/img", app_id="app-1", replica_id="3", rank0_env="RANK0").apply(r)
    assert out.args == ("app-1", "3", "${unknown}")
    assert out.env["H"] == "RANK0"
    assert r.args[0] == "${app_id}"


def test_app_state_terminal() -> None:
    assert {s for s in AppState if s.is_terminal} == {
        AppState.SUCCEEDED,
        AppState.FAILED,
        AppState.CANCELLED,
    }


def test_status_round_trip_and_replicas() -> None:
    rep = ReplicaStatus(id=0, state=AppState.FAILED, role="r", exit_code=137, signal="SIGKILL")
    assert ReplicaStatus.from_dict(rep.to_dict()) == rep
    st = AppStatus(state=AppState.FAILED, roles=(RoleStatus("r", (rep,)),))
    assert list(st.replicas()) == [rep]
    assert st.to_dict()["roles"][0]["replicas"][0]["signal"] == "SIGKILL"
