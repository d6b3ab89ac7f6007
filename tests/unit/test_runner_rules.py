"""The Runner's one rules: how waiting ended (one app or many) and how a cfg is assembled."""

from __future__ import annotations

import pytest

from trainlaunch.errors import ExitCode, UsageError
from trainlaunch.runner.cfg import CfgRequest, build_cfg
from trainlaunch.runner.outcome import combined, outcome
from trainlaunch.schedulers.api import Capabilities
from trainlaunch.specs import AppState, AppStatus, runopts

S = AppState


def st(state: AppState, code: int | None = None) -> AppStatus:
    return AppStatus(state, exit_code=code, ended=state == S.UNKNOWN)


@pytest.mark.parametrize(
    "states,expected",
    [
        ([S.SUCCEEDED], ExitCode.OK),
        ([S.FAILED], ExitCode.APP_FAILED),
        ([S.UNKNOWN], ExitCode.UNKNOWN_RESULT),
        ([S.CANCELLED], ExitCode.CANCELLED),
        ([S.SUCCEEDED, S.CANCELLED, S.UNKNOWN], ExitCode.UNKNOWN_RESULT),
        ([S.CANCELLED, S.FAILED, S.UNKNOWN], ExitCode.APP_FAILED),
        ([S.SUCCEEDED, S.UNSUBMITTED], ExitCode.APP_FAILED),  # a point never submitted
        ([S.SUCCEEDED, S.SUCCEEDED], ExitCode.OK),
    ],
)
def test_one_exit_code_rule_for_one_app_and_many(states: list[AppState], expected: int) -> None:
    assert outcome([st(s) for s in states]).exit_code == expected


def test_the_first_failing_app_decides_and_gives_its_code() -> None:
    statuses = [st(S.SUCCEEDED, 0), st(S.FAILED, 3), st(S.FAILED, 5)]
    result = outcome(statuses, app_exit_code=True)
    assert (result.state, result.exit_code, result.apps, result.first) == (S.FAILED, 3, (1, 2), 1)
    assert outcome(statuses).exit_code == ExitCode.APP_FAILED


def test_one_status_for_many() -> None:
    assert combined([st(S.SUCCEEDED), st(S.RUNNING), st(S.PENDING)]).state == S.RUNNING
    assert combined([st(S.SUCCEEDED), st(S.PENDING)]).state == S.PENDING
    done = combined([st(S.SUCCEEDED, 0), st(S.FAILED, 4)])
    assert (done.state, done.exit_code, done.msg) == (S.FAILED, 4, "FAILED=1 SUCCEEDED=1")
    assert done.is_terminal and combined([st(S.UNKNOWN)]).is_terminal


def opts() -> runopts:
    o = runopts()
    o.add("partition", str, "p", default="cpu")
    o.add("snapshot", str, "s", default="off")
    o.add("hang_timeout", float, "h")
    o.add("on_hang", str, "o", default="none", choices=("none", "stop", "restart"))
    return o


SNAP = Capabilities(snapshots=True)


def test_precedence_base_values_texts_flags() -> None:
    request = CfgRequest(
        values={"partition": "values"},
        texts=("partition=text1", "partition=text2,on_hang=stop"),
        hang_timeout=5.0,
        on_hang="restart",
    )
    cfg = build_cfg("b", opts(), SNAP, {"partition": "base"}, request)
    assert cfg["partition"] == "text2" and cfg["on_hang"] == "restart"
    assert cfg["hang_timeout"] == 5.0 and cfg["snapshot"] == "off"  # the base's defaults
    assert build_cfg("b", opts(), SNAP, None, CfgRequest()) == {}  # nothing asked: defaults later


def test_queued_apps_run_a_snapshot_unless_someone_chose() -> None:
    queued = CfgRequest(queued=True)
    assert build_cfg("b", opts(), SNAP, None, queued)["snapshot"] == "on"
    assert build_cfg("b", opts(), Capabilities(), None, queued) == {}  # no snapshots there
    chosen = CfgRequest(texts=("snapshot=off",), queued=True)
    assert build_cfg("b", opts(), SNAP, None, chosen)["snapshot"] == "off"
    assert build_cfg("b", opts(), SNAP, {"snapshot": "off"}, queued)["snapshot"] == "off"
    flag = CfgRequest(snapshot=False, queued=True)
    assert build_cfg("b", opts(), SNAP, None, flag)["snapshot"] == "off"


def test_a_flag_the_backend_cannot_take_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="the b backend does not take code snapshots"):
        build_cfg("b", opts(), Capabilities(), None, CfgRequest(snapshot=True))
    with pytest.raises(UsageError, match="unknown option 'partiton'.*did you mean 'partition'"):
        build_cfg("b", opts(), SNAP, None, CfgRequest(texts=("partiton=x",)))
