"""A thin adapter over the official ``kubernetes`` client, imported lazily.

Requests pass plain dict bodies and read raw JSON (``_preload_content=False``): the client's
models differ across versions (v37 validates strictly, v36 returned logs as ``"b'...'"``), the
wire format does not. Every failure becomes a one-line SchedulerError saying what to do.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from trainlaunch.errors import SchedulerError, SchedulerUnavailable, UsageError
from trainlaunch.schedulers.kubernetes.targets import CUSTOM_KINDS

INSTALL_HINT = "pip install 'trainlaunch[kubernetes]'"
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
_IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class ApiError(SchedulerError):
    """The API server refused a request; ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.status = status


class NotFound(ApiError):
    """The API server answered 404 (callers turn this into AppNotFound where it means that)."""


def kubeconfig_files(kubeconfig: str | None) -> list[Path]:
    """The kubeconfig files the client would read, in merge order."""
    if kubeconfig:
        return [Path(kubeconfig).expanduser()]
    paths = os.environ.get("KUBECONFIG") or "~/.kube/config"
    return [Path(p).expanduser() for p in paths.split(os.pathsep) if p]


def resolve_context(kubeconfig: str | None, context: str | None) -> tuple[str | None, str]:
    """(context name, its namespace) as kubectl would pick them; ('default' if none is set)."""
    files = [f for f in kubeconfig_files(kubeconfig) if f.is_file()]
    if not files:
        if context or kubeconfig:
            where = kubeconfig or "~/.kube/config or $KUBECONFIG"
            raise UsageError(
                f"no kubeconfig at {where}", hint="set --cfg kubeconfig=PATH or KUBECONFIG"
            )
        if _IN_CLUSTER_NAMESPACE.is_file():
            return None, _IN_CLUSTER_NAMESPACE.read_text().strip() or "default"
        return None, "default"
    try:
        import yaml
    except ImportError:
        return context, "default"
    current, contexts = context, dict[str, dict[str, Any]]()
    for f in files:
        try:
            data = yaml.safe_load(f.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise UsageError(f"cannot read kubeconfig {f}: {_one_line(e)}") from None
        current = current or data.get("current-context") or None
        for entry in data.get("contexts") or []:
            contexts.setdefault(entry.get("name"), entry.get("context") or {})
    if current is not None and current not in contexts:
        raise UsageError(
            f"kube context {current!r} not found in {', '.join(map(str, files))}",
            hint=f"contexts: {', '.join(sorted(map(str, contexts))) or '(none)'}",
        )
    chosen = contexts.get(current) if current is not None else None
    return current, str((chosen or {}).get("namespace") or "default")


def connect(kubeconfig: str | None, context: str | None) -> KubeApi:
    """An API handle for the kubeconfig context (or the in-cluster service account)."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise SchedulerUnavailable(
            f"the kubernetes backend needs the Kubernetes client: {INSTALL_HINT}"
        ) from None
    configuration = client.Configuration()
    files = [f for f in kubeconfig_files(kubeconfig) if f.is_file()]
    if files:
        resolve_context(kubeconfig, context)  # a context that does not exist is a usage error
    try:
        if files or kubeconfig or context or not os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_kube_config(  # type: ignore[no-untyped-call]
                # the client reads $KUBECONFIG once, at import: read it now
                config_file=kubeconfig or os.environ.get("KUBECONFIG") or None,
                context=context,
                client_configuration=configuration,
            )
        else:
            config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
    except (config.ConfigException, OSError, TypeError, ValueError) as e:
        raise SchedulerUnavailable(
            f"cannot load the Kubernetes configuration: {_one_line(e)}",
            hint="point --cfg kubeconfig=PATH / context=NAME (or KUBECONFIG) at a cluster",
        ) from None
    return KubeApi(client.ApiClient(configuration), configuration.host, context)


class KubeApi:
    """Create, list, delete and read logs of the objects trainlaunch renders."""

    def __init__(self, api_client: Any, host: str, context: str | None) -> None:
        from kubernetes import client

        self.host, self.context = host, context
        self._client = api_client
        self._batch = client.BatchV1Api(api_client)
        self._core = client.CoreV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)

    def _custom_path(self, kind: str, api_version: str | None) -> tuple[str, str, str]:
        """(group, version, plural) of a custom kind (api_version: another served version)."""
        default, plural = CUSTOM_KINDS[kind]
        group, _, version = (api_version or default).partition("/")
        return group, version, plural

    def close(self) -> None:
        """Release the connection pool."""
        self._client.close()

    def create(self, doc: dict[str, Any]) -> dict[str, Any]:
        """Create a Job, Service, ConfigMap or Secret; return the object the server stored."""
        kind, ns, name = doc["kind"], doc["metadata"]["namespace"], doc["metadata"]["name"]
        if kind in CUSTOM_KINDS:
            group, version, plural = self._custom_path(kind, doc.get("apiVersion"))
            create = self._custom.create_namespaced_custom_object
            action = f"create {kind} {ns}/{name}"
            try:
                return dict(self._json(create, action, group, version, ns, plural, doc))
            except NotFound as e:
                if "could not find the requested resource" not in str(e):
                    raise  # e.g. the namespace does not exist
                raise ApiError(
                    f"cannot {action}: the cluster does not serve {plural}.{group}/{version}",
                    404,
                    hint=_INSTALL.get(kind, "install its controller") + ", or use --cfg api=job",
                ) from None
        fn = {
            "Job": self._batch.create_namespaced_job,
            "Service": self._core.create_namespaced_service,
            "ConfigMap": self._core.create_namespaced_config_map,
            "Secret": self._core.create_namespaced_secret,
        }[kind]
        return dict(self._json(fn, f"create {kind} {ns}/{name}", ns, doc))

    def list(
        self, kind: str, ns: str, selector: str, api_version: str | None = None
    ) -> list[dict[str, Any]]:
        """Objects of kind (Job, Service, ConfigMap, Pod, or a custom kind, optionally at
        api_version) in ns matching a label selector; NotFound if the server lacks the kind."""
        if kind in CUSTOM_KINDS:
            group, version, plural = self._custom_path(kind, api_version)
            found = self._json(
                self._custom.list_namespaced_custom_object,
                f"list {plural}.{group} in namespace {ns}",
                *(group, version, ns, plural),
                label_selector=selector,
            )
            return [{"kind": kind, **i} for i in found.get("items") or []]
        fn = {
            "Job": self._batch.list_namespaced_job,
            "Pod": self._core.list_namespaced_pod,
            "Service": self._core.list_namespaced_service,
            "ConfigMap": self._core.list_namespaced_config_map,
        }[kind]
        items = self._json(fn, f"list {kind}s in namespace {ns}", ns, label_selector=selector)
        return list(items.get("items") or [])

    def get(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        """One object of a custom kind (LocalQueue, ...); NotFound if absent."""
        group, version, plural = self._custom_path(kind, None)
        fn = self._custom.get_namespaced_custom_object
        return dict(self._json(fn, f"get {kind} {ns}/{name}", group, version, ns, plural, name))

    def delete(self, kind: str, ns: str, name: str) -> bool:
        """Delete with background propagation (its pods too); False if it was already gone."""
        if kind in CUSTOM_KINDS:
            group, version, plural = self._custom_path(kind, None)
            try:
                self._json(
                    self._custom.delete_namespaced_custom_object,
                    f"delete {kind} {ns}/{name}",
                    group,
                    version,
                    ns,
                    plural,
                    name,
                    propagation_policy="Background",
                )
            except NotFound:
                return False
            return True
        fn = {
            "Job": self._batch.delete_namespaced_job,
            "Service": self._core.delete_namespaced_service,
            "ConfigMap": self._core.delete_namespaced_config_map,
            "Secret": self._core.delete_namespaced_secret,
        }[kind]
        try:
            # The REST default for batch/v1 Jobs orphans their pods: always say Background.
            self._json(fn, f"delete {kind} {ns}/{name}", name, ns, propagation_policy="Background")
        except NotFound:
            return False
        return True

    def server_version(self) -> str:
        """The API server's version (gitVersion), e.g. v1.33.0."""
        from kubernetes import client

        data = self._json(client.VersionApi(self._client).get_code, "read the server version")
        return str(data.get("gitVersion") or f"{data.get('major')}.{data.get('minor')}")

    def can_i(self, verb: str, resource: str, ns: str, group: str = "", sub: str = "") -> bool:
        """Whether this user may verb resource in ns (a SelfSubjectAccessReview)."""
        from kubernetes import client

        attrs = {"verb": verb, "resource": resource, "namespace": ns, "group": group}
        if sub:
            attrs["subresource"] = sub
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        }
        api = client.AuthorizationV1Api(self._client)
        data = self._json(
            api.create_self_subject_access_review, f"ask whether it may {verb} {resource}", body
        )
        return bool((data.get("status") or {}).get("allowed"))

    def pod_log(
        self,
        ns: str,
        pod: str,
        container: str,
        follow: bool,
        since_seconds: int | None,
        timestamps: bool,
    ) -> Any:
        """The streaming HTTP response of a pod's log (None if the container has not started)."""
        kwargs: dict[str, Any] = {
            "container": container,
            "follow": follow,
            "timestamps": timestamps,
        }
        if since_seconds is not None:
            kwargs["since_seconds"] = int(since_seconds)  # v37 rejects floats before sending
        try:
            return self._call(
                self._core.read_namespaced_pod_log,
                f"read the log of pod {pod}",
                pod,
                ns,
                _timeout=None if follow else (CONNECT_TIMEOUT, READ_TIMEOUT),
                **kwargs,
            )
        except ApiError as e:
            if e.status == 400:  # "container ... is waiting to start" and the like: no log yet
                return None
            raise

    def _json(self, fn: Any, action: str, *args: Any, **kwargs: Any) -> Any:
        resp = self._call(fn, action, *args, **kwargs)
        try:
            return json.loads(resp.data or b"{}")
        except ValueError:
            raise SchedulerError(f"cannot {action}: the API server sent no JSON") from None
        finally:
            resp.release_conn()

    def _call(
        self,
        fn: Any,
        action: str,
        *args: Any,
        _timeout: tuple[float, float] | None = (CONNECT_TIMEOUT, READ_TIMEOUT),
        **kwargs: Any,
    ) -> Any:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        try:
            return fn(*args, _preload_content=False, _request_timeout=_timeout, **kwargs)
        except ApiException as e:
            raise self._api_error(e, action) from None
        except urllib3.exceptions.HTTPError as e:
            raise self._unreachable(e) from None
        except ValueError as e:  # v37's pydantic checks our body before sending it
            raise SchedulerError(
                f"cannot {action}: the installed kubernetes client rejected it: {_one_line(e)}",
                hint="upgrade the client: pip install -U 'trainlaunch[kubernetes]'",
            ) from None

    def _unreachable(self, e: BaseException) -> SchedulerUnavailable:
        m = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(e))
        why = m[1].strip() if m else type(getattr(e, "reason", None) or e).__name__
        ctx = f"--context {self.context} " if self.context else ""
        return SchedulerUnavailable(
            f"cannot reach the Kubernetes API server at {self.host} ({why})",
            hint=f"check that the cluster is up and the kube context points at it: "
            f"kubectl {ctx}cluster-info",
        )

    def _api_error(self, e: Any, action: str) -> SchedulerError:
        status = int(getattr(e, "status", 0) or 0)
        message = _status_message(getattr(e, "body", None)) or str(getattr(e, "reason", ""))
        if status == 0:
            return self._unreachable(e)
        if status == 404:
            return NotFound(f"cannot {action}: not found ({message})", status)
        if status == 409:
            return ApiError(
                f"cannot {action}: it already exists ({message})",
                status,
                hint="delete it first, or submit again for a fresh name",
            )
        if status == 403:
            return ApiError(
                f"cannot {action}: forbidden by RBAC ({message})",
                status,
                hint="ask a cluster admin for a Role allowing create/get/list/delete on "
                "jobs.batch, services, configmaps, secrets and pods, and get on pods/log in this "
                "namespace "
                "(check with: kubectl auth can-i create jobs.batch -n NAMESPACE)",
            )
        if status == 401:
            return ApiError(
                f"cannot {action}: the API server rejected the credentials",
                status,
                hint="log in again / refresh the kubeconfig user's token",
            )
        return ApiError(f"cannot {action}: HTTP {status}: {message}", status)


_INSTALL = {  # where a missing API comes from
    "JobSet": "install the JobSet controller (kubernetes-sigs/jobset, v0.6+: its manifests.yaml)",
    "TrainJob": "install Kubeflow Trainer v2.2+ (kubeflow/trainer) and its training runtimes",
}


def _status_message(body: Any) -> str:
    """The message of a Kubernetes Status body, on one line."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body:
        return ""
    try:
        data = json.loads(body)
    except ValueError:
        return _one_line(body)[:300]
    return (
        _one_line(data.get("message") or data.get("reason") or "") if isinstance(data, dict) else ""
    )


def _one_line(e: object) -> str:
    return " ".join(str(e).split())
