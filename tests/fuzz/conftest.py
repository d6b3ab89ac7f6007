"""Fixtures of the fuzz suite (see tests/faults/fault_helpers.py)."""

from tests.faults.fault_helpers import reaper, tmpfs_home  # noqa: F401 (fixtures)
