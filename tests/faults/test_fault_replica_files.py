"""What a replica writes into the store is untrusted: a torn or odd error file, deleted logs.

A replica killed while writing its TORCHELASTIC_ERROR_FILE leaves half a JSON document; the
supervisor must still record the failure (state, exit code, stderr tail) rather than crash.
"""

from __future__ import annotations

import pytest

from tests.conftest import CLI
from tests.faults.fault_helpers import app_processes

ERROR_FILES = {
    "torn-json": 'printf \'{"message": {"message": "boo\' > $TORCHELASTIC_ERROR_FILE',
    "garbage": "head -c 300 /dev/urandom > $TORCHELASTIC_ERROR_FILE",
    "json-list": "echo '[1, 2]' > $TORCHELASTIC_ERROR_FILE",
    "json-odd-fields": 'echo \'{"message": 5, "rank": []}\' > $TORCHELASTIC_ERROR_FILE',
    "a-directory": "mkdir -p $TORCHELASTIC_ERROR_FILE",
}


@pytest.mark.parametrize(
    "how", [h if h == "torn-json" else pytest.param(h, marks=pytest.mark.slow) for h in ERROR_FILES]
)
def test_odd_error_file_does_not_crash_the_supervisor(reaper: CLI, how: str) -> None:
    cli = reaper
    handle = cli.run(
        "utils.sh",
        "--num-replicas",
        "2",
        f"if [ $TRAINLAUNCH_REPLICA_ID = 0 ]; then {ERROR_FILES[how]}; "
        "echo the real reason >&2; exit 3; fi; sleep 300",
    )
    final = cli.wait(handle)
    assert "supervisor crashed" not in final["msg"], final["msg"]
    assert final["state"] == "FAILED"
    assert final["exit_code"] == 3, final
    by_id = {r["id"]: r for r in final["roles"][0]["replicas"]}
    assert by_id[0]["state"] == "FAILED" and by_id[1]["state"] == "CANCELLED"
    assert "exited with code 3" in by_id[0]["message"]
    assert app_processes(handle) == []


@pytest.mark.slow
def test_replica_that_deletes_its_own_logs(reaper: CLI) -> None:
    cli = reaper
    handle = cli.run("utils.sh", "echo gone; rm -rf $TRAINLAUNCH_REPLICA_LOG_DIR; exit 4")
    final = cli.wait(handle)
    assert final["state"] == "FAILED" and final["exit_code"] == 4
    logs = cli("logs", handle)
    assert logs.returncode == 0, logs.stderr
    assert "Traceback" not in logs.stderr
