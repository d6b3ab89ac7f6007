"""A small in-memory Kubernetes API server over HTTP on 127.0.0.1, for wire-contract tests.

It speaks what trainlaunch uses (Jobs, Services, Pods, pod logs) the way the real API server
does: 201 on create, ``Status`` bodies with the real reasons (AlreadyExists, NotFound,
Forbidden), chunked ``text/plain`` log streams, and the batch/v1 delete default that
*orphans* a Job's pods unless ``propagationPolicy`` says otherwise. It has no controllers:
tests play the Job controller and the kubelet with ``add_pod``, ``set_pod`` and
``set_job_status``. Every request is recorded for assertions.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import datetime
import json
import queue
import re
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

_ROUTES = [
    (
        re.compile(
            r"^/apis/batch/v1/namespaces/(?P<ns>[^/]+)/jobs(?:/(?P<name>[^/]+))?(?P<sub>/status)?$"
        ),
        "jobs",
    ),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/services(?:/(?P<name>[^/]+))?$"), "services"),
    (
        re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/configmaps(?:/(?P<name>[^/]+))?$"),
        "configmaps",
    ),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/secrets(?:/(?P<name>[^/]+))?$"), "secrets"),
    (
        re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods(?:/(?P<name>[^/]+))?(?P<sub>/log)?$"),
        "pods",
    ),
]
_KINDS = {
    "jobs": ("Job", "batch/v1", "batch"),
    "services": ("Service", "v1", ""),
    "configmaps": ("ConfigMap", "v1", ""),
    "secrets": ("Secret", "v1", ""),
    "pods": ("Pod", "v1", ""),
}
# Custom resources it can serve once installed (``FakeApiServer(crds=...)``):
# plural -> (kind, group, served versions (the first is stored), namespaced)
CRDS: dict[str, tuple[str, str, tuple[str, ...], bool]] = {
    "jobsets": ("JobSet", "jobset.x-k8s.io", ("v1alpha2",), True),
    "trainjobs": ("TrainJob", "trainer.kubeflow.org", ("v1alpha1",), True),
    "clustertrainingruntimes": (
        "ClusterTrainingRuntime",
        "trainer.kubeflow.org",
        ("v1alpha1",),
        False,
    ),
    "workloads": ("Workload", "kueue.x-k8s.io", ("v1beta2", "v1beta1"), True),
    "localqueues": ("LocalQueue", "kueue.x-k8s.io", ("v1beta2", "v1beta1"), True),
}
_CUSTOM = re.compile(
    r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/(?:namespaces/(?P<ns>[^/]+)/)?"
    r"(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?P<sub>/status)?$"
)
_KINDS.update({plural: (k, f"{g}/{v[0]}", g) for plural, (k, g, v, _) in CRDS.items()})
_ACCESS_REVIEW = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
_END = object()
_DROP = object()


@dataclasses.dataclass
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str]  # lower-case names


class LogSource:
    """The log of one pod: timestamped output, plus live streams for ``follow``."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, bytes]] = []
        self.closed = False
        self._followers: list[queue.Queue[Any]] = []
        self._lock = threading.Lock()

    def write(self, data: bytes | str, at: float | None = None) -> None:
        """Append output, stamped at unix time ``at`` (default now); followers get it at once."""
        raw = data.encode() if isinstance(data, str) else data
        when = datetime.datetime.fromtimestamp(
            time.time() if at is None else at, datetime.timezone.utc
        )
        with self._lock:
            self.entries.append((when.strftime("%Y-%m-%dT%H:%M:%S.%f000Z"), raw))
            for q in self._followers:
                q.put(raw)

    def close(self, drop: bool = False) -> None:
        """The container exited: followers' streams end (with drop, the connection breaks)."""
        with self._lock:
            self.closed = True
            for q in self._followers:
                q.put(_DROP if drop else _END)

    def attach(self, follow: bool) -> tuple[list[tuple[str, bytes]], queue.Queue[Any] | None]:
        """What was written so far and, when following a running container, what comes next."""
        with self._lock:
            live: queue.Queue[Any] | None = None
            if follow and not self.closed:
                live = queue.Queue()
                self._followers.append(live)
            return list(self.entries), live


