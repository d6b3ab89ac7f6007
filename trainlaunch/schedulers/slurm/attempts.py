"""The attempt history of a Slurm job: the batch script's lines, and what they mean.

Every attempt of the batch script (the first run, then each requeue) appends to
``<job dir>/attempts`` one line when it starts and one when it ends::

    attempt=0 start=1764586810.2
    attempt=0 end=1764586851.9 exit=75 action=requeue term=0 left=0:08

``action`` is what the script did next: ``requeue`` (a rank exited 75 after saving, within
``max_requeues``), ``exclude`` (a refused preflight requeued without its nodes: then
``excluded=NODES`` and ``exclusion=ok|failed|requeue_failed`` lines, exclude.py), ``retry`` (a
failure, within ``max_retries``) or ``end``; ``term=1`` means
Slurm itself sent SIGTERM (``scontrol requeue``, preemption, the time limit, ``scancel``);
``left`` is squeue's time left. Rendering (shell text) and reading (pure) live here together
so that the two never drift apart.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

from trainlaunch import settings
from trainlaunch.schedulers.slurm import exclude, interrupt
from trainlaunch.specs import AppStatus, Attempt

ATTEMPTS_FILE = "attempts"
SIGNAL_EARLY_S = 60  # Slurm may send --signal up to a minute before the asked-for time
_NOW = "${EPOCHREALTIME:-$(date +%s)}"
_FINAL_REASON = {
    "COMPLETED": "succeeded",
    "TIMEOUT": "timeout",
    "CANCELLED": "cancelled",
    "PREEMPTED": "preempted",
    "NODE_FAIL": "node failure",
    "OUT_OF_MEMORY": "out of memory",
    "DEADLINE": "deadline",
}


# --- rendering ----------------------------------------------------------------------------------


def start_lines() -> list[str]:
    """Batch-script lines run first: note the attempt, survive SIGTERM long enough to log it."""
    rc = settings.RESTART_COUNT
    return [
        "trainlaunch_term=0  # 1 once Slurm sent SIGTERM (requeue, preemption, limit, scancel)",
        "trap 'trainlaunch_term=1; trainlaunch_sig=1' TERM",
        f'printf \'attempt=%s start=%s\\n\' "${rc}" "{_NOW}" '
        f'>>"$trainlaunch_job_dir/{ATTEMPTS_FILE}"',
    ]


def wait_lines() -> list[str]:
    """Wait for every role's step; the first failure stops the others (signals do not)."""
    return [
        "trainlaunch_rc=0",
        "trainlaunch_running=${#trainlaunch_pids[@]}",
        'while [ "$trainlaunch_running" -gt 0 ]; do',
        "    trainlaunch_sig=0",
        "    wait -n",
        "    rc=$?",
        '    [ "$trainlaunch_sig" -eq 1 ] && continue  # a trapped signal ended the wait',
        "    trainlaunch_running=$((trainlaunch_running - 1))",
        '    if [ "$rc" -ne 0 ] && [ "$trainlaunch_rc" -eq 0 ]; then',
        "        trainlaunch_rc=$rc",
        '        kill "${trainlaunch_pids[@]}" 2>/dev/null',
        "    fi",
        "done",
    ]


def end_lines(max_retries: int, max_requeues: int, exclude_from: str | None = None) -> list[str]:
    """Decide requeue / retry / end, log the attempt's end, and requeue if so.

    exclude_from: node 0's replica directory (a shell word) when a failed preflight requeues
    the job without the nodes it blamed (exclude.py); such a requeue counts as one.
    """
    log = f'"$trainlaunch_job_dir/{ATTEMPTS_FILE}"'
    code = settings.REQUEUE_EXIT_CODE
    counted = "-E ' action=(requeue|exclude)'" if exclude_from else "' action=requeue'"
    excluding = (
        (exclude.decide_lines(exclude_from, max_requeues), exclude.requeue_lines(log))
        if exclude_from
        else ([], [])
    )
    return [
        f"trainlaunch_requeues=$(grep -c {counted} {log})",
        f"trainlaunch_retries=$(grep -c ' action=retry' {log})",
        "trainlaunch_action=end",
        f'if [ "$trainlaunch_term" -eq 0 ] && {interrupt.batch_guard("$trainlaunch_job_dir")}; '
        "then  # else Slurm requeues or ends the job itself, or Ctrl-C ended it",
        f'    if [ "$trainlaunch_rc" -eq {code} ] && '
        f'[ "$trainlaunch_requeues" -lt {max_requeues} ]; then',
        f'        trainlaunch_action=requeue trainlaunch_n="$((trainlaunch_requeues + 1)) of '
        f'{max_requeues}"',
        f'    elif [ "$trainlaunch_rc" -ne 0 ] && [ "$trainlaunch_rc" -ne {code} ] && '
        f'[ "$trainlaunch_retries" -lt {max_retries} ]; then',
        f'        trainlaunch_action=retry trainlaunch_n="$((trainlaunch_retries + 1)) of '
        f'{max_retries}"',
        "    fi",
        "fi",
        *excluding[0],
        "printf 'attempt=%s end=%s exit=%s action=%s term=%s left=%s\\n' "
        f'"${settings.RESTART_COUNT}" "{_NOW}" "$trainlaunch_rc" "$trainlaunch_action" '
        '"$trainlaunch_term" "$(squeue -h -j "$SLURM_JOB_ID" -o %L 2>/dev/null)" '
        f">>{log}",
        *excluding[1],
        'if [ "$trainlaunch_action" != end ]; then',
        '    echo "trainlaunch: exit code $trainlaunch_rc; requeueing ($trainlaunch_action '
        '$trainlaunch_n)"',
        '    scontrol requeue "$SLURM_JOB_ID" && exit "$trainlaunch_rc"',
        "fi",
    ]


