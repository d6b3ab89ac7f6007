"""A rank that does nothing until RELEASE_FILE exists (at most 60 s): the memory benchmark's
workload, so that the launcher's processes can be measured while every rank is alive."""

import os
import sys
import time

deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.02)
