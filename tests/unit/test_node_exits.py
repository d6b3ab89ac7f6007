"""node/exits.py: the one rule for exit codes, return codes and the signal that ended a process."""

from __future__ import annotations

import pytest

from trainlaunch.node.exits import shell_code, signal_name


@pytest.mark.parametrize(
    "code, returncode, name",
    [
        (137, False, "SIGKILL"),  # an exit code: 128 + 9
        (143, False, "SIGTERM"),
        (-9, True, "SIGKILL"),  # a return code: -9
        (-9, False, "SIGKILL"),  # negative: a return code either way
        (137, True, None),  # a worker's own exit(137)
        (200, False, None),  # 128 + 72 is no signal: a normal exit
        (-200, True, "signal 200"),  # a return code always means a signal
        (0, False, None),
        (1, True, None),
        (128, False, None),
        (None, False, None),
    ],
)
def test_signal_name(code: int | None, returncode: bool, name: str | None) -> None:
    assert signal_name(code, returncode=returncode) == name


def test_shell_code_from_a_return_code_and_from_a_damaged_record() -> None:
    assert (shell_code(-15), shell_code(-9), shell_code(3), shell_code(0)) == (143, 137, 3, 0)
    assert shell_code(None) is None and shell_code(True) is None and shell_code("1") is None
