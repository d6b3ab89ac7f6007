"""``preflight_exclude_bad_nodes``: after a failed preflight, the job runs again without the
nodes it blamed (docs/preflight.md).

Node 0's agent writes the Slurm names of the nodes it blamed to ``preflight.exclude`` in its
replica directory and exits ``PREFLIGHT_EXIT_CODE``. The batch script then requeues its own
job (it keeps its id, so its handle stays the same) and adds the nodes to the job's
ExcNodeList. Slurm takes ExcNodeList only from a pending job, and a running job becomes one
only by the requeue; the requeued job stays COMPLETING, unable to start again, until this
very script has ended, so an update made before the script exits always precedes the next
start: no hold, no release, nothing to race with.

What went wrong before (hold, update, release) was the requeue's own SIGTERM (then SIGKILL
after KillWait): it reaches every process of the job at once, so whatever ran then died with
it: the ``seq`` that listed the update loop's tries (the loop ran zero times and the release
went out without the exclusion) or ``scontrol release`` (the job stayed held for ever). The
scontrol calls here run with SIGTERM ignored, retry for ``UPDATE_WINDOW_S`` (inside the 5 s
slurmd waits at least before SIGKILL), and read the list back. The outcome goes to the batch
log and to the attempts file (``exclusion=ok|failed|requeue_failed``; none: the script was
killed before it could say), and ``status`` shows it in the attempt's reason: a failed
exclusion is never silent.

It happens only while ``max_requeues`` allows (an exclusion counts as a requeue) and while
the partition keeps enough nodes without them; otherwise the job ends FAILED and the batch
log says why.
"""

from __future__ import annotations

from trainlaunch import settings
from trainlaunch.node.agent_record import PREFLIGHT_EXCLUDE_FILE

UPDATE_WINDOW_S = 3  # retry the update this long: slurmd sends SIGKILL >= 5 s after SIGTERM
EXCLUSION_OK = "ok"  # the attempts file's exclusion=...: ExcNodeList shows the nodes
EXCLUSION_FAILED = "failed"  # requeued, but Slurm refused the nodes' exclusion
REQUEUE_FAILED = "requeue_failed"  # scontrol requeue refused: the job ends here


def decide_lines(node0_dir_word: str, max_requeues: int) -> list[str]:
    """Batch-script lines: set trainlaunch_action=exclude (and trainlaunch_exc) when due."""
    code = settings.PREFLIGHT_EXIT_CODE
    return [
        *_function_lines(),
        f'if [ "$trainlaunch_term" -eq 0 ] && [ "$trainlaunch_rc" -eq {code} ] && '
        f'[ "$trainlaunch_requeues" -lt {max_requeues} ]; then  # the preflight refused the nodes',
        "    trainlaunch_bad=$(paste -sd, - <"
        f"{node0_dir_word}/{PREFLIGHT_EXCLUDE_FILE} 2>/dev/null)",
        '    if [ -n "$trainlaunch_bad" ]; then',
        "        trainlaunch_exc=$(trainlaunch_exc_shown)",
        '        trainlaunch_exc="${trainlaunch_exc:+$trainlaunch_exc,}$trainlaunch_bad"',
        '        trainlaunch_total=$(sinfo -h -p "$SLURM_JOB_PARTITION" -o %D | '
        "awk '{n += $1} END {print n + 0}')",
        '        trainlaunch_gone=$(scontrol show hostnames "$trainlaunch_exc" | sort -u | wc -l)',
        '        if [ $((trainlaunch_total - trainlaunch_gone)) -ge "$SLURM_JOB_NUM_NODES" ]; then',
        f'            trainlaunch_action=exclude trainlaunch_n="$((trainlaunch_requeues + 1)) of '
        f'{max_requeues}"',
        "        else",
        '            echo "trainlaunch: the preflight failed on $trainlaunch_bad; not requeueing '
        "without it: partition $SLURM_JOB_PARTITION has $trainlaunch_total nodes and "
        '$trainlaunch_gone are excluded, the job needs $SLURM_JOB_NUM_NODES"',
        "        fi",
        "    fi",
        "fi",
    ]


