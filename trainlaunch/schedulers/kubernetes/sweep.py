"""A sweep under ``--max-parallel``: every point one completion index of ONE Indexed Job (pure).

``parallelism = K`` is the limit, enforced by the Job controller with nothing of ours running
in the cluster: at most K pods of the Job exist at once and the next index starts when one
ends. Each point must be a single pod (one role, one replica); the points' manifests are
rendered as usual under one shared name, and must then differ only in the container's
command, args and env. The pod picks its point with a ``/bin/sh`` ``case`` on
``JOB_COMPLETION_INDEX`` (exports the point's own env, sets its own words, then ``exec``).
``backoffLimitPerIndex`` keeps one point's failure from touching the others (so 1.29+).
Point i of app ``ns:name`` is the app id ``ns:name:i``; its state is its index's
(``status.completedIndexes``/``failedIndexes``, else the pod of index i). See docs/kubernetes.md.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from trainlaunch import settings
from trainlaunch.errors import UsageError
from trainlaunch.handles import make_app_handle
from trainlaunch.schedulers.kubernetes.job_checks import SWEEP_POINTS
from trainlaunch.schedulers.kubernetes.labels import ANN_ROLE
from trainlaunch.schedulers.kubernetes.names import BACKEND
from trainlaunch.schedulers.kubernetes.options import PER_INDEX_VERSION, RenderOptions
from trainlaunch.schedulers.kubernetes.secret import masked
from trainlaunch.specs import AppState, AppStatus, Role, RoleStatus

ANN_SWEEP_POINTS = SWEEP_POINTS  # per point: the Role's args and env (JSON)
INDEX_ENV = "JOB_COMPLETION_INDEX"  # the Job controller's name; defined here from the annotation
INDEX_REF = f"$({INDEX_ENV})"
_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
_PER_POINT = ("command", "args", "env")  # what may differ between the points' containers


def why_not(roles: Sequence[Sequence[Role]], opts: RenderOptions) -> str:
    """Why these points cannot share one Indexed Job ('' when they can)."""
    if opts.api != "job":
        return (
            f"--max-parallel on Kubernetes runs the points as one Indexed Job (api=job); a "
            f"{'JobSet' if opts.api == 'jobset' else 'TrainJob'} has no such limit of its own. "
            "Drop --max-parallel (one app per point, all at once; with --cfg queue=NAME Kueue's "
            "quotas decide how many run), or use --cfg api=job"
        )
    for i, point in enumerate(roles):
        pods = sum(r.num_replicas for r in point)
        if pods != 1:
            return (
                f"point {i} runs {pods} pods, and --max-parallel on Kubernetes runs each point "
                "as one completion index (one pod) of a single Indexed Job; Kubernetes itself "
                "cannot limit how many of several Jobs run at once (that takes a queueing "
                "controller such as Kueue). Drop --max-parallel to run one Job per point, all "
                "at once, or make each point one pod (e.g. --nnodes 1)"
            )
    if not opts.per_index:
        v = ".".join(map(str, PER_INDEX_VERSION))
        return (
            f"the points' Indexed Job needs backoffLimitPerIndex (Kubernetes >= {v}) so that "
            f"one failing point does not stop the others; add --cfg server_version={v} "
            "(or your cluster's version) if it is newer"
        )
    if opts.metrics_pvc:
        return (
            "with metrics_pvc the points would share one metrics folder (MOUNT/<app name>/); "
            "drop --max-parallel, or metrics_pvc"
        )
    return ""


def point_app_id(app_id: str, index: int | str) -> str:
    """``ns:name`` + point index -> ``ns:name:index``."""
    return f"{app_id}:{index}"


def split_point(app_id: str) -> tuple[str, int | None]:
    """``ns:name:i`` -> (``ns:name``, i); any other id -> (app_id, None)."""
    head, sep, tail = app_id.rpartition(":")
    if sep and ":" in head and tail.isdigit() and len(tail) <= 4:
        return head, int(tail)
    return app_id, None


def combine(
    per_point: Sequence[Sequence[dict[str, Any]]],
    roles: Sequence[Role],
    session: str,
    opts: RenderOptions,
    name: str,
    max_parallel: int,
) -> list[dict[str, Any]]:
    """One Indexed Job (+ its Service, ConfigMap) running point i at completion index i.

    per_point[i] is point i's manifests rendered under the shared name; roles[i] its Role.
    UsageError if they differ in more than what a point may change.
    """
    jobs = [next(d for d in docs if d["kind"] == "Job") for docs in per_point]
    base = jobs[0]
    for i, job in enumerate(jobs[1:], start=1):
        if (diff := _difference(_shape(base), _shape(job))) is not None:
            raise UsageError(
                f"sweep points 0 and {i} differ in {diff}: one Indexed Job has one pod template",
                hint="sweep only arguments and environment with --max-parallel on Kubernetes, "
                "or drop --max-parallel (one Job per point)",
            )
    secrets = [next((d for d in docs if d["kind"] == "Secret"), None) for docs in per_point]
    for i, secret in enumerate(secrets[1:], start=1):
        if secret != secrets[0]:  # one pod template reads one Secret
            raise UsageError(
                f"sweep points 0 and {i} differ in a secret variable's value: the points of "
                "one Indexed Job share one Secret",
                hint="sweep values that are not secrets with --max-parallel on Kubernetes, or "
                "drop --max-parallel (one Job and Secret per point)",
            )
    containers = [j["spec"]["template"]["spec"]["containers"][0] for j in jobs]
    envs = [{e["name"]: e for e in c.get("env") or []} for c in containers]
    common = [
        e for e in containers[0].get("env") or [] if all(env.get(e["name"]) == e for env in envs)
    ]
    job = copy.deepcopy(base)
    app_id = f"{opts.namespace}:{name}"
    job_name = job["metadata"]["name"]
    identity = {
        settings.REPLICA_ID: "0",  # every point is replica 0 of its own (one-pod) app
        settings.APP_ID: point_app_id(app_id, INDEX_REF),
        settings.HANDLE: make_app_handle(BACKEND, session, app_id) + ":" + INDEX_REF,
        settings.RANK0_HOST: f"{job_name}-{INDEX_REF}.{job_name}.{opts.namespace}.svc",
    }
    env = [{"name": INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": _INDEX_FIELD}}}]
    for e in common:  # identity: the kubelet fills in each pod's index
        env.append(
            {"name": e["name"], "value": identity[e["name"]]} if e["name"] in identity else e
        )
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["env"] = env
    container["command"] = ["/bin/sh", "-c", _script(containers, envs, {e["name"] for e in common})]
    container["args"] = []
    n = len(jobs)
    spec = job["spec"]
    retries = roles[0].max_retries
    for key in ("backoffLimit", "maxFailedIndexes"):
        spec.pop(key, None)
    spec.update(completions=n, parallelism=min(max_parallel, n), backoffLimitPerIndex=retries)
    spec["podReplacementPolicy"] = "Failed"
    for rule in spec["podFailurePolicy"]["rules"]:  # requeues exhausted: that point ends, alone
        if rule["action"] == "FailJob":
            rule["action"] = "FailIndex"
    points = [
        _role_diff(masked(roles[0]), r) for r in roles
    ]  # small: annotations hold 256 KiB in all
    job["metadata"]["annotations"][ANN_SWEEP_POINTS] = json.dumps(points, separators=(",", ":"))
    out = [job if d["kind"] == "Job" else d for d in per_point[0]]
    return out


def _role_diff(template: Role, role: Role) -> dict[str, Any]:
    """What point_role needs to rebuild role from template: its args, its env's differences."""
    role = masked(role)  # points share their secrets (combine): nothing to record of them
    env = {k: v for k, v in role.env.items() if template.env.get(k) != v}
    drop = sorted(k for k in template.env if k not in role.env)
    return {"args": list(role.args), "env": env, **({"drop": drop} if drop else {})}


