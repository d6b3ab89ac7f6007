"""A fake Job controller + kubelet for FakeApiServer: each pod runs as a real local process.

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
        container = job["spec"]["template"]["spec"]["containers"][0]
        started = []
        for index in range(n):
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
            started.append((pod, proc))
        self.pods[key] = started
        self.api.set_job_status(ns, name, active=n, ready=n)

    def _pump(self, ns: str, pod: str, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b""):
            self.api.logs[(ns, pod)].write(line)

    def _check_job(self, key: tuple[str, str]) -> None:
        ns, name = key
        codes = [proc.poll() for _, proc in self.pods[key]]
        if any(c is None for c in codes):
            return
        for (pod, proc), code in zip(self.pods[key], codes, strict=True):
            proc.wait()
            self.pumps[pod].join(timeout=10)  # every line is in the log before it ends
            self.api.logs[(ns, pod)].close()
            phase = "Succeeded" if code == 0 else "Failed"
            term = {
                "terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}
            }
            self.api.set_pod(ns, pod, phase, term)
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

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
