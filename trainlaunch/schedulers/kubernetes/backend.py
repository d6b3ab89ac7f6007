"""The Kubernetes backend: per role an Indexed Job + headless Service, through the official client.

App ids are ``<namespace>:<name>``, handles ``kubernetes://<session>/<namespace>:<name>``.
Rendering (render.py), checks (checks.py) and status mapping (status.py) are pure; this
module and client.py do the I/O. The ``kubernetes``
package is imported only when the cluster is contacted, so dryrun works without the extra.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import re
import secrets
import string
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainlaunch import settings, store
from trainlaunch.errors import AppNotFound, SchedulerError, UsageError
from trainlaunch.handles import make_app_handle, parse_app_handle
from trainlaunch.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    check_params,
)
from trainlaunch.schedulers.kubernetes import metrics as k8s_metrics
from trainlaunch.schedulers.kubernetes import status as st
from trainlaunch.schedulers.kubernetes import sweep as k8s_sweep
from trainlaunch.schedulers.kubernetes.checks import check_manifests, is_dns_label
from trainlaunch.schedulers.kubernetes.client import KubeApi, NotFound, connect, resolve_context
from trainlaunch.schedulers.kubernetes.image import DEFAULT_METRICS_MOUNT, runs_agent
from trainlaunch.schedulers.kubernetes.logs import LogReader
from trainlaunch.schedulers.kubernetes.render import (
    ANN_APP_NAME,
    BACKEND,
    DEFAULT_MAX_REQUEUES,
    DEFAULT_RDZV_PORT,
    DEFAULT_VERSION,
    LABEL_APP,
    LABEL_MANAGED_BY,
    LABEL_ROLE,
    LABEL_SESSION,
    RenderOptions,
    app_name,
    opt_str,
    render_app,
    role_from_job,
    to_yaml,
)
from trainlaunch.specs import AppDef, AppDryRunInfo, AppState, AppStatus, CfgVal, runopts

_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits
Objects = list[dict[str, Any]]  # API objects as JSON (the name `list` is a method below)


@dataclasses.dataclass(frozen=True)
class KubernetesRequest:
    """What schedule submits, in order, and where to."""

    namespace: str
    name: str
    resources: tuple[dict[str, Any], ...]
    context: str | None = None
    kubeconfig: str | None = None

    @property
    def app_id(self) -> str:
        """``namespace:name``."""
        return f"{self.namespace}:{self.name}"


def parse_app_id(app_id: str) -> tuple[str, str]:
    """``namespace:name`` -> (namespace, name)."""
    ns, sep, name = app_id.partition(":")
    if not sep or not is_dns_label(ns) or not is_dns_label(name):
        raise UsageError(f"not a kubernetes app id: {app_id!r} (expected NAMESPACE:NAME)")
    return ns, name


class KubernetesScheduler(Scheduler):
    """Indexed Jobs on a Kubernetes cluster."""

    backend = BACKEND
    poll_interval = 1.0  # seconds between looks while a followed log waits for its pod

    def __init__(
        self,
        session_name: str,
        context: str | None = None,
        kubeconfig: str | None = None,
        namespace: str | None = None,
    ) -> None:
        super().__init__(session_name)
        self.context, self.kubeconfig, self.namespace = context, kubeconfig, namespace
        self._apis: dict[tuple[str | None, str | None], KubeApi] = {}

    def run_opts(self) -> runopts:
        """namespace, context, kubeconfig, server_version and what goes into the pods."""
        o = runopts()
        o.add(
            "namespace", str, "namespace of the app (default: the kube context's, else 'default')"
        )
        o.add("context", str, "kubeconfig context (default: the current context)")
        o.add(
            "kubeconfig",
            str,
            "kubeconfig file (default: $KUBECONFIG or ~/.kube/config; "
            "inside a pod: its service account)",
        )
        o.add(
            "server_version",
            str,
            "oldest Kubernetes version to render for (1.27+); from 1.29 the Jobs count per "
            "replica: requeue limit, TRAINLAUNCH_RESTART_COUNT, podReplacementPolicy",
            default=f"{DEFAULT_VERSION[0]}.{DEFAULT_VERSION[1]}",
        )
        o.add("service_account", str, "service account the pods run as")
        o.add("priority_class", str, "priorityClassName of the pods")
        o.add(
            "node_selector",
            dict,
            "node labels the pods need, e.g. node.kubernetes.io/instance-type:p4d.24xlarge",
        )
        o.add("tolerations", list, "taints the pods tolerate: key[=value][:Effect]")
        o.add("labels", dict, "extra labels on Jobs, Services and pods")
        o.add("annotations", dict, "extra annotations on Jobs and pods")
        o.add("image_pull_secrets", list, "secrets to pull the image with")
        o.add("image_pull_policy", str, "Always, IfNotPresent or Never (default: the cluster's)")
        o.add("shm_size", str, "size limit of the memory-backed /dev/shm, e.g. 16Gi")
        o.add(
            "termination_grace_period",
            int,
            "seconds between SIGTERM (preemption, eviction, stop) and SIGKILL: time for the "
            "ranks to save (terminationGracePeriodSeconds; default: the cluster's, 30)",
        )
        o.add(
            "max_requeues",
            int,
            "how often each replica runs again after a preemption, eviction or a rank's exit 75, "
            "apart from max_retries; then the Job fails (needs server_version 1.29+)",
            default=DEFAULT_MAX_REQUEUES,
        )
        o.add(
            "rdzv_port",
            int,
            f"port rank 0 listens on ({settings.RDZV_PORT})",
            default=DEFAULT_RDZV_PORT,
        )
        o.add(
            "agent",
            str,
            "where pods running dist.ddp get trainlaunch's node agent: 'bundled' (a zipapp "
            "in a ConfigMap of the app: any image with Python and torch) or 'image' (the "
            "image has trainlaunch installed)",
            default="bundled",
        )
        o.add(
            "python",
            str,
            "the image's interpreter for roles that run 'python' (default: python3, else python)",
        )
        o.add(
            "metrics_pvc",
            str,
            "PersistentVolumeClaim for the ranks' metrics (ReadWriteMany for several pods); "
            "without one they stay inside the pods",
        )
        o.add(
            "metrics_mount",
            str,
            "where the metrics PVC is mounted in the pods; metrics go to MOUNT/<app name>/",
            default=DEFAULT_METRICS_MOUNT,
        )
        o.add(
            "metrics_local_dir",
            str,
            "the metrics PVC's storage as mounted on this machine (e.g. an NFS share), "
            "so `trainlaunch metrics` can read it",
        )
        return o

    def default_metrics_path(self, cfg: Mapping[str, CfgVal]) -> str | None:
        """On the metrics PVC (MOUNT/<app name>/) if one is named, else inside the pods."""
        return RenderOptions.from_cfg(cfg, "default").metrics_path()

    def metrics_location(self, resp: DescribeAppResponse) -> str | None:
        """metrics_local_dir/<app name>/ for a PVC mounted here; else a UsageError saying where."""
        return k8s_metrics.metrics_location(resp.app_id, resp.metadata.get("metrics"))

    # -- submission ------------------------------------------------------------------------------

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo:
        """Render the manifests (pure apart from reading the kubeconfig for the namespace)."""
        kubeconfig = opt_str(cfg, "kubeconfig") or self.kubeconfig
        context, namespace = resolve_context(kubeconfig, opt_str(cfg, "context") or self.context)
        namespace = opt_str(cfg, "namespace") or self.namespace or namespace
        if not is_dns_label(namespace):
            raise UsageError(f"namespace {namespace!r} is not a valid Kubernetes namespace")
        for role in app.roles:
            if not role.image:
                raise UsageError(
                    f"role {role.name!r} has no image; Kubernetes runs containers",
                    hint="give the component an image (e.g. --image)",
                )
        name = app_name(app.name, "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5)))
        opts = RenderOptions.from_cfg(cfg, namespace)
        zipapp = None
        if opts.agent == "bundled" and any(runs_agent(r) for r in app.roles):
            from trainlaunch.schedulers.kubernetes.bundle import build_agent_zipapp

            zipapp = build_agent_zipapp()
        docs = render_app(app, name, self.session_name, opts, zipapp)
        _check(docs, repr(app.name))
        request = KubernetesRequest(namespace, name, tuple(docs), context, kubeconfig)
        return AppDryRunInfo(
            request,
            fmt=lambda r: to_yaml(list(r.resources)),
            app=app,
            cfg=dict(cfg),
            scheduler=BACKEND,
            app_id=request.app_id,
            drawn={"app_id": name},
        )

    def submit_array_dryrun(
        self, infos: Sequence[AppDryRunInfo], max_parallel: int | None = None
    ) -> AppDryRunInfo | str:
        """With --max-parallel: every point (one pod each) as one index of ONE Indexed Job
        whose parallelism is the limit (sweep.py); without it, one Job per point ('')."""
        if max_parallel is None or not infos:
            return ""
        first: KubernetesRequest = infos[0].request
        apps = [i.app for i in infos]
        if any(a is None for a in apps):
            return "a point has no AppDef to render"
        opts = RenderOptions.from_cfg(infos[0].cfg, first.namespace)
        note = k8s_sweep.why_not([a.roles for a in apps if a], opts)
        if note:
            return note
        zipapp = None
        if opts.agent == "bundled" and any(runs_agent(r) for a in apps if a for r in a.roles):
            from trainlaunch.schedulers.kubernetes.bundle import build_agent_zipapp

            zipapp = build_agent_zipapp()
        name = first.name  # point 0's drawn name: every point is rendered under it
        per_point = [
            render_app(
                a, name, self.session_name, RenderOptions.from_cfg(i.cfg, first.namespace), zipapp
            )
            for i, a in zip(infos, apps, strict=True)
            if a
        ]
        roles = [a.roles[0] for a in apps if a]
        docs = k8s_sweep.combine(per_point, roles, self.session_name, opts, name, max_parallel)
        _check(docs, f"the sweep of {roles[0].name!r}")
        request = KubernetesRequest(
            first.namespace, name, tuple(docs), first.context, first.kubeconfig
        )
        return AppDryRunInfo(
            request,
            fmt=lambda r: to_yaml(list(r.resources)),
            app=apps[0],
            cfg=dict(infos[0].cfg),
            scheduler=BACKEND,
            app_id=request.app_id,
            drawn={"app_id": name},
        )

    def schedule_array(self, dryrun_info: AppDryRunInfo) -> builtins.list[str]:
        """Create the sweep's Indexed Job; point i's app id is ``ns:name:i``."""
        app_id = self.schedule(dryrun_info)
        job = next(d for d in dryrun_info.request.resources if d["kind"] == "Job")
        return [k8s_sweep.point_app_id(app_id, i) for i in range(job["spec"]["completions"])]

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        """Create each role's Job, then its Service (owned by the Job); undo on failure."""
        req: KubernetesRequest = dryrun_info.request
        api = self._api(req.kubeconfig, req.context)
        created: list[tuple[str, str]] = []
        owner: dict[str, Any] = {}
        try:
            for doc in req.resources:
                if doc["kind"] in ("Service", "ConfigMap") and owner:
                    # The Job's uid exists only now: with it, deleting the Job removes the
                    # Service and the agent's ConfigMap (which the first Job owns).
                    doc = {**doc, "metadata": {**doc["metadata"], "ownerReferences": [owner]}}
                stored = api.create(doc)
                created.append((doc["kind"], doc["metadata"]["name"]))
                if doc["kind"] == "Job":
                    meta = stored.get("metadata") or {}
                    owner = (
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": meta.get("name"),
                            "uid": meta.get("uid"),
                        }
                        if meta.get("uid")
                        else {}
                    )
        except SchedulerError:
            for kind, name in reversed(created):  # leave nothing half-submitted behind
                with contextlib.suppress(SchedulerError):  # the first error is the one to report
                    api.delete(kind, req.namespace, name)
            raise
        return req.app_id

    # -- queries ---------------------------------------------------------------------------------

    def describe(self, app_id: str) -> DescribeAppResponse:
        """Status from the app's Jobs and pods; AppNotFound when it has none."""
        group, point = k8s_sweep.split_point(app_id)
        if point is not None:
            return self._describe_point(group, point, app_id)
        ns, name = parse_app_id(app_id)
        api = self._api()
        jobs, stopped = self._jobs_or_stopped(api, ns, name, app_id)
        if stopped is not None:
            return DescribeAppResponse(
                app_id=app_id,
                status=AppStatus(
                    state=AppState.CANCELLED,
                    msg="stopped by `trainlaunch stop`; its Jobs, pods and Services were deleted",
                ),
                metadata={"namespace": ns, **stopped},
            )
        pods = api.list("Pod", ns, f"{LABEL_APP}={name}")
        roles = [role_from_job(j) for j in sorted(jobs, key=st.role_index)]
        app = None
        if roles and all(roles):
            app = AppDef(_ann(jobs[0], ANN_APP_NAME) or name, tuple(r for r in roles if r))
        return DescribeAppResponse(
            app_id=app_id,
            status=st.app_status(jobs, pods),
            app=app,
            metadata={
                "namespace": ns,
                "jobs": sorted(j["metadata"]["name"] for j in jobs),
                "context": self.context or "",
                **_metrics_meta(jobs),
            },
        )

    def _describe_point(self, group: str, point: int, app_id: str) -> DescribeAppResponse:
        """Point ``point`` of a --max-parallel sweep: the index of its Indexed Job."""
        ns, name = parse_app_id(group)
        api = self._api()
        jobs, stopped = self._jobs_or_stopped(api, ns, name, app_id)
        if stopped is not None:
            done = k8s_sweep.parse_indexes(stopped.get("completed"))
            failed = k8s_sweep.parse_indexes(stopped.get("failed"))
            state = AppState.CANCELLED
            if point in done or point in failed:
                state = AppState.SUCCEEDED if point in done else AppState.FAILED
            msg = "" if state != AppState.CANCELLED else "stopped by `trainlaunch stop`"
            return DescribeAppResponse(
                app_id=app_id, status=AppStatus(state=state, msg=msg), metadata={"namespace": ns}
            )
        job = jobs[0]
        if not k8s_sweep.is_sweep_job(job) or point >= int(job["spec"].get("completions") or 1):
            raise self._not_found(app_id)
        pods = api.list("Pod", ns, f"{LABEL_APP}={name}")
        template = role_from_job(job)
        app = None
        if template is not None:
            role = k8s_sweep.point_role(job, template, point)
            app = AppDef(_ann(job, ANN_APP_NAME) or name, (role,))
        return DescribeAppResponse(
            app_id=app_id,
            status=k8s_sweep.point_status(job, pods, point),
            app=app,
            metadata={
                "namespace": ns,
                "jobs": [job["metadata"]["name"]],
                "sweep_job": group,
                "context": self.context or "",
            },
        )

    def session_of(self, app_id: str) -> str | None:
        """The session in the handle the app's pods were given (None once it is stopped)."""
        ns, name = parse_app_id(k8s_sweep.split_point(app_id)[0])
        try:
            jobs = self._jobs(self._api(), ns, name, app_id)
        except AppNotFound:
            return None  # describe says whether it is unknown or was stopped
        spec = jobs[0].get("spec", {}).get("template", {}).get("spec", {})
        for container in spec.get("containers") or []:
            for var in container.get("env") or []:
                if var.get("name") == settings.HANDLE and var.get("value"):
                    value = var["value"].replace(k8s_sweep.INDEX_REF, "0")  # a sweep's points
                    with contextlib.suppress(UsageError):
                        return parse_app_handle(value).session
        return None

    def list(self) -> list[ListAppResponse]:
        """trainlaunch's apps in the namespace, newest first (as every backend)."""
        ns = self.namespace or resolve_context(self.kubeconfig, self.context)[1]
        by_app: dict[str, Objects] = {}
        for job in self._api().list("Job", ns, f"{LABEL_MANAGED_BY}=trainlaunch"):
            app = (job.get("metadata", {}).get("labels") or {}).get(LABEL_APP)
            if app:
                by_app.setdefault(app, []).append(job)
        rows = []
        for name, jobs in by_app.items():
            labels = jobs[0]["metadata"].get("labels") or {}
            app_id = f"{ns}:{name}"
            created = [c for c in (st.created(j) for j in jobs) if c is not None]
            rows.append(
                ListAppResponse(
                    app_id=app_id,
                    state=st.combine(st.list_state(j) for j in jobs),
                    app_handle=make_app_handle(
                        BACKEND, labels.get(LABEL_SESSION) or self.session_name, app_id
                    ),
                    name=_ann(jobs[0], ANN_APP_NAME) or name,
                    created=min(created, default=None),
                )
            )
        seen = {r.app_id for r in rows}
        for rec in _tombstones(ns):
            app_id = f"{ns}:{rec['name']}"
            if app_id not in seen:
                rows.append(
                    ListAppResponse(
                        app_id=app_id,
                        state=AppState.CANCELLED,
                        app_handle=make_app_handle(BACKEND, self.session_name, app_id),
                        name=rec["name"],
                        created=rec.get("stopped"),
                    )
                )
        return sorted(rows, key=lambda r: (r.created or 0.0, r.app_id), reverse=True)

    def cancel(self, app_id: str) -> None:
        """Delete the app's Jobs (pods go with them: background propagation) and Services."""
        group, point = k8s_sweep.split_point(app_id)
        if point is not None:
            raise UsageError(
                f"{app_id} is point {point} of a --max-parallel sweep: all its points are one "
                "Indexed Job, and Kubernetes cannot stop one index of a Job alone",
                hint="stop the whole sweep (`trainlaunch stop SWEEP`)",
            )
        ns, name = parse_app_id(app_id)
        api = self._api()
        selector = f"{LABEL_APP}={name}"
        jobs, services = api.list("Job", ns, selector), api.list("Service", ns, selector)
        deleted = [api.delete("Job", ns, j["metadata"]["name"]) for j in jobs]
        deleted += [api.delete("Service", ns, s["metadata"]["name"]) for s in services]
        # the agent's ConfigMap: owned by the first Job, so already going; deleting it too needs
        # no garbage collector (named by the pods' volumes: apps without one need no verb on it)
        for c in sorted({c for j in jobs for c in _configmaps(j)}):
            api.delete("ConfigMap", ns, c)
        if not any(deleted):
            if _tombstone(ns, name) is not None:
                return  # stopped before: stopping again is not an error
            raise self._not_found(app_id)
        # the Jobs are gone: remember the stop so status/list still say CANCELLED
        store.write_json(
            _tombstone_dir() / f"{ns}_{name}.json",
            {"namespace": ns, "name": name, "stopped": time.time(), **_indexes(jobs)},
        )

    def cancel_many(self, app_ids: Sequence[str]) -> None:
        """Stop several apps; the points of one --max-parallel sweep go with their one Job."""
        groups: builtins.list[str] = []
        for app_id in app_ids:
            group, point = k8s_sweep.split_point(app_id)
            if point is None:
                self.cancel(app_id)
            elif group not in groups:
                groups.append(group)
        for group in groups:
            self.cancel(group)

    # -- logs ------------------------------------------------------------------------------------

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: float | None = None,
        until: float | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterator[str]:
        """Lines of replica k (the pod with completion index k), one line per item."""
        if streams not in (None, Stream.COMBINED):
            raise UsageError(
                "Kubernetes keeps one combined log per container: stdout and "
                "stderr cannot be read apart",
                hint="leave out --stream: the pod log already has both, in order",
            )
        group, point = k8s_sweep.split_point(app_id)
        ns, name = parse_app_id(group)
        api = self._api()
        job = self._role_job(api, ns, name, app_id, role_name)
        n = int(job["spec"].get("completions") or 1) if point is None else 1
        if not 0 <= k < n:
            raise UsageError(f"role {role_name!r} has replicas 0..{n - 1}, not {k}")
        container = job["spec"]["template"]["spec"]["containers"][0]["name"]
        selector = f"{LABEL_APP}={name},{LABEL_ROLE}={job['metadata']['labels'][LABEL_ROLE]}"
        ended = None  # a point ends with its index, not with the sweep's Job
        if point is not None:
            ended = lambda: self.describe(app_id).status.is_terminal  # noqa: E731
        reader = LogReader(api, ns, name, selector, container, self.poll_interval, ended)
        index = k if point is None else point
        return reader.lines(index, re.compile(regex) if regex else None, since, until, should_tail)

    def stacks(self, app_id: str, native: bool = False) -> builtins.list[Any]:
        """Not supported yet (docs/hangs.md says why)."""
        raise SchedulerError(
            "`stack` is not supported on kubernetes yet: py-spy must run inside each pod "
            "(exec) with CAP_SYS_PTRACE, and trainlaunch's pods neither ship py-spy nor "
            "get that capability",
            hint="kubectl exec POD -- py-spy dump --pid 1 in an image with py-spy, "
            "run with securityContext.capabilities.add: [SYS_PTRACE]",
        )

    def log_replicas(self, app_id: str, role_name: str) -> builtins.list[int]:
        """Every completion index of the role's Job (a sweep's point: its one replica, 0)."""
        group, point = k8s_sweep.split_point(app_id)
        ns, name = parse_app_id(group)
        job = self._role_job(self._api(), ns, name, app_id, role_name)
        return [0] if point is not None else list(range(int(job["spec"].get("completions") or 1)))

    # -- plumbing --------------------------------------------------------------------------------

    def _api(self, kubeconfig: str | None = None, context: str | None = None) -> KubeApi:
        key = (kubeconfig or self.kubeconfig, context or self.context)
        if key not in self._apis:
            self._apis[key] = connect(*key)
        return self._apis[key]

    def _jobs(self, api: KubeApi, ns: str, name: str, app_id: str) -> Objects:
        try:
            jobs = api.list("Job", ns, f"{LABEL_APP}={name}")
        except NotFound:
            jobs = []
        if not jobs:
            raise self._not_found(app_id)
        return jobs

    def _jobs_or_stopped(
        self, api: KubeApi, ns: str, name: str, app_id: str
    ) -> tuple[Objects, dict[str, Any] | None]:
        """The app's Jobs, or (none and) the record `stop` left; AppNotFound without either."""
        try:
            return self._jobs(api, ns, name, app_id), None
        except AppNotFound:
            stopped = _tombstone(ns, name)
            if stopped is None:
                raise
            return [], stopped

    def _role_job(
        self, api: KubeApi, ns: str, name: str, app_id: str, role_name: str
    ) -> dict[str, Any]:
        jobs = self._jobs(api, ns, name, app_id)
        for job in jobs:
            if st.job_role_name(job) == role_name:
                return job
        roles = ", ".join(sorted(st.job_role_name(j) for j in jobs))
        raise UsageError(f"app {app_id} has no role {role_name!r}; roles: {roles}")

    def _not_found(self, app_id: str) -> AppNotFound:
        where = f"kube context {self.context!r}" if self.context else "the current kube context"
        return AppNotFound(
            f"no kubernetes app {app_id} in {where}",
            hint="it may have been stopped or deleted; `trainlaunch list` shows "
            "what exists (--cfg context=... for another cluster)",
        )

    def close(self) -> None:
        """Close the HTTP pools."""
        for api in self._apis.values():
            api.close()
        self._apis.clear()


