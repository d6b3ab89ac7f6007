"""Fixtures of the fault-injection suite (see tests/faults/fault_helpers.py)."""

from tests.faults.fault_helpers import reaper, tmpfs_home  # noqa: F401 (fixtures)