def _function_lines() -> list[str]:
    """Batch-script shell functions: the job's ExcNodeList as Slurm shows it, and the update
    that counts as done only once that list holds every blamed node (read back, not assumed)."""
    return [
        "trainlaunch_exc_shown() {  # the job's ExcNodeList ('' when none)",
        '    local shown=$(scontrol show job "$SLURM_JOB_ID" 2>/dev/null | '
        "grep -o 'ExcNodeList=[^ ]*' | cut -d= -f2)",
        '    [ "$shown" = "(null)" ] || printf %s "$shown"',
        "}",
        "trainlaunch_exclude() {  # true once ExcNodeList holds $trainlaunch_bad; else why in _err",
        '    trainlaunch_err=$(scontrol update JobId="$SLURM_JOB_ID" '
        'ExcNodeList="$trainlaunch_exc" 2>&1) || return 1',
        '    local shown=$(trainlaunch_exc_shown) missing="$trainlaunch_bad"',
        '    [ -n "$shown" ] && missing=$(scontrol show hostnames "$trainlaunch_bad" | '
        'grep -vxF -f <(scontrol show hostnames "$shown") | paste -sd, -)',
        '    [ -z "$missing" ] && return 0',
        '    trainlaunch_err="the update returned but Slurm shows ExcNodeList=${shown:-(null)}, '
        'without $missing"',
        "    return 1",
        "}",
    ]


def requeue_lines(attempts_word: str) -> list[str]:
    """Batch-script lines: requeue, exclude the nodes before this script ends, say how it went."""
    note = (
        f"printf 'attempt=%s exclusion=%s\\n' \"${settings.RESTART_COUNT}\" {{}} >>{attempts_word}"
    )
    return [
        'if [ "$trainlaunch_action" = exclude ]; then',
        f'    printf \'attempt=%s excluded=%s\\n\' "${settings.RESTART_COUNT}" "$trainlaunch_bad" '
        f">>{attempts_word}",
        '    echo "trainlaunch: the preflight failed on $trainlaunch_bad; requeueing without it '
        '(ExcNodeList=$trainlaunch_exc, $trainlaunch_n)"',
        "    trap '' TERM  # the requeue's SIGTERM: scontrol below inherits it ignored, not fatal",
        '    if ! trainlaunch_err=$(scontrol requeue "$SLURM_JOB_ID" 2>&1); then',
        f"        {note.format(REQUEUE_FAILED)}",
        '        echo "trainlaunch: ERROR: scontrol requeue failed ($trainlaunch_err): the job ends '
        'here, without another attempt"',
        '        exit "$trainlaunch_rc"',
        "    fi",
        f"    trainlaunch_until=$((SECONDS + {UPDATE_WINDOW_S}))  # pending now, COMPLETING "
        "until this script ends",
        "    trainlaunch_excluded=0",
        "    while :; do",
        "        trainlaunch_exclude && trainlaunch_excluded=1 && break",
        '        [ "$SECONDS" -lt "$trainlaunch_until" ] || break',
        "        sleep 0.2",
        "    done",
        '    if [ "$trainlaunch_excluded" -eq 1 ]; then',
        f"        {note.format(EXCLUSION_OK)}",
        '        echo "trainlaunch: requeued; Slurm excludes $trainlaunch_bad from the next '
        'attempt (ExcNodeList=$(trainlaunch_exc_shown))"',
        "    else",
        f"        {note.format(EXCLUSION_FAILED)}",
        '        echo "trainlaunch: ERROR: requeued, but $trainlaunch_bad could NOT be excluded '
        '($trainlaunch_err): the next attempt may land there again"',
        "    fi",
        '    exit "$trainlaunch_rc"',
        "fi",
    ]
