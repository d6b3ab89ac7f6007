"""Ask a rank for its Flight Recorder dump: HTTP over the unix socket its torch worker server
listens on (trainlaunch/rank/recorder.py). Torch-free (http.client), run where the rank runs:
by the local backend and the hang watchdog directly, on Slurm in the node's dump task.

The dump is trimmed to what the hang analysis reads (stacks/collectives.py): each process
group's status and its last ``KEEP_ENTRIES`` entries, so 800 ranks' dumps stay small.
"""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any

HANDLERS = ("fr_trace_json", "dump_nccl_trace_json")  # gloo/CPU's, then NCCL's (GPU builds)
FETCH_TIMEOUT_S = 5.0
KEEP_ENTRIES = 8  # per process group: the in-flight ones and the last completed


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.socket_path)
        except OSError:
            s.close()
            raise
        self.sock = s


def fetch(path: str, timeout: float = FETCH_TIMEOUT_S) -> tuple[dict[str, Any] | None, str]:
    """(the rank's trimmed dump, '') or (None, why there is none)."""
    if not path:
        return None, "the flight recorder is off (the app runs without --hang-timeout)"
    got: dict[str, Any] | None = None
    why = ""
    for handler in HANDLERS:
        try:
            doc = _post(path, handler, timeout)
        except FileNotFoundError:
            return None, "the rank serves no flight recorder (torch not imported yet?)"
        except ConnectionRefusedError:
            return None, "the rank's flight recorder socket refuses connections (it ended?)"
        except (OSError, http.client.HTTPException, ValueError) as e:
            why = why or f"the flight recorder did not answer: {e}"
            continue
        if doc is not None:
            got = _merge(got, trim(doc))
    return (got, "") if got is not None else (None, why or "no flight recorder handler")


def _post(path: str, handler: str, timeout: float) -> dict[str, Any] | None:
    conn = _UnixHTTP(path, timeout)
    try:
        conn.request("POST", f"/handler/{handler}")
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    if resp.status != 200:
        return None  # e.g. a handler this torch build does not have
    doc = json.loads(body)
    return doc if isinstance(doc, dict) else None


def trim(doc: dict[str, Any]) -> dict[str, Any]:
    """pg_status, pg_config and each process group's last KEEP_ENTRIES entries."""
    by_pg: dict[str, list[Any]] = {}
    for e in doc.get("entries") or []:
        if isinstance(e, dict):
            by_pg.setdefault(str(e.get("pg_id")), []).append(e)
    entries = [e for pg in by_pg.values() for e in pg[-KEEP_ENTRIES:]]
    return {
        "version": doc.get("version"),
        "pg_status": doc.get("pg_status") or {},
        "pg_config": doc.get("pg_config") or {},
        "entries": entries,
    }


def _merge(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    if a is None:
        return b
    return {
        "version": a.get("version") or b.get("version"),
        "pg_status": {**b["pg_status"], **a["pg_status"]},
        "pg_config": {**b["pg_config"], **a["pg_config"]},
        "entries": [*a["entries"], *b["entries"]],
    }


__all__ = ["FETCH_TIMEOUT_S", "HANDLERS", "fetch", "trim"]
