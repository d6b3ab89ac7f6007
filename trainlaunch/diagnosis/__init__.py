"""Failures explained: why an app failed, in one line plus the evidence (docs/failures.md).

Pure: ``traceback`` finds a rank's last Python traceback in its stderr and its exception line;
``rules`` turns what is known of one failed rank (exit code or signal, traceback, peak memory
against the limit, the cgroup's OOM kills, kernel log lines, the port's holder, /dev/shm) into
a :class:`~trainlaunch.diagnosis.values.Diagnosis`; ``app`` reads several ranks' and nodes'
together (fallout of another rank's failure, one node's missing module, nodes that never
came). The node agent and the local supervisor collect the evidence (node/evidence.py).
"""
