"""Reading a replica's log: the pod with its completion index, line by line, optionally followed.

Lines are split here from the raw HTTP stream (the client's ``watch`` strips newlines and put
a followed log on one line in TorchX, torchx#983). While following, a replica's retry (a new
pod for the same index) is followed too, until the app is terminal.
"""

from __future__ import annotations

import codecs
import datetime
import math
import re
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

from trainlaunch.schedulers.kubernetes import lookup
from trainlaunch.schedulers.kubernetes import status as st
from trainlaunch.schedulers.kubernetes.client import KubeApi
from trainlaunch.schedulers.kubernetes.labels import INDEX_ANNOTATION, LABEL_APP

_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


class LogReader:
    """The log lines of one role's replicas."""

    def __init__(
        self,
        api: KubeApi,
        ns: str,
        app: str,
        selector: str,
        container: str,
        poll_interval: float,
        ended: Callable[[], bool] | None = None,
    ) -> None:
        self.api, self.ns, self.app, self.selector = api, ns, app, selector
        self.container, self.poll_interval = container, poll_interval
        self.ended = ended  # when following ends (default: once the app is terminal)

    def lines(
        self,
        k: int,
        pattern: re.Pattern[str] | None,
        since: float | None,
        until: float | None,
        follow: bool,
    ) -> Iterator[str]:
        """Replica k's lines (without newline); with follow, until the app is terminal."""
        after: tuple[str, str] = ("", "")
        timed = since is not None or until is not None
        while (found := self._next_pod(k, after, follow)) is not None:
            after, pod = found, found[1]
            since_s = max(1, math.ceil(time.time() - since)) if since is not None else None
            resp = self.api.pod_log(self.ns, pod, self.container, follow, since_s, timed)
            lines = read_lines(resp) if resp is not None else None
            try:
                for line in lines or ():
                    if timed:
                        t, line = split_timestamp(line)
                        if t is not None and since is not None and t < since:
                            continue
                        if t is not None and until is not None and t > until:
                            return
                    if pattern is None or pattern.search(line):
                        yield line
            finally:
                if lines is not None:
                    lines.close()
            if not follow:
                return

    def _next_pod(self, k: int, after: tuple[str, str], wait: bool) -> tuple[str, str] | None:
        """(creation time, name) of the newest started pod of index k created after ``after``.

        Earlier pods of an index are its failed attempts; while following, wait for the next.
        Once the app is terminal the pods are listed once more: a pod can start and end
        between a look that missed it and the look at the app (a sweep point that got its slot
        and finished at once), and its lines are read all the same.
        """
        while True:
            newer = self._started_after(k, after)
            if newer or not wait:
                return max(newer, default=None)
            if self._terminal():
                return max(self._started_after(k, after), default=None)
            time.sleep(self.poll_interval)  # a product poll: the pod is being scheduled

    def _started_after(self, k: int, after: tuple[str, str]) -> list[tuple[str, str]]:
        """(creation time, name) of index k's started pods created after ``after``."""
        keys = [
            (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"])
            for p in self.api.list("Pod", self.ns, self.selector)
            if (p["metadata"].get("annotations") or {}).get(INDEX_ANNOTATION) == str(k)
            and started(p)
        ]
        return [key for key in keys if key > after]

    def _terminal(self) -> bool:
        if self.ended is not None:
            return self.ended()
        jobs = lookup.find(self.api, self.ns, f"{LABEL_APP}={self.app}").views  # any target
        return not jobs or st.combine(st.list_state(j) for j in jobs).is_terminal


def started(pod: Mapping[str, Any]) -> bool:
    """True once the container has run (only then does the kubelet have a log)."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Running", "Succeeded", "Failed"):
        return True
    return any(
        "running" in (cs.get("state") or {}) or "terminated" in (cs.get("state") or {})
        for cs in status.get("containerStatuses") or []
    )


def read_lines(resp: Any) -> Generator[str, None, None]:
    """Split a streamed body into lines as it arrives; UTF-8 split across chunks is joined.

    A connection that drops mid-stream ends the lines (what arrived is kept), not the reader.
    """
    import urllib3

    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    buf, finished = "", False
    try:
        try:
            for chunk in resp.stream(2**16, decode_content=True):
                *lines, buf = (buf + decoder.decode(chunk)).split("\n")
                yield from lines
            finished = True
        except urllib3.exceptions.HTTPError:
            pass
        buf += decoder.decode(b"", final=True)
        if buf:
            yield buf
    finally:
        if not finished:  # stopped early or dropped: close the connection, do not reuse it
            resp.close()
        resp.release_conn()


def split_timestamp(line: str) -> tuple[float | None, str]:
    """``2030-01-01T00:00:00.123456789Z text`` -> (unix time, text); (None, line) otherwise."""
    stamp, _, rest = line.partition(" ")
    m = _TIMESTAMP.match(stamp)
    if not m:
        return None, line
    frac = (m[2] or "0")[:6].ljust(6, "0")
    zone = "+00:00" if m[3] == "Z" else m[3]
    return datetime.datetime.fromisoformat(f"{m[1]}.{frac}{zone}").timestamp(), rest
