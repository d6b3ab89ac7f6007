"""`logs` of an app that printed nothing says so (issue 23 #12): one line on stderr, stdout
empty, exit 0; a filter that matches nothing stays silent (nothing unexpected happened)."""

from __future__ import annotations

from tests.conftest import CLI


def test_logs_of_an_app_that_printed_nothing_say_so(cli: CLI, inprocess_cli: CLI) -> None:
    handle = cli("run", "--wait", "utils.sh", "true", check=True).stdout.strip()
    spoke = cli("run", "--wait", "utils.sh", "echo hi", check=True).stdout.strip()
    for flags in ([], ["--json"], ["--merge"], ["--ranks", "0"], ["--stream", "stdout"]):
        for target in (handle, f"{handle}/sh/0"):
            proc = inprocess_cli("logs", *flags, target, check=True)
            assert proc.stdout == "", flags
            assert proc.stderr == f"{handle}: no output (its logs are empty)\n", flags
        proc = inprocess_cli("logs", *flags, spoke, check=True)
        assert "hi" in proc.stdout and proc.stderr == "", flags
    filtered = inprocess_cli("logs", "--regex", "x", handle, check=True)
    assert (filtered.stdout, filtered.stderr) == ("", "")