class FakeApiServer:
    """Start with ``start()``; ``url`` is the server to put in a kubeconfig."""

    def __init__(self, version: str = "1.33", crds: tuple[str, ...] = ()) -> None:
        self.version = version
        # the CRDs installed (plurals of CRDS; versions: all served, or the one given as
        # 'plural/version'): others answer 404 as on a cluster without them
        self.crds: dict[str, tuple[str, ...]] = {}
        for crd in crds:
            plural, _, version_ = crd.partition("/")
            self.crds[plural] = (version_,) if version_ else CRDS[plural][2]
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.requests: list[Recorded] = []
        self.logs: dict[tuple[str, str], LogSource] = {}
        self.follow_started: queue.Queue[str] = queue.Queue()
        self.denied: set[tuple[str, str, str, str]] = set()  # (verb, group, resource, sub)
        self._failures: list[tuple[str, re.Pattern[str], int, str, str]] = []
        self._lock = threading.RLock()
        self._clock = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> FakeApiServer:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """End every open log stream and stop serving."""
        for log in self.logs.values():
            log.close()
        self._server.shutdown()
        self._server.server_close()

    # -- what tests do -------------------------------------------------------------------------

    def deny(self, verb: str, resource: str, group: str = "", subresource: str = "") -> None:
        """RBAC says no to this (SelfSubjectAccessReview answers allowed: false for it)."""
        self.denied.add((verb, group, resource, subresource))

    def review(self, body: dict[str, Any]) -> dict[str, Any]:
        """Answer a SelfSubjectAccessReview as the API server's authorizer would."""
        attrs = (body.get("spec") or {}).get("resourceAttributes") or {}
        asked = (
            attrs.get("verb", ""),
            attrs.get("group", ""),
            attrs.get("resource", ""),
            attrs.get("subresource", ""),
        )
        allowed = asked not in self.denied
        status: dict[str, Any] = {"allowed": allowed}
        if not allowed:
            status["reason"] = "RBAC: no rule allows it"
        return {**body, "status": status}

    def fail(self, method: str, path_regex: str, code: int, reason: str, message: str) -> None:
        """Answer the next matching request with an error Status."""
        self._failures.append((method, re.compile(path_regex), code, reason, message))

    def get(self, resource: str, ns: str, name: str) -> dict[str, Any] | None:
        """A stored object (a copy)."""
        with self._lock:
            obj = self.objects.get((resource, ns, name))
            return copy.deepcopy(obj) if obj else None

    def names(self, resource: str, ns: str) -> list[str]:
        """Names of the stored objects of a resource in a namespace."""
        with self._lock:
            return sorted(n for (r, s, n) in self.objects if r == resource and s == ns)

    def delete_cascading(self, resource: str, ns: str, name: str, orphan: bool = False) -> None:
        """Delete an object and (unless orphan) what it owns, and what that owns: the garbage
        collector's work, done at once."""
        with self._lock:
            obj = self.objects.pop((resource, ns, name))
            if orphan:
                return
            uid = obj["metadata"]["uid"]
            for (r, s, n), o in list(self.objects.items()):
                if (r, s, n) in self.objects and any(
                    ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences", [])
                ):
                    self.delete_cascading(r, s, n)

    def set_status(self, resource: str, ns: str, name: str, status: dict[str, Any]) -> None:
        """What a controller reports in an object's status (JobSet, TrainJob, Workload)."""
        with self._lock:
            self.objects[(resource, ns, name)]["status"] = status

    def put(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store an object as if someone created it."""
        with self._lock:
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", self._now())
            meta["resourceVersion"] = str(self._tick())
            kind, api_version, _ = _KINDS[resource]
            if resource == "secrets" and "stringData" in obj:  # write-only: stored as data
                data = obj.setdefault("data", {})
                for key, value in obj.pop("stringData").items():
                    data[key] = base64.b64encode(value.encode()).decode()
            obj.setdefault("kind", kind)
            obj.setdefault("apiVersion", api_version)
            self.objects[(resource, meta.get("namespace", ""), meta["name"])] = obj
            return copy.deepcopy(obj)

    def add_pod(
        self,
        ns: str,
        job: str,
        index: int,
        phase: str = "Pending",
        state: dict[str, Any] | None = None,
        conditions: list[dict[str, Any]] | None = None,
        suffix: str | None = None,
        reason: str | None = None,
        counts: tuple[int, int] = (0, 0),
    ) -> str:
        """What the Job controller does: a pod for one completion index, owned by the Job.

        counts: the index's (failures, ignored failures) before this pod, which the controller
        writes into annotations when the Job has backoffLimitPerIndex (the second only when > 0).
        """
        owner = self.objects[("jobs", ns, job)]
        template = owner["spec"]["template"]
        name = f"{job}-{index}-{suffix or uuid.uuid4().hex[:5]}"
        annotations = {
            **template["metadata"].get("annotations", {}),
            "batch.kubernetes.io/job-completion-index": str(index),
        }
        if "backoffLimitPerIndex" in owner["spec"]:
            annotations["batch.kubernetes.io/job-index-failure-count"] = str(counts[0])
            if counts[1]:
                annotations["batch.kubernetes.io/job-index-ignored-failure-count"] = str(counts[1])
        container = template["spec"]["containers"][0]["name"]
        pod = {
            "metadata": {
                "name": name,
                "namespace": ns,
                "annotations": annotations,
                "labels": {**template["metadata"]["labels"], "job-name": job},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": job,
                        "uid": owner["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {**copy.deepcopy(template["spec"]), "hostname": f"{job}-{index}"},
            "status": {},
        }
        self.put("pods", pod)
        self.logs[(ns, name)] = LogSource()
        self.set_pod(ns, name, phase, state or {}, conditions or [], reason, container)
        return name

    def set_pod(
        self,
        ns: str,
        name: str,
        phase: str,
        state: dict[str, Any] | None = None,
        conditions: list[dict[str, Any]] | None = None,
        reason: str | None = None,
        container: str | None = None,
    ) -> None:
        """What the kubelet reports: phase, the container's state, pod conditions."""
        with self._lock:
            pod = self.objects[("pods", ns, name)]
            container = container or pod["spec"]["containers"][0]["name"]
            status: dict[str, Any] = {"phase": phase, "conditions": conditions or []}
            if state:
                status["containerStatuses"] = [
                    {
                        "name": container,
                        "state": state,
                        "ready": False,
                        "restartCount": 0,
                        "image": "",
                        "imageID": "",
                    }
                ]
            if reason:
                status["reason"] = reason
            pod["status"] = status

    def set_job_status(self, ns: str, name: str, **status: Any) -> None:
        """What the Job controller reports (conditions, ready, failed, ...)."""
        with self._lock:
            self.objects[("jobs", ns, name)]["status"] = status

    # -- internals -----------------------------------------------------------------------------

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _now(self) -> str:
        base = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
        return (base + datetime.timedelta(seconds=self._tick())).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _injected(self, method: str, path: str) -> tuple[int, str, str] | None:
        with self._lock:
            for i, (m, rx, code, reason, message) in enumerate(self._failures):
                if m == method and rx.search(path):
                    del self._failures[i]
                    return code, reason, message
        return None


def _invalid(route: re.Match[str], body: Any) -> str:
    """What the CRD's schema says is wrong with a custom object ('' if nothing): stricter than
    a real API server, which prunes unknown fields instead of refusing them."""
    from k8s_schemas import schema_errors

    body = {**body, "apiVersion": f"{route['group']}/{route['version']}"}
    errors = schema_errors(body)
    return f"{body.get('kind')}.{route['group']} is invalid: {'; '.join(errors)}" if errors else ""


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    """A Kubernetes ``Status`` failure body."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term not in labels:
            return False
    return True


def _handler(api: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in separate writes: without this, Nagle + delayed ACK
            # add 40 ms to every response.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def _serve(self, method: str) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            api.requests.append(
                Recorded(
                    method, url.path, query, body, {k.lower(): v for k, v in self.headers.items()}
                )
            )
            injected = api._injected(method, url.path)
            if injected:
                return self._json(injected[0], status_body(*injected))
            if url.path in ("/version", "/version/"):  # the python client asks with the slash
                major, minor = api.version.split(".")
                return self._json(
                    200, {"major": major, "minor": minor, "gitVersion": f"v{api.version}.0"}
                )
            if url.path == _ACCESS_REVIEW and method == "POST":
                return self._json(201, api.review(body))
            for rx, resource in _ROUTES:
                m = rx.match(url.path)
                if m:
                    return self._resource(
                        method, resource, m["ns"], m["name"], m.groupdict().get("sub"), query, body
                    )
            m = _CUSTOM.match(url.path)
            if m and m["version"] in api.crds.get(m["plural"], ()):
                _, group, _, namespaced = CRDS[m["plural"]]
                if m["group"] == group and namespaced == (m["ns"] is not None):
                    if method == "POST" and m["name"] is None and (errors := _invalid(m, body)):
                        return self._json(422, status_body(422, "Invalid", errors))
                    ns = m["ns"] or ""
                    return self._resource(method, m["plural"], ns, m["name"], m["sub"], query, body)
            self._json(
                404,
                status_body(404, "NotFound", "the server could not find the requested resource"),
            )

        def _resource(
            self,
            method: str,
            resource: str,
            ns: str,
            name: str | None,
            sub: str | None,
            query: dict[str, str],
            body: Any,
        ) -> None:
            kind, api_version, group = _KINDS[resource]
            plural = f"{resource}.{group}" if group else resource
            if method == "POST" and name is None:
                if body["metadata"].get("namespace", ns) != ns:
                    return self._json(
                        400,
                        status_body(
                            400,
                            "BadRequest",
                            "the namespace of the "
                            "provided object does not match the namespace sent on the request",
                        ),
                    )
                if api.get(resource, ns, body["metadata"]["name"]):
                    return self._json(
                        409,
                        status_body(
                            409,
                            "AlreadyExists",
                            f'{plural} "{body["metadata"]["name"]}" already exists',
                        ),
                    )
                meta = {**body["metadata"], **({"namespace": ns} if ns else {})}
                stored = api.put(resource, {**body, "metadata": meta})
                return self._json(201, stored)
            if method == "GET" and name is None:
                with api._lock:
                    items = [
                        copy.deepcopy(o)
                        for (r, s, _), o in api.objects.items()
                        if r == resource
                        and s == ns
                        and _matches(
                            o["metadata"].get("labels") or {}, query.get("labelSelector", "")
                        )
                    ]
                return self._json(
                    200,
                    {
                        "kind": f"{kind}List",
                        "apiVersion": api_version,
                        "metadata": {"resourceVersion": str(api._tick())},
                        "items": items,
                    },
                )
            obj = api.get(resource, ns, name or "")
            if obj is None:
                return self._json(404, status_body(404, "NotFound", f'{plural} "{name}" not found'))
            if method == "GET" and sub == "/log":
                return self._log(ns, obj, query)
            if method == "GET":
                return self._json(200, obj)
            if method == "DELETE":
                policy = query.get("propagationPolicy") or (body or {}).get("propagationPolicy")
                # batch/v1 Jobs orphan their pods by default; other kinds cascade (as the GC)
                orphan = resource == "jobs" and policy not in ("Background", "Foreground")
                api.delete_cascading(resource, ns, name or "", orphan)
                return self._json(200, obj)
            self._json(405, status_body(405, "MethodNotAllowed", f"{method} is not supported"))

        def _log(self, ns: str, pod: dict[str, Any], query: dict[str, str]) -> None:
            name = pod["metadata"]["name"]
            container = query.get("container") or pod["spec"]["containers"][0]["name"]
            if container != pod["spec"]["containers"][0]["name"]:
                return self._json(
                    400,
                    status_body(
                        400, "BadRequest", f"container {container} is not valid for pod {name}"
                    ),
                )
            started = any(
                "running" in cs["state"] or "terminated" in cs["state"]
                for cs in pod["status"].get("containerStatuses", [])
            )
            if not started and pod["status"].get("phase") in (None, "Pending"):
                return self._json(
                    400,
                    status_body(
                        400,
                        "BadRequest",
                        f'container "{container}" in '
                        f'pod "{name}" is waiting to start: ContainerCreating',
                    ),
                )
            source = api.logs[(ns, name)]
            follow = query.get("follow") in ("true", "True")
            stamps = query.get("timestamps") in ("true", "True")
            since = int(query["sinceSeconds"]) if "sinceSeconds" in query else None
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            entries, live = source.attach(follow)
            cutoff = _cutoff(since)
            for ts, data in entries:
                if cutoff is None or ts >= cutoff:
                    self._chunk((ts.encode() + b" " if stamps else b"") + data)
            if live is not None:
                api.follow_started.put(name)
                while (data := live.get(timeout=30)) not in (_END, _DROP):
                    self._chunk(data)
                if data is _DROP:  # no terminating chunk: the client sees a broken stream
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
            self.wfile.write(b"0\r\n\r\n")

        def _chunk(self, data: bytes) -> None:
            if data:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

        def _json(self, code: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _cutoff(since_seconds: int | None) -> str | None:
    """Entries stamped before now - sinceSeconds are skipped, as the kubelet does."""
    if since_seconds is None:
        return None
    now = datetime.datetime.now(datetime.timezone.utc)
    return (now - datetime.timedelta(seconds=since_seconds)).strftime("%Y-%m-%dT%H:%M:%S")
