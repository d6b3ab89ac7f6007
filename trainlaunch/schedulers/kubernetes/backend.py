"""The Kubernetes backend: the app's objects (Jobs, a JobSet or a TrainJob) through the official client.

App ids are ``<namespace>:<name>``, handles ``kubernetes://<session>/<namespace>:<name>``.
Rendering (render.py and the targets'), checks (checks.py) and status mapping (status.py)
are pure; this module, lookup.py and client.py do the I/O. The ``kubernetes`` package is
imported only when the cluster is contacted, so dryrun works without the extra.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import re
import secrets
import string
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from trainlaunch import settings
from trainlaunch.errors import AppNotFound, SchedulerError, Unsupported, UsageError
from trainlaunch.handles import make_app_handle, parse_app_handle
from trainlaunch.schedulers.api import (
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    check_params,
)
from trainlaunch.schedulers.kubernetes import kueue, lookup
from trainlaunch.schedulers.kubernetes import metrics as k8s_metrics
from trainlaunch.schedulers.kubernetes import status as st
from trainlaunch.schedulers.kubernetes import stopped as stop_records
from trainlaunch.schedulers.kubernetes import sweep as k8s_sweep
from trainlaunch.schedulers.kubernetes.checks import check_manifests
from trainlaunch.schedulers.kubernetes.client import KubeApi, NotFound, connect, resolve_context
from trainlaunch.schedulers.kubernetes.image import runs_agent
from trainlaunch.schedulers.kubernetes.labels import (
    ANN_APP_NAME,
    ANN_CODE,
    LABEL_APP,
    LABEL_MANAGED_BY,
    LABEL_ROLE,
    LABEL_SESSION,
)
from trainlaunch.schedulers.kubernetes.logs import LogReader
from trainlaunch.schedulers.kubernetes.names import BACKEND, app_name
from trainlaunch.schedulers.kubernetes.options import RenderOptions, opt_str, scheduler_opts
from trainlaunch.schedulers.kubernetes.render import render_app, role_from_job
from trainlaunch.schedulers.kubernetes.request import (
    KubernetesRequest,
    request_text,
    substituted_text,
)
from trainlaunch.schedulers.kubernetes.syntax import is_dns_label
from trainlaunch.schedulers.kubernetes.targets import APP_KINDS, role_views
from trainlaunch.specs import AppDef, AppDryRunInfo, AppState, AppStatus, CfgVal, runopts

CAPABILITIES = Capabilities(logs=True, arrays=True)  # stack: not yet (docs/hangs.md)
_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits
Objects = list[dict[str, Any]]  # API objects as JSON (the name `list` is a method below)


def parse_app_id(app_id: str) -> tuple[str, str]:
    """``namespace:name`` -> (namespace, name)."""
    ns, sep, name = app_id.partition(":")
    if not sep or not is_dns_label(ns) or not is_dns_label(name):
        raise UsageError(f"not a kubernetes app id: {app_id!r} (expected NAMESPACE:NAME)")
    return ns, name


class KubernetesScheduler(Scheduler):
    """Indexed Jobs on a Kubernetes cluster."""

    backend = BACKEND
    capabilities = CAPABILITIES
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
        """namespace, context, kubeconfig, the target, and what goes into the pods."""
        return scheduler_opts()

    def default_metrics_path(self, cfg: Mapping[str, CfgVal]) -> str | None:
        """On the metrics PVC (MOUNT/<app name>/) if one is named, else inside the pods."""
        return RenderOptions.from_cfg(cfg, "default").metrics_path()

    def metrics_location(self, resp: DescribeAppResponse) -> str | None:
        """metrics_local_dir/<app name>/ for a PVC mounted here; else a UsageError saying where
        (an app whose Jobs carry no metrics record: the recorded path, as on every backend)."""
        found = k8s_metrics.metrics_location(resp.app_id, resp.metadata.get("metrics"))
        return found if found is not None else super().metrics_location(resp)

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
        request = KubernetesRequest(namespace, name, tuple(docs), context, kubeconfig, opts.api)
        return AppDryRunInfo(
            request,
            fmt=request_text,
            fmt_substituted=substituted_text,
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
            fmt=request_text,
            fmt_substituted=substituted_text,
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
                if doc["kind"] in ("Service", "ConfigMap", "Secret") and owner:
                    # The owner's uid exists only now: with it, deleting the Job (JobSet,
                    # TrainJob) removes its Service, and the first one the agent's ConfigMap
                    # and the Secret.
                    doc = {**doc, "metadata": {**doc["metadata"], "ownerReferences": [owner]}}
                stored = api.create(doc)
                created.append((doc["kind"], doc["metadata"]["name"]))
                if doc["kind"] in APP_KINDS:
                    meta = stored.get("metadata") or {}
                    owner = (
                        {
                            "apiVersion": doc["apiVersion"],
                            "kind": doc["kind"],
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
        found, stopped = self._found_or_stopped(api, ns, name, app_id)
        if stopped is not None:
            return DescribeAppResponse(
                app_id=app_id,
                status=AppStatus(
                    state=AppState.CANCELLED,
                    msg="stopped by `trainlaunch stop`; its objects and pods were deleted",
                ),
                metadata={"namespace": ns, **stopped},
            )
        jobs = found.views
        pods = api.list("Pod", ns, f"{LABEL_APP}={name}")
        roles = [role_from_job(j) for j in sorted(jobs, key=st.role_index)]
        app = None
        if roles and all(roles):
            app = AppDef(
                _ann(jobs[0], ANN_APP_NAME) or name,
                tuple(r for r in roles if r),
                metadata=_code_of(jobs[0]),
            )
        status = st.app_status(jobs, pods)
        held = [o for o in found.objects if kueue.held(o)]
        if held and status.state == AppState.PENDING:  # Kueue has not admitted it (yet)
            status = dataclasses.replace(status, msg=lookup.admission(api, held[0]))
        return DescribeAppResponse(
            app_id=app_id,
            status=status,
            app=app,
            metadata={
                "namespace": ns,
                "objects": [f"{o['kind']}/{o['metadata']['name']}" for o in found.objects],
                "jobs": sorted(j["metadata"]["name"] for j in jobs),
                "context": self.context or "",
                **_metrics_meta(jobs),
            },
        )

    def _describe_point(self, group: str, point: int, app_id: str) -> DescribeAppResponse:
        """Point ``point`` of a --max-parallel sweep: the index of its Indexed Job."""
        ns, name = parse_app_id(group)
        api = self._api()
        found, stopped = self._found_or_stopped(api, ns, name, app_id)
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
        job = found.views[0]
        if not k8s_sweep.is_sweep_job(job) or point >= int(job["spec"].get("completions") or 1):
            raise self._not_found(app_id)
        pods = api.list("Pod", ns, f"{LABEL_APP}={name}")
        template = role_from_job(job)
        app = None
        if template is not None:
            role = k8s_sweep.point_role(job, template, point)
            app = AppDef(_ann(job, ANN_APP_NAME) or name, (role,), metadata=_code_of(job))
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
            jobs = self._found(self._api(), ns, name, app_id).views
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
        found = lookup.find(self._api(), ns, f"{LABEL_MANAGED_BY}=trainlaunch", every_kind=True)
        for obj in found.objects:
            app = (obj.get("metadata", {}).get("labels") or {}).get(LABEL_APP)
            if app:
                by_app.setdefault(app, []).extend(role_views(obj))
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
        for rec in stop_records.records(ns):
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
        found = lookup.find(api, ns, selector, every_kind=True)
        jobs, services = found.views, api.list("Service", ns, selector)
        deleted = [api.delete(o["kind"], ns, o["metadata"]["name"]) for o in found.objects]
        deleted += [api.delete("Service", ns, s["metadata"]["name"]) for s in services]
        # the agent's ConfigMap: owned by the first Job, so already going; deleting it too needs
        # no garbage collector (named by the pods' volumes: apps without one need no verb on it)
        for c in sorted({c for j in jobs for c in _configmaps(j)}):
            api.delete("ConfigMap", ns, c)
        for s in sorted({s for j in jobs for s in _secrets(j)}):  # likewise the app's Secret
            api.delete("Secret", ns, s)
        if not any(deleted):
            if stop_records.record_of(ns, name) is not None:
                return  # stopped before: stopping again is not an error
            raise self._not_found(app_id)
        # the Jobs are gone: remember the stop so status/list still say CANCELLED
        stop_records.record(ns, name, jobs)

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
        raise Unsupported(
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

    def _found(self, api: KubeApi, ns: str, name: str, app_id: str) -> lookup.Found:
        try:
            found = lookup.find(api, ns, f"{LABEL_APP}={name}")
        except NotFound:  # the namespace does not exist
            found = lookup.Found()
        if not found.objects:
            raise self._not_found(app_id, found.forbidden)
        return found

    def _found_or_stopped(
        self, api: KubeApi, ns: str, name: str, app_id: str
    ) -> tuple[lookup.Found, dict[str, Any] | None]:
        """The app's objects, or (none and) the record `stop` left; AppNotFound without either."""
        try:
            return self._found(api, ns, name, app_id), None
        except AppNotFound:
            stopped = stop_records.record_of(ns, name)
            if stopped is None:
                raise
            return lookup.Found(), stopped

    def _role_job(
        self, api: KubeApi, ns: str, name: str, app_id: str, role_name: str
    ) -> dict[str, Any]:
        jobs = self._found(api, ns, name, app_id).views
        for job in jobs:
            if st.job_role_name(job) == role_name:
                return job
        roles = ", ".join(sorted(st.job_role_name(j) for j in jobs))
        raise UsageError(f"app {app_id} has no role {role_name!r}; roles: {roles}")

    def _not_found(self, app_id: str, forbidden: Sequence[str] = ()) -> AppNotFound:
        where = f"kube context {self.context!r}" if self.context else "the current kube context"
        unsearched = (
            f" (not searched: {', '.join(forbidden)}, forbidden by RBAC)" if forbidden else ""
        )
        return AppNotFound(
            f"no kubernetes app {app_id} in {where}{unsearched}",
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


def _configmaps(job: Mapping[str, Any]) -> list[str]:
    """The ConfigMaps a Job's pods mount."""
    volumes = job.get("spec", {}).get("template", {}).get("spec", {}).get("volumes") or []
    return [str(v["configMap"]["name"]) for v in volumes if (v.get("configMap") or {}).get("name")]


def _secrets(job: Mapping[str, Any]) -> list[str]:
    """The Secrets a Job's containers take env values from."""
    containers = job.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
    return [
        str(ref["name"])
        for c in containers
        for e in c.get("env") or []
        if (ref := (e.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
    ]


def _metrics_meta(jobs: Objects) -> dict[str, Any]:
    """{"metrics": where the ranks write metrics} from the first role's Job, if recorded."""
    record = k8s_metrics.read_record(sorted(jobs, key=st.role_index)[0])
    return {"metrics": record} if record else {}


def _ann(obj: Mapping[str, Any], key: str) -> str:
    return str((obj.get("metadata", {}).get("annotations") or {}).get(key) or "")


def _code_of(job: Mapping[str, Any]) -> dict[str, Any]:
    """The code of record the Job carries, as the run record's ``code`` (describe shows it)."""
    import json

    from trainlaunch.specs import RUN_RECORD_KEY as META_KEY

    try:
        code = json.loads(_ann(job, ANN_CODE) or "null")
    except ValueError:
        code = None
    return {META_KEY: {"code": code}} if isinstance(code, dict) else {}


# create_scheduler's params (the runner passes each backend only its own)
SCHEDULER_PARAMS = frozenset({"context", "kubeconfig", "namespace"})


def create_scheduler(session_name: str, **params: Any) -> KubernetesScheduler:
    """The registry's entry point; params: context, kubeconfig, namespace (others: UsageError)."""
    check_params(BACKEND, params, SCHEDULER_PARAMS)
    return KubernetesScheduler(session_name, **params)
