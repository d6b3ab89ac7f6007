"""A fake Job controller + kubelet for FakeApiServer: each pod runs as a real local process.

At most ``parallelism`` pods of a Job run at once; with ``backoffLimitPerIndex`` each index
ends on its own (``completedIndexes``/``failedIndexes``) and frees its slot for the next.

The API server stays the fake at the HTTP boundary; what runs in a "pod" is the container's
real command with the env the kubelet would give it (``$(VAR)`` expanded, ``$$`` unescaped,
the completion index from the pod annotation), its output streamed into the pod log. Deleting
the Job kills its processes. Images are ignored: commands run on this machine.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
from typing import Any

from k8s_fake_apiserver import FakeApiServer

_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
_ANNOTATION = re.compile(r"^metadata\.annotations\['([^']+)'\]$")


def expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion: defined names only; $$ is a literal $."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _REF.sub(sub, text)


class FakeKubelet:
    """Starts a process per completion index of every new Job; reports pods and Job status."""

    def __init__(self, api: FakeApiServer, interval: float = 0.02) -> None:
        self.api = api
        self.interval = interval
        self.pods: dict[tuple[str, str], list[tuple[str, subprocess.Popen[bytes]]]] = {}
        self.pumps: dict[str, threading.Thread] = {}
        self.finished: set[tuple[str, str]] = set()
        self.next_index: dict[tuple[str, str], int] = {}  # the next completion index to start
        self.indexes: dict[tuple[str, str], tuple[set[int], set[int]]] = {}  # done, failed
        self.max_running: dict[tuple[str, str], int] = {}  # most pods of a Job at once
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> FakeKubelet:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for pods in self.pods.values():
            for _, proc in pods:
                self._kill(proc)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            jobs = {
                (ns, name): obj
                for (kind, ns, name), obj in list(self.api.objects.items())
                if kind == "jobs"
            }
            for key, job in jobs.items():
                if key not in self.pods:
                    self._start_job(key, job)
                elif key not in self.finished:
                    self._check_job(key)
            for key in [k for k in self.pods if k not in jobs]:  # deleted: kill its pods
                for _, proc in self.pods[key]:
                    self._kill(proc)
                self.finished.add(key)

    def _start_job(self, key: tuple[str, str], job: dict[str, Any]) -> None:
        ns, name = key
        n = int(job["spec"].get("completions") or 1)
        k = min(n, int(job["spec"].get("parallelism") or n))  # at most k pods at once
        self.pods[key] = [self._start_pod(ns, name, job, index) for index in range(k)]
        self.next_index[key] = k
        self._count(key)
        self.api.set_job_status(ns, name, active=k, ready=k)

    def _start_pod(
        self, ns: str, name: str, job: dict[str, Any], index: int
    ) -> tuple[str, subprocess.Popen[bytes]]:
        container = job["spec"]["template"]["spec"]["containers"][0]
        pod = self.api.add_pod(ns, name, index, "Running", {"running": {"startedAt": "x"}})
        annotations = self.api.objects[("pods", ns, pod)]["metadata"]["annotations"]
        env: dict[str, str] = {}
        for var in container.get("env") or []:
            if "valueFrom" in var:  # the downward API: one of the pod's annotations
                m = _ANNOTATION.match(var["valueFrom"]["fieldRef"]["fieldPath"])
                assert m, f"the fake kubelet knows annotation fields only: {var}"
                env[var["name"]] = annotations.get(m[1], "")
            else:
                env[var["name"]] = expand(var.get("value", ""), env)
        argv = [expand(a, env) for a in [*container["command"], *container.get("args", [])]]
        proc = subprocess.Popen(
            argv,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        pump = threading.Thread(target=self._pump, args=(ns, pod, proc), daemon=True)
        pump.start()
        self.pumps[pod] = pump
        return pod, proc

    def _count(self, key: tuple[str, str]) -> None:
        self.max_running[key] = max(self.max_running.get(key, 0), self._running(*key))

    def _running(self, ns: str, name: str) -> int:
        return sum(proc.poll() is None for _, proc in self.pods.get((ns, name), []))

    def _pump(self, ns: str, pod: str, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b""):
            self.api.logs[(ns, pod)].write(line)

    def _check_job(self, key: tuple[str, str]) -> None:
        ns, name = key
        job = self.api.objects[("jobs", ns, name)]
        n = int(job["spec"].get("completions") or 1)
        spec = job["spec"]
        if "backoffLimitPerIndex" in spec and "maxFailedIndexes" not in spec:  # one by one
            self._check_indexes(key, job, n)
            return
        codes = [proc.poll() for _, proc in self.pods[key]]
        if any(c is None for c in codes):
            return
        for pod, proc in self.pods[key]:
            self._end_pod(ns, pod, proc)
        ok = all(c == 0 for c in codes)
        cond = {"type": "Complete" if ok else "Failed", "status": "True"}
        self.api.set_job_status(
            ns,
            name,
            succeeded=sum(c == 0 for c in codes),
            failed=sum(c != 0 for c in codes),
            conditions=[cond],
        )
        self.finished.add(key)

    def _check_indexes(self, key: tuple[str, str], job: dict[str, Any], n: int) -> None:
        """Each ended pod frees its slot for the next index; the Job ends after the last."""
        ns, name = key
        done, failed = self.indexes.setdefault(key, (set(), set()))
        for pod, proc in self.pods[key]:
            index = int(pod.split("-")[-2])
            if proc.poll() is None or index in done | failed:
                continue
            self._end_pod(ns, pod, proc)
            (done if proc.returncode == 0 else failed).add(index)
            if self.next_index[key] < n:
                self.pods[key].append(self._start_pod(ns, name, job, self.next_index[key]))
                self.next_index[key] += 1
                self._count(key)
        status: dict[str, Any] = {
            "active": self._running(ns, name),
            "succeeded": len(done),
            "failed": len(failed),
            "completedIndexes": ",".join(map(str, sorted(done))),
        }
        if failed:
            status["failedIndexes"] = ",".join(map(str, sorted(failed)))
        if len(done) + len(failed) == n:
            status["conditions"] = [{"type": "Failed" if failed else "Complete", "status": "True"}]
            self.finished.add(key)
        self.api.set_job_status(ns, name, **status)

    def _end_pod(self, ns: str, pod: str, proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait()
        self.pumps[pod].join(timeout=10)  # every line is in the log before it ends
        self.api.logs[(ns, pod)].close()
        phase = "Succeeded" if code == 0 else "Failed"
        term = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
        self.api.set_pod(ns, pod, phase, term)

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
