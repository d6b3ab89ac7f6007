"""`rerun` runs the original's code or refuses, naming what is gone (issue 23 #8, #18).

A rerun of an app whose code snapshot was deleted, lost a file, or whose snapshot record is
damaged used to exit 0 and run today's (changed) code, or fail with an error about an option
'snapshot' the user never gave. Now: exit 2, what is missing, and the explicit alternative.
"""

from __future__ import annotations

import json
import shutil

from tests.conftest import CLI

META = ".trainlaunch-snapshot.json"


def test_rerun_of_a_damaged_snapshot_is_refused_not_replaced(cli: CLI) -> None:
    script = cli.cwd / "t.py"
    script.write_text("print('v1')\n")
    run = cli("run", "--wait", "--snapshot", "utils.python", "--script", "t.py", check=True)
    handle = run.stdout.strip()
    app_json = cli.home / "apps" / handle.rsplit("/", 1)[1] / "app.json"
    snap = app_json.parent / "snapshot"
    script.write_text("print('v2')\n")  # today's code differs from the original's
    assert cli("rerun", "--dryrun", handle).returncode == 0  # intact: runs the copy
    apps = len(list((cli.home / "apps").iterdir()))

    def refused(*needles: str) -> None:
        proc = cli("rerun", handle)
        assert proc.returncode == 2, proc.stderr
        assert "option 'snapshot'" not in proc.stderr
        for needle in needles:
            assert needle in proc.stderr, proc.stderr
        assert len(list((cli.home / "apps").iterdir())) == apps, "nothing was started"

    (snap / "t.py").unlink()
    refused(f"error: the code snapshot {snap} is incomplete: t.py is missing", "snapshot=on")
    (snap / META).write_text("{")
    refused(f"the code snapshot {snap} is damaged ({META})")
    shutil.rmtree(snap)
    refused(f"the code snapshot {snap} is gone (deleted?)")
    record = json.loads(app_json.read_text())
    app_json.write_text(json.dumps({**record, "snapshot": {"files": 1}}))
    refused(f"{handle} ran from a code snapshot, but its record of it is damaged")
    app_json.write_text(json.dumps(record))
    # the explicit alternative: today's code
    new = cli("rerun", "--cfg", "snapshot=off", handle, check=True).stdout.strip()
    cli.wait(new)
    assert cli("logs", new, check=True).stdout.split() == ["t/0", "v2"]
