"""A fake Job controller + kubelet for FakeApiServer: each pod runs as a real local process.

It also plays the JobSet controller (a JobSet's child Jobs and Service, its Completed/Failed
verdict from theirs; no restarts) and Kubeflow Trainer (a TrainJob's JobSet from its
ClusterTrainingRuntime, its Complete/Failed verdict), as k8s_controllers.py derives them, and
leaves suspended objects alone until something (a test playing Kueue) unsuspends them.

At most ``parallelism`` pods of a Job run at once; with ``backoffLimitPerIndex`` each index
ends on its own (``completedIndexes``/``failedIndexes``) and frees its slot for the next.

The API server stays the fake at the HTTP boundary; what runs in a "pod" is the container's
real command with the env the kubelet would give it (``$(VAR)`` expanded, ``$$`` unescaped,
the completion index from the pod annotation), its output streamed into the pod log. Deleting
the Job kills its processes. Images are ignored: commands run on this machine.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import subprocess
import threading
from typing import Any

from k8s_controllers import jobset_children, trainjob_jobset
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
        self.ended: set[str] = set()  # pods whose end the kubelet has seen: their slot is free
        self.made: set[tuple[str, str, str]] = set()  # JobSets/TrainJobs whose children exist
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
            self._controllers()
            jobs = {
                (ns, name): obj
                for (kind, ns, name), obj in list(self.api.objects.items())
                if kind == "jobs" and not obj["spec"].get("suspend")
            }
            for key, job in jobs.items():
                try:
                    if key not in self.pods:
                        self._start_job(key, job)
                    elif key not in self.finished:
                        self._check_job(key)
                except KeyError:  # deleted meanwhile: a real update gets 404 and moves on
                    if ("jobs", *key) in self.api.objects:
                        raise
            for key in [k for k in self.pods if k not in jobs]:  # deleted: kill its pods
                for _, proc in self.pods[key]:
                    self._kill(proc)
                self.finished.add(key)

    def _controllers(self) -> None:
        """Trainer and the JobSet controller: make children, report verdicts."""
        objects = dict(self.api.objects)
        for (kind, ns, name), obj in objects.items():
            key = (kind, ns, name)
            if kind not in ("trainjobs", "jobsets") or obj["spec"].get("suspend"):
                continue
            if key not in self.made:
                if kind == "trainjobs":
                    runtime = objects.get(
                        ("clustertrainingruntimes", "", obj["spec"]["runtimeRef"]["name"])
                    )
                    if runtime is None:
                        continue  # Trainer's webhook would have refused it
                    self.api.put("jobsets", trainjob_jobset(obj, runtime))
                else:
                    jobs, service = jobset_children(obj)
                    for job in jobs:
                        self.api.put("jobs", job)
                    if service is not None:
                        self.api.put("services", service)
                self.made.add(key)
            elif kind == "jobsets":
                self._jobset_verdict(ns, name, obj, objects)
            else:
                js = objects.get(("jobsets", ns, name))
                conditions = (js or {}).get("status", {}).get("conditions") or []
                done = {"Completed": "Complete", "Failed": "Failed"}
                verdict = [{**c, "type": done[c["type"]]} for c in conditions if c["type"] in done]
                if verdict:
                    self.api.set_status("trainjobs", ns, name, {"conditions": verdict})

    def _jobset_verdict(
        self, ns: str, name: str, js: dict[str, Any], objects: dict[Any, dict[str, Any]]
    ) -> None:
        jobs = [
            o
            for (kind, s, _), o in objects.items()
            if kind == "jobs"
            and s == ns
            and any(
                r.get("uid") == js["metadata"]["uid"]
                for r in o["metadata"].get("ownerReferences", [])
            )
        ]
        states = [
            c["type"]
            for j in jobs
            for c in (j.get("status") or {}).get("conditions") or []
            if c.get("status") == "True"
        ]
        condition = None
        if "Failed" in states:
            exits = [
                (p.get("status", {}).get("containerStatuses") or [{}])[0]
                .get("state", {})
                .get("terminated", {})
                .get("exitCode")
                for (kind, s, _), p in objects.items()
                if kind == "pods"
                and s == ns
                and p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == name
            ]
            failjobset = 76 in exits and any(  # its rule on the Jobs' FailJob reason
                "PodFailurePolicy" in r.get("onJobFailureReasons", [])
                for r in (js["spec"].get("failurePolicy") or {}).get("rules", [])
            )
            reason = "FailJobSetFailurePolicyAction" if failjobset else "FailedJobs"
            condition = {
                "type": "Failed",
                "status": "True",
                "reason": reason,
                "message": "jobset failed",
            }
        elif jobs and states.count("Complete") == len(jobs):
            condition = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}
        if condition:
            self.api.set_status("jobsets", ns, name, {"conditions": [condition], "restarts": 0})

    def _start_job(self, key: tuple[str, str], job: dict[str, Any]) -> None:
        ns, name = key
        if not self._secrets_exist(ns, job):
            return  # the kubelet retries CreateContainerConfigError until the Secret exists
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
            ref = (var.get("valueFrom") or {}).get("secretKeyRef")
            if ref is not None:  # the Secret's value, as stored (base64), never expanded
                secret = self.api.objects[("secrets", ns, ref["name"])]
                env[var["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
            elif "valueFrom" in var:  # the downward API: one of the pod's annotations
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

    def _secrets_exist(self, ns: str, job: dict[str, Any]) -> bool:
        refs = [
            (e.get("valueFrom") or {}).get("secretKeyRef")
            for e in job["spec"]["template"]["spec"]["containers"][0].get("env") or []
        ]
        return all(("secrets", ns, r["name"]) in self.api.objects for r in refs if r)

    def _count(self, key: tuple[str, str]) -> None:
        """The most pods of the Job holding a slot at once: started and not yet seen to end.
        Not the live processes: one that exits before this count (its go file came early,
        on a loaded machine) held its slot all the same."""
        held = sum(pod not in self.ended for pod, _ in self.pods.get(key, []))
        self.max_running[key] = max(self.max_running.get(key, 0), held)

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
        self.ended.add(pod)
        phase = "Succeeded" if code == 0 else "Failed"
        term = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
        self.api.set_pod(ns, pod, phase, term)

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
