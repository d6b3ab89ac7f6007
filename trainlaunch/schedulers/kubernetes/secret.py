"""The app's Secret: the ``--env`` values that are secrets (``settings.is_secret``, the rule the
CLI masks by), kept out of the pod spec and out of every annotation.

Every such variable of every role becomes a key of one Secret ``<name>-env`` and reaches its
container through ``valueFrom.secretKeyRef``; only the Secret holds the value (``stringData``,
so a dry run masks it like any other value). It is created right after the first role's Job,
with that Job (or the app's JobSet or TrainJob) as its owner, so Kubernetes' garbage collector
deletes it with the app; ``stop`` deletes it too. The annotation that records each role for
``describe`` has these values masked. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainlaunch.errors import UsageError
from trainlaunch.settings import SECRET_MASK, is_secret
from trainlaunch.specs import Role


def secret_name(name: str) -> str:
    """The app's Secret (fits 63: the app name is at most 28 characters)."""
    return f"{name}-env"


def secret_env(role: Role) -> dict[str, str]:
    """The role's variables that are secrets, by the one rule."""
    return {k: v for k, v in role.env.items() if is_secret(k, v)}


def secret_keys(
    roles: Sequence[tuple[str, Role]],
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """(per role label: env name -> key in the Secret, the Secret's data) for (label, role) pairs
    whose env values are already macro-substituted. A variable every role sets alike is one
    key named like it; a role that sets it otherwise gets ``<role>.<NAME>``."""
    keys: dict[str, dict[str, str]] = {}
    data: dict[str, str] = {}
    for label, role in roles:
        mine = keys.setdefault(label, {})
        for env_name, value in secret_env(role).items():
            key = env_name if data.get(env_name, value) == value else f"{label}.{env_name}"
            mine[env_name] = key
            data[key] = value
    return keys, data


def secret_ref(name: str, key: str) -> dict[str, Any]:
    """An env entry's valueFrom for key of the app's Secret."""
    return {"secretKeyRef": {"name": secret_name(name), "key": key}}


def secret_doc(
    name: str, labels: Mapping[str, str], data: Mapping[str, str], namespace: str
) -> dict[str, Any]:
    """The Secret (its owner is added on submission, like the ConfigMap's)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret_name(name), "namespace": namespace, "labels": dict(labels)},
        "type": "Opaque",
        "immutable": True,  # the kubelet need not watch it
        "stringData": dict(data),
    }


def masked(role: Role) -> Role:
    """The role with its secret values masked: what annotations may record."""
    hidden = secret_env(role)
    if not hidden:
        return role
    return role.replace(env={k: SECRET_MASK if k in hidden else v for k, v in role.env.items()})


def check_value(role: Role, env_name: str, value: str, sentinel: str) -> None:
    """A Secret holds one value for every replica: ``${replica_id}`` cannot be in it."""
    if sentinel in value:
        raise UsageError(
            f"role {role.name!r}: secret variable {env_name} uses ${{replica_id}}, but its "
            "value goes into a Secret, which holds one value for every replica",
            hint="pass the replica id in another variable or argument",
        )
