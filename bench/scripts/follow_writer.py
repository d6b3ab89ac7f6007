"""A replica for the `logs -f` latency benchmark: prints wall-clock timestamps, one per line.

usage: follow_writer.py GO_FILE COUNT INTERVAL. Prints "ready", waits until GO_FILE exists (the
bench creates it once every reader has seen "ready"), then prints COUNT lines "ts <time.time()>"
at jittered intervals, so that arrivals sample every phase of a reader's polling.
"""

import os
import random
import sys
import time

go, count, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
print("ready", flush=True)
deadline = time.monotonic() + 120
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.005)
for _ in range(count):
    time.sleep(interval * (0.5 + random.random()))
    print(f"ts {time.time():.6f}", flush=True)