def _shape(job: Mapping[str, Any]) -> dict[str, Any]:
    """The Job without what a point may change (its container's argv and env, its Role)."""
    shape = copy.deepcopy(dict(job))
    shape["metadata"]["annotations"].pop(ANN_ROLE, None)
    for key in _PER_POINT:
        shape["spec"]["template"]["spec"]["containers"][0].pop(key, None)
    return shape


def _difference(a: Any, b: Any, path: str = "") -> str | None:
    """The first path where a and b differ (None if equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if (
                d := _difference(a.get(key), b.get(key), f"{path}.{key}" if path else key)
            ) is not None:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if (d := _difference(x, y, f"{path}[{i}]")) is not None:
                return d
        return None
    return None if a == b else path or "the Job"


def _script(
    containers: Sequence[Mapping[str, Any]], envs: Sequence[Mapping[str, Any]], common: set[str]
) -> str:
    """``case $JOB_COMPLETION_INDEX``: per point, export its own env and set its own words;
    then exec the words all points share followed by the point's (``"$@"``).

    Every word is single-quoted for sh; the texts stay kubelet-escaped (``$$``, ``$(VAR)``),
    since the kubelet expands the script like any command before sh reads it.
    """
    argvs = [[*c.get("command", []), *c.get("args", [])] for c in containers]
    shared = 0
    while all(len(a) > shared and a[shared] == argvs[0][shared] for a in argvs):
        shared += 1
    lines = [f'case "${INDEX_ENV}" in']
    for i, (argv, env) in enumerate(zip(argvs, envs, strict=True)):
        own = [e for name, e in env.items() if name not in common]
        exports = " ".join(f"{e['name']}={shlex.quote(e.get('value', ''))}" for e in own)
        words = " ".join(shlex.quote(w) for w in argv[shared:])
        lines.append(f"{i}) " + (f"export {exports}; " if exports else "") + f"set -- {words} ;;")
    lines.append(f'*) echo "trainlaunch: no sweep point ${INDEX_ENV}" >&2; exit 2 ;;')
    lines.append("esac")
    lines.append("exec " + " ".join(shlex.quote(w) for w in argvs[0][:shared]) + ' "$@"')
    return "\n".join(lines)


# --- status of one point -------------------------------------------------------------------------


def parse_indexes(text: str | None) -> set[int]:
    """``"1,3-5"`` (status.completedIndexes / failedIndexes) -> {1, 3, 4, 5}."""
    out: set[int] = set()
    for part in (text or "").split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def point_status(job: Mapping[str, Any], pods: list[dict[str, Any]], index: int) -> AppStatus:
    """Point ``index`` of a sweep Job: its index's verdict, else the pod of that index."""
    from trainlaunch.schedulers.kubernetes import status as st

    role = st.job_role_name(job)
    mine = [p for p in pods if st.pod_index(p) == index]
    replica = st.replica_status(role, 0, mine)
    status = job.get("status") or {}
    if index in parse_indexes(status.get("completedIndexes")):
        state, msg = AppState.SUCCEEDED, ""
    elif index in parse_indexes(status.get("failedIndexes")):
        state, msg = AppState.FAILED, st.failure(replica)
    else:
        job_state, job_msg = st.job_state(job)
        if job_state is not None:  # it ended (or is deleted) before this index did, or suspended
            state, msg = job_state, job_msg
        elif not mine:
            parallelism = (job.get("spec") or {}).get("parallelism")
            state, msg = AppState.PENDING, f"waiting for a free slot (--max-parallel {parallelism})"
        elif replica.state == AppState.FAILED:
            state, msg = AppState.PENDING, f"{st.failure(replica)}; waiting for its retry"
        elif replica.state == AppState.SUCCEEDED:
            state, msg = AppState.RUNNING, ""  # the controller has not yet counted it
        else:
            state, msg = replica.state, replica.message
    return AppStatus(
        state=state,
        num_restarts=replica.restarts,
        msg=msg,
        roles=(RoleStatus(role, (replica,)),),
        exit_code=replica.exit_code if state == AppState.FAILED else None,
    )


def point_role(job: Mapping[str, Any], template: Role, index: int) -> Role:
    """Point index's Role: the template with the point's own args and env."""
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(ANN_SWEEP_POINTS)
    try:
        point = json.loads(raw)[index] if raw else None
    except (ValueError, IndexError, TypeError):
        point = None
    if not isinstance(point, dict) or not isinstance(point.get("env"), dict):
        return template
    env = {k: v for k, v in template.env.items() if k not in point.get("drop", ())}
    return template.replace(args=tuple(point["args"]), env={**env, **point["env"]})


def is_sweep_job(job: Mapping[str, Any]) -> bool:
    """True for the one Indexed Job of a --max-parallel sweep."""
    return ANN_SWEEP_POINTS in ((job.get("metadata") or {}).get("annotations") or {})
