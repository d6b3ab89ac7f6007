"""Handles: ``scheduler://session/app_id`` URIs naming one app, or a sweep's many, parsed strictly.

A handle is parsed once, where it enters (the CLI's argument, a Runner method given a
string), into a value: :class:`AppHandle` or :class:`SweepHandle` (:func:`parse_handle`).
A handle can never address a path outside the app store: the app id allows only letters,
digits and ``_ . : -`` and cannot be ``.`` or ``..``; a sweep id is 10 letters and digits.
"""

from __future__ import annotations

import re

from trainlaunch.errors import UsageError
from trainlaunch.values import frozen

DEFAULT_SESSION = "trainlaunch"
# \Z, not $: "$" also matches before a trailing newline ("local\n" would pass)
_SCHEDULER_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}\Z")
_SESSION_RE = re.compile(r"^[A-Za-z0-9_.-]{0,63}\Z")
_APP_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}\Z")
_HANDLE_RE = re.compile(r"^(?P<scheduler>[^:/]+)://(?P<session>[^/]*)/(?P<app_id>[^/]+)$")
SWEEP_ID_RE = re.compile(r"^[a-z2-9]{10}\Z")
SWEEP_PREFIX = "sweep:"  # the app-id part of a sweep handle: local://SESSION/sweep:ID


@frozen
class AppHandle:
    """A parsed app handle."""

    scheduler: str
    session: str
    app_id: str

    def __str__(self) -> str:
        return f"{self.scheduler}://{self.session}/{self.app_id}"


@frozen
class SweepHandle:
    """A parsed sweep handle: ``scheduler://session/sweep:ID`` names every app of a sweep.

    A bare ``sweep:ID`` leaves scheduler and session empty: the sweep's record says them.
    """

    scheduler: str
    session: str
    sweep_id: str

    def __str__(self) -> str:
        if not self.scheduler:
            return f"{SWEEP_PREFIX}{self.sweep_id}"
        return f"{self.scheduler}://{self.session}/{SWEEP_PREFIX}{self.sweep_id}"


Handle = AppHandle | SweepHandle  # what a handle argument is, once parsed


def check_app_id(app_id: str) -> str:
    """Return app_id if it is safe to use as a name and a path component."""
    if not isinstance(app_id, str) or not _APP_ID_RE.match(app_id) or ".." in app_id:
        raise UsageError(
            f"invalid app id {app_id!r}: use letters, digits, '_', '.', ':', '-' (no '..')"
        )
    return app_id


def check_sweep_id(sweep_id: str) -> str:
    """Return sweep_id if it is a well-formed id (it names a store path)."""
    if not isinstance(sweep_id, str) or not SWEEP_ID_RE.match(sweep_id):
        raise UsageError(f"invalid sweep id {sweep_id!r}: expected 10 letters/digits")
    return sweep_id


def make_app_handle(scheduler: str, session: str, app_id: str) -> str:
    """Format a handle (validating its parts)."""
    return str(_build(scheduler, session, app_id, original=f"{scheduler}://{session}/{app_id}"))


def parse_handle(text: str | Handle, default_scheduler: str = "local") -> Handle:
    """A handle's value: a sweep's (``[scheduler://session/]sweep:ID``) or an app's.

    A value is returned as it is (it was parsed where it entered). ``sweep:`` followed by
    anything but a well-formed sweep id is an app id (a Kubernetes namespace may be called
    ``sweep``).
    """
    if isinstance(text, (AppHandle, SweepHandle)):
        return text
    if isinstance(text, str) and text.startswith(SWEEP_PREFIX) and "/" not in text:
        sid = text[len(SWEEP_PREFIX) :]
        if SWEEP_ID_RE.match(sid):
            return SweepHandle("", "", sid)
    h = parse_app_handle(text, default_scheduler)
    sid = h.app_id[len(SWEEP_PREFIX) :]
    if h.app_id.startswith(SWEEP_PREFIX) and SWEEP_ID_RE.match(sid):
        return SweepHandle(h.scheduler, h.session, sid)
    return h


def parse_app_handle(text: str, default_scheduler: str = "local") -> AppHandle:
    """Parse ``scheduler://session/app_id``; a bare app id means ``default_scheduler``."""
    if not isinstance(text, str) or not text or "\0" in text or text != text.strip():
        raise UsageError(f"malformed app handle {text!r}: expected scheduler://session/app_id")
    if "://" not in text:
        if "/" in text:
            raise UsageError(
                f"malformed app handle {text!r}: expected scheduler://session/app_id or an app id"
            )
        return _build(default_scheduler, DEFAULT_SESSION, text, original=text)
    m = _HANDLE_RE.match(text)
    if not m:
        raise UsageError(f"malformed app handle {text!r}: expected scheduler://session/app_id")
    return _build(m["scheduler"], m["session"], m["app_id"], original=text)


def _build(scheduler: str, session: str, app_id: str, original: str) -> AppHandle:
    if not _SCHEDULER_RE.match(scheduler):
        raise UsageError(f"malformed app handle {original!r}: bad scheduler name {scheduler!r}")
    if not _SESSION_RE.match(session):
        raise UsageError(f"malformed app handle {original!r}: bad session name {session!r}")
    try:
        check_app_id(app_id)
    except UsageError as e:
        raise UsageError(f"malformed app handle {original!r}: {e}") from None
    return AppHandle(scheduler, session or DEFAULT_SESSION, app_id)


@frozen
class LogTarget:
    """``HANDLE[/ROLE[/REPLICA,...]]`` as given to ``trainlaunch logs`` (a sweep's: each point's)."""

    handle: Handle
    role: str | None = None
    replicas: tuple[int, ...] | None = None


def parse_log_target(text: str, default_scheduler: str = "local") -> LogTarget:
    """Split a logs target into its handle, optional role and optional replica ids."""
    if not isinstance(text, str) or not text:
        raise UsageError("malformed log target ''")
    prefix, sep, rest = text.partition("://")
    parts = (rest if sep else text).split("/")
    if sep:
        if len(parts) < 2:
            raise UsageError(f"malformed app handle {text!r}: expected scheduler://session/app_id")
        head, tail = f"{prefix}://{parts[0]}/{parts[1]}", parts[2:]
    else:
        head, tail = parts[0], parts[1:]
    handle = parse_handle(head, default_scheduler)
    if len(tail) > 2 or any(t == "" for t in tail):
        raise UsageError(f"malformed log target {text!r}: expected HANDLE[/ROLE[/REPLICA,...]]")
    role = tail[0] if tail else None
    replicas = None
    if len(tail) == 2:
        try:
            replicas = tuple(sorted({int(x) for x in tail[1].split(",")}))
        except ValueError:
            raise UsageError(
                f"malformed log target {text!r}: replica ids must be integers like 0,1"
            ) from None
        if any(r < 0 for r in replicas):
            raise UsageError(f"malformed log target {text!r}: replica ids must be >= 0")
    return LogTarget(handle, role, replicas)