def note_hang(job_dir: Path, attempt: int) -> bool:
    """Mark the attempt as ended by the hang watchdog's restart (before it requeues); False
    when it cannot be written (the restart would not count against max_retries)."""
    with contextlib.suppress(OSError), open(job_dir / ATTEMPTS_FILE, "a", encoding="utf-8") as f:
        f.write(f"attempt={attempt} hang=1\n")
        return True
    return False


# --- reading ------------------------------------------------------------------------------------


def read_attempts(job_dir: Path | None) -> dict[int, dict[str, str]]:
    """{attempt: merged key=value fields} from the job dir's attempts file ({} if none)."""
    out: dict[int, dict[str, str]] = {}
    try:
        text = (job_dir / ATTEMPTS_FILE).read_text(encoding="utf-8", errors="replace")  # type: ignore[operator]
    except (OSError, TypeError):
        return out
    for line in text.splitlines():
        fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        n = fields.get("attempt", "")
        if n.isdigit():
            out.setdefault(int(n), {}).update(fields)
    return out


def is_restart(rec: Mapping[str, str]) -> bool:
    """An attempt that ended in a restart: a failure retried or a hang restarted (a requeue,
    asked for or Slurm's own, is not one: it spends max_requeues, as on the local backend)."""
    return rec.get("action") == "retry" or rec.get("hang") == "1"


def num_restarts(job_dir: Path | None) -> int:
    """The job's restarts so far, as ``status`` counts them (against max_retries)."""
    return sum(1 for rec in read_attempts(job_dir).values() if is_restart(rec))


def seconds_left(text: str) -> int | None:
    """squeue's %L ('[D-][HH:]MM:SS', 'UNLIMITED', ...) in seconds; None if not a time."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text.strip())
    if not m:
        return None
    d, h, mi, s = (int(x) if x else 0 for x in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def signal_seconds(signal_opt: str | None) -> int | None:
    """The SECONDS of a ``SIG@SECONDS`` option (Slurm's default is 60); None when off."""
    if not signal_opt or str(signal_opt).lower() == "none":
        return None
    _, at, secs = str(signal_opt).partition("@")
    return int(secs) if at and secs.isdigit() else 60


def _float(v: str | None) -> float | None:
    try:
        return float(v) if v else None
    except ValueError:
        return None


def _exclusion_reason(rec: dict[str, str]) -> str:
    """A refused preflight's attempt, with what became of the exclusion (exclude.py): a
    failed or unconfirmed one is said outright, as the next attempt may land on the node."""
    outcome = {
        exclude.EXCLUSION_OK: "excluded, requeued",
        exclude.EXCLUSION_FAILED: "requeued but NOT excluded: see batch.log",
        exclude.REQUEUE_FAILED: "not excluded, not requeued: see batch.log",
    }.get(rec.get("exclusion", ""), "requeued, exclusion unconfirmed: see batch.log")
    return f"preflight failed on {rec.get('excluded') or '?'} ({outcome})"


def _reason(rec: dict[str, str], later: bool, state: str, warn_s: int | None) -> str:
    action, rc = rec.get("action"), rec.get("exit")
    if action == "exclude":
        return _exclusion_reason(rec)
    if action == "requeue":
        left = seconds_left(rec.get("left", ""))
        if warn_s is not None and left is not None and left <= warn_s + SIGNAL_EARLY_S:
            return "time limit (saved, requeued)"
        return "requeue requested (exit 75)"
    if action == "retry":
        return f"failed (exit {rc}; retried)"
    if rec.get("hang") == "1" and later:
        return "hung (restarted)"
    if later:  # Slurm started the job again on its own
        return "preempted (requeued by slurm)" if rec.get("term") == "1" else "requeued by slurm"
    if "end" not in rec and state in ("RUNNING", "COMPLETING", "PENDING", "CONFIGURING"):
        return ""
    word = state.split()[0] if state else ""
    if word == "FAILED" or (word == "" and rc not in (None, "0")):
        return f"failed (exit {rc})" if rc else "failed"
    return _FINAL_REASON.get(word, word.lower())


def with_history(
    status: AppStatus, job_dir: Path | None, state: str, signal_opt: str | None
) -> AppStatus:
    """status with the attempt history, requeues and failure restarts counted apart."""
    recs = read_attempts(job_dir)
    if not recs:
        return status
    warn_s = signal_seconds(signal_opt)
    numbers = sorted(recs)
    attempts = []
    for i, n in enumerate(numbers):
        rec = recs[n]
        later = i + 1 < len(numbers)
        attempts.append(
            Attempt(
                attempt=n,
                reason=_reason(rec, later, state, warn_s),
                start=_float(rec.get("start")),
                end=_float(rec.get("end")),
                exit_code=int(rec["exit"]) if rec.get("exit", "").isdigit() else None,
            )
        )
    if state.startswith(("PENDING", "REQUEUED")) and "end" in recs[numbers[-1]]:
        attempts.append(Attempt(attempt=numbers[-1] + 1))  # queued again, not started yet
    retries = sum(1 for r in recs.values() if is_restart(r))
    requeues = len(attempts) - 1 - retries
    msg = status.msg
    if state.startswith("TIMEOUT") and warn_s is not None:
        msg += (
            f"; the ranks were warned {warn_s} s before (signal) but none asked for a requeue: "
            f"save your state and exit {settings.REQUEUE_EXIT_CODE} when "
            "trainlaunch.rank.preemption.requested() (docs/preemption.md)"
        )
    return dataclasses.replace(
        status,
        attempts=tuple(attempts),
        num_restarts=retries,
        num_requeues=max(requeues, 0),
        msg=msg,
    )