def _check(docs: Objects, what: str) -> None:
    """UsageError naming every problem check_manifests finds in docs."""
    problems = check_manifests(docs)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(
            f"cannot run {what} on Kubernetes: {problems[0]}{more}",
            hint="; ".join(problems[1:4]) or None,
        )


def _tombstone_dir() -> Path:
    return store.ensure_private_dir(store.ensure_private_dir(store.store_root()) / "kubernetes")


def _tombstone(ns: str, name: str) -> dict[str, Any] | None:
    rec = store.read_json_or_none(store.store_root() / "kubernetes" / f"{ns}_{name}.json")
    return rec if isinstance(rec, dict) else None


def _tombstones(ns: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    found = store.existing_private_dir(store.store_root() / "kubernetes")  # a query creates none
    for path in sorted(found.glob(f"{ns}_*.json")) if found else []:
        rec = store.read_json_or_none(path)
        if isinstance(rec, dict) and rec.get("namespace") == ns and rec.get("name"):
            out.append(rec)
    return out


def _indexes(jobs: Objects) -> dict[str, str]:
    """A sweep Job's completed and failed indexes, kept when it is stopped (points keep them)."""
    status = next((j.get("status") or {} for j in jobs if k8s_sweep.is_sweep_job(j)), None)
    if status is None:
        return {}
    return {
        "completed": status.get("completedIndexes") or "",
        "failed": status.get("failedIndexes") or "",
    }


def _configmaps(job: Mapping[str, Any]) -> list[str]:
    """The ConfigMaps a Job's pods mount."""
    volumes = job.get("spec", {}).get("template", {}).get("spec", {}).get("volumes") or []
    return [str(v["configMap"]["name"]) for v in volumes if (v.get("configMap") or {}).get("name")]


def _metrics_meta(jobs: Objects) -> dict[str, Any]:
    """{"metrics": where the ranks write metrics} from the first role's Job, if recorded."""
    record = k8s_metrics.read_record(sorted(jobs, key=st.role_index)[0])
    return {"metrics": record} if record else {}


def _ann(obj: Mapping[str, Any], key: str) -> str:
    return str((obj.get("metadata", {}).get("annotations") or {}).get(key) or "")


# create_scheduler's params (the runner passes each backend only its own)
SCHEDULER_PARAMS = frozenset({"context", "kubeconfig", "namespace"})


def create_scheduler(session_name: str, **params: Any) -> KubernetesScheduler:
    """The registry's entry point; params: context, kubeconfig, namespace (others: UsageError)."""
    check_params(BACKEND, params, SCHEDULER_PARAMS)
    return KubernetesScheduler(session_name, **params)
