"""Pure sbatch rendering for the Slurm backend: the option schema and one script per app.

One batch script per app (several apps with the same resource request can also be one job
array: slurm/array.py, docs/slurm.md "Job arrays"). One role is a plain job; several roles are one heterogeneous job,
one component per role (a hetjob needs at least one node per component). Each role runs
as one ``srun`` step with one task per replica; the task runs the role's *replica script*,
kept verbatim in a quoted here-document, which sets the replica's identity, runs the command
under the replica runner (replica.py: stdout.log, stderr.log and combined.log in the job
directory, as on the local backend) and records its exit code. Every argument and environment
value is quoted for the shell; the macros ``${app_id}`` and ``${replica_id}`` become
``"$SLURM_JOB_ID"`` and ``"$SLURM_PROCID"``, expanded on the node. docs/slurm.md shows a
rendered script.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from trainlaunch import settings
from trainlaunch.errors import UsageError
from trainlaunch.options import NO_WATCHDOG, above
from trainlaunch.preflight import options as preflight_options
from trainlaunch.schedulers.logfiles import STREAM_FILES
from trainlaunch.schedulers.slurm.attempts import ATTEMPTS_FILE, end_lines, start_lines, wait_lines
from trainlaunch.specs import AppDef, CfgVal, Role, macros, runopts
from trainlaunch.stacks import ON_HANG
from trainlaunch.stacks.watchdog import WATCHDOG_FILE

BACKEND = "slurm"
BATCH_LOG = "batch.log"  # the batch script's own output, in the job dir
RESULT_FILE = "result"  # "restart=N exit=RC end=T", written when the batch script ends
STATUS_FILE = "replica.status"  # per replica: "restart=N host=H start=T[ exit=RC end=T]"
# the job dir's own entries; a role's replicas live in <job dir>/<role>/<k>/, so a role may not
# be named as one of them (a script named metrics.py or snapshot.py names its role so)
JOB_DIR_ENTRIES = (
    ATTEMPTS_FILE, BATCH_LOG, RESULT_FILE, f"{RESULT_FILE}.tmp", "sbatch.sh", "snapshot",
    "metrics", "watchdog.log", WATCHDOG_FILE,
)  # fmt: skip
_HANG_DUMP = re.compile(r"hang-\d+\.(txt|json)")  # the hang watchdog's dumps (stacks/watchdog.py)
DEFAULT_MAX_REQUEUES = 3
RUNNER = "trainlaunch.schedulers.slurm.replica"  # runs each replica's command (replica.py)
# rank 0's rendezvous port: a free one of its node, chosen as the job starts (a port derived
# from the job id would be one any user of the cluster can compute); the old rule remains the
# fallback should the node's python not run there.
FREE_PORT = "trainlaunch.node.freeport"
RDZV_PORT_BASE, RDZV_PORT_SPAN = 20000, 10000
# The kernel's limit for one argument or environment string (MAX_ARG_STRLEN, with its NUL):
# a longer one cannot start on any node, so it is refused when the script is rendered.
MAX_ARG_BYTES = 32 * 4096


def role_file(index: int) -> str:
    """The replica script of role index, as its tasks read it: a file in the job dir (0600).
    Never an argument: a command line is public (``ps`` on the nodes, ``sacct -o
    SubmitLine`` for ever), and one argument is limited to MAX_ARG_BYTES."""
    return f".role{index}.sh"  # a role's own dir cannot start with '.' (specs.check_name)


# Macros become placeholders first, then shell expansions inside the quoted words.
_RUNTIME = {"\x01APP_ID\x01": '"$SLURM_JOB_ID"', "\x01REPLICA_ID\x01": '"$SLURM_PROCID"'}
_APP_ID, _REPLICA_ID = _RUNTIME
# In a job array an element's app id is ARRAYJOB_TASK, as squeue/scancel write it.
_ARRAY_RUNTIME = {**_RUNTIME, _APP_ID: '"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"'}
_SPLIT = re.compile("(" + "|".join(map(re.escape, _RUNTIME)) + ")")
_SAFE = re.compile(r"[\w@%+=:,./-]+", re.ASCII)  # what shlex.quote leaves bare
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TIME = re.compile(r"(\d+(:\d{1,2}){0,2}|\d+-\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE)", re.I)
_SIGNAL = re.compile(r"(R:)?(SIG)?([A-Z][A-Z0-9]*|\d+)(@\d+)?", re.I)
_MEM = re.compile(r"\d+[KMGT]?", re.I)
_MAIL_TYPES = {
    "NONE",
    "BEGIN",
    "END",
    "FAIL",
    "REQUEUE",
    "ALL",
    "INVALID_DEPEND",
    "STAGE_OUT",
    "TIME_LIMIT",
    "TIME_LIMIT_90",
    "TIME_LIMIT_80",
    "TIME_LIMIT_50",
    "ARRAY_TASKS",
}
_RESERVED = {
    "!",
    "[[",
    "]]",
    "{",
    "}",
    "case",
    "do",
    "done",
    "elif",
    "else",
    "esac",
    "fi",
    "for",
    "function",
    "if",
    "in",
    "select",
    "then",
    "time",
    "until",
    "while",
}


def slurm_runopts() -> runopts:
    """The typed options of the Slurm backend (``trainlaunch runopts slurm``)."""
    o = runopts()
    o.add("partition", str, "partition (sbatch --partition; default: the cluster's default)")
    o.add("account", str, "account to charge (--account)")
    o.add("qos", str, "quality of service (--qos)")
    o.add("time", str, "time limit: MINUTES, HH:MM:SS or D-HH:MM:SS (--time)")
    o.add("constraint", str, "node features, e.g. 'a100&ib' (--constraint)")
    o.add("comment", str, "free text shown by squeue/sacct (--comment)")
    o.add("mail_user", str, "who gets mail about the job (--mail-user)")
    o.add("mail_type", str, "when: BEGIN, END, FAIL, REQUEUE, ALL, ... comma-separated")
    o.add("exclusive", bool, "do not share the nodes with other jobs (--exclusive)", False)
    o.add("ntasks_per_node", int, "replicas per node (default 1: a replica is a node)", 1)
    o.add("cpus_per_task", int, "CPUs per replica (default: each role's resource.cpu)")
    o.add(
        "mem",
        str,
        "memory per node, e.g. 64G (default: resource.memMB x replicas per node);"
        " 'omit' leaves --mem out for clusters that reject memory requests",
    )
    o.add("gpus_per_node", int, "GPUs per node (default: resource.gpu x replicas per node)")
    o.add("gpu_type", str, "GPU type, e.g. a100: --gpus-per-node=TYPE:N")
    o.add(
        "signal",
        str,
        "signal every replica gets before the time limit (SIG@SECONDS; "
        "'none' = no warning); USR1/USR2 are ignored unless the app handles them",
        "USR1@90",
    )
    o.add(
        "max_requeues",
        int,
        "how often the job runs again after a rank saved and exited 75 on the warning "
        "(time limit, preemption); apart from max_retries",
        DEFAULT_MAX_REQUEUES,
    )
    o.add("rdzv_port", int, "rank 0's rendezvous port (default: a free port of rank 0's node)")
    o.add(
        "job_dir",
        str,
        "job directory for logs and records, on a filesystem the nodes "
        "share; ${app_id} is the job id (default: $TRAINLAUNCH_HOME/slurm/jobs/${app_id})",
    )
    o.add(
        "snapshot",
        str,
        "copy the code (git tree with uncommitted changes, or the working dir) into the job "
        "dir at submission and run it from there: on, off, or an earlier snapshot's dir",
        "on",
    )
    o.add("extra", list, "extra #SBATCH lines for every role, e.g. --reservation=r1;--nice=10")
    o.add(
        "hang_timeout",
        float,
        "seconds without output, metrics or heartbeat from any dist.ddp rank that count as a "
        "hang (default: off; docs/hangs.md)",
        check=above(0, NO_WATCHDOG),
    )
    o.add(
        "on_hang",
        str,
        "after a hang: none (report), stop (scancel), restart (requeue)",
        "none",
        choices=ON_HANG,
    )
    preflight_options.add_runopts(o, exclude_bad_nodes=True)
    return o


def max_requeues(cfg: Mapping[str, CfgVal]) -> int:
    """The max_requeues option (0 when unset)."""
    n = cfg.get("max_requeues")
    return n if isinstance(n, int) and not isinstance(n, bool) else 0


def node_python(app: AppDef) -> str:
    """The python that runs trainlaunch's own code on the nodes (replica runner, watchdog).

    The node agents' interpreter when the app has any (it has trainlaunch), else the one
    running trainlaunch now: the nodes share its file system.
    """
    return next((r.entrypoint for r in app.roles if r.node_agent), sys.executable)


def default_job_dir(home: Path) -> str:
    """The job directory template under the trainlaunch home."""
    return str(home / "slurm" / "jobs" / macros.app_id)


def check_cfg(cfg: Mapping[str, CfgVal]) -> None:
    """Reject option values Slurm would misread (UsageError names the option)."""
    for key, value in cfg.items():
        items: list[object] = list(value) if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, str) and _CONTROL.search(item):
                raise UsageError(f"option {key!r} must not contain control characters: {item!r}")

    def bad(key: str, pattern: re.Pattern[str], what: str) -> None:
        v = cfg.get(key)
        if v is not None and not pattern.fullmatch(str(v)):
            raise UsageError(f"option {key!r}: expected {what}, got {v!r}")

    bad("time", _TIME, "MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS")
    bad("gpu_type", re.compile(r"[A-Za-z0-9_.-]+"), "a GPU type name like a100")
    if cfg.get("signal") and str(cfg["signal"]).lower() != "none":
        if str(cfg["signal"]).upper().startswith(("B:", "RB:", "BR:")):
            raise UsageError(
                "option 'signal': B: would signal only the batch shell, which "
                "ends the job; the replicas get the signal without it"
            )
        bad("signal", _SIGNAL, "SIGNAL[@SECONDS], e.g. USR1@90 or TERM@120")
    if cfg.get("mem") and str(cfg["mem"]).lower() != "omit":
        bad("mem", _MEM, "a size like 64G or 'omit'")
    for t in str(cfg.get("mail_type") or "").split(","):
        if cfg.get("mail_type") and t.strip().upper() not in _MAIL_TYPES:
            raise UsageError(
                f"option 'mail_type': unknown type {t!r}; valid: {', '.join(sorted(_MAIL_TYPES))}"
            )
    for key in ("ntasks_per_node", "cpus_per_task", "gpus_per_node"):
        n = cfg.get(key)
        if isinstance(n, int) and n < (1 if key == "ntasks_per_node" else 0):
            raise UsageError(f"option {key!r} must be >= {1 if key == 'ntasks_per_node' else 0}")
    if max_requeues(cfg) < 0:
        raise UsageError("option 'max_requeues' must be >= 0")
    port = cfg.get("rdzv_port")
    if isinstance(port, int) and not 1 <= port <= 65535:
        raise UsageError(f"option 'rdzv_port' must be a TCP port (1-65535), got {port}")
    for line in cfg.get("extra") or []:  # type: ignore[union-attr]
        if not str(line).startswith("-"):
            raise UsageError(
                f"option 'extra': each line is an sbatch option starting with '-', got {line!r}"
            )


# --- quoting ------------------------------------------------------------------------------------


def shell_word(text: str, runtime: Mapping[str, str] = _RUNTIME) -> str:
    """One shell word for text; the runtime macros expand on the node, nothing else does."""
    if "\0" in text:
        raise UsageError(f"arguments and environment values cannot contain NUL: {text!r}")
    parts = [p for p in _SPLIT.split(text) if p]
    if not parts:
        return "''"
    return "".join(runtime.get(p) or shlex.quote(p) for p in parts)


def _command_word(text: str, runtime: Mapping[str, str] = _RUNTIME) -> str:
    """The first word of a command: never an assignment or a reserved word."""
    word = shell_word(text, runtime)
    if word in _RESERVED or ("=" in word and word == text):
        return "'" + text + "'"
    return word


def sbatch_value(text: str) -> str:
    """A value on an #SBATCH line (sbatch's own parser: double quotes, backslash escapes)."""
    if _SAFE.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _substitute(role: Role) -> Role:
    values = macros.Values(
        img_root=role.image, app_id=_APP_ID, replica_id=_REPLICA_ID, rank0_env=settings.RANK0_HOST
    )
    return values.apply(role)


# --- the script -----------------------------------------------------------------------------------


def render_script(
    app: AppDef,
    cfg: Mapping[str, CfgVal],
    session: str,
    job_dir: str,
    workdir: str | None = None,
    note: str = "",
) -> str:
    """The complete batch script for app (cfg resolved; job_dir may contain ${app_id}).

    workdir: where the job runs (its code snapshot), ``${app_id}`` allowed; note: a comment.
    """
    head, body = render_parts(app, cfg, session, job_dir, workdir, note)
    return "\n".join(head + body) + "\n"


def check_role_names(app: AppDef) -> None:
    """Refuse a role named as one of the job dir's own entries (JOB_DIR_ENTRIES)."""
    for role in app.roles:
        if role.name in JOB_DIR_ENTRIES or _HANG_DUMP.fullmatch(role.name):
            raise UsageError(
                f"role name {role.name!r} is taken on Slurm: the job directory holds its own "
                f"{role.name!r}",
                hint="name the role otherwise: `--name APP/ROLE` (dist.ddp, utils.python)",
            )


def render_parts(
    app: AppDef,
    cfg: Mapping[str, CfgVal],
    session: str,
    job_dir: str,
    workdir: str | None = None,
    note: str = "",
    array: bool = False,
) -> tuple[list[str], list[str]]:
    """The script's head (``#!``, comment, #SBATCH lines) and body; array: as a job array's
    element (app id ``ARRAYJOB_TASK``, output ``%A_%a``)."""
    check_cfg(cfg)
    check_role_names(app)
    if _CONTROL.search(job_dir):
        raise UsageError(f"job_dir must not contain control characters: {job_dir!r}")
    rt = _ARRAY_RUNTIME if array else _RUNTIME
    job_dir_word = shell_word(job_dir.replace(macros.app_id, _APP_ID), rt)
    het = len(app.roles) > 1
    roles = ", ".join(f"{r.name} x{r.num_replicas}" for r in app.roles)
    lines = ["#!/bin/bash", f"# trainlaunch app {app.name!r} (roles: {roles}); job dir: {job_dir}"]
    for i, role in enumerate(app.roles):
        if i:
            lines.append("#SBATCH hetjob")
        opts = _sbatch_options(app, role, cfg, job_dir, first=not i, array=array)
        lines += [f"#SBATCH {opt}" for opt in opts]
    head, lines = lines, []
    rank0_nodes = "$SLURM_JOB_NODELIST_HET_GROUP_0" if het else "$SLURM_JOB_NODELIST"
    port = cfg.get("rdzv_port")
    fallback = f"$(({RDZV_PORT_BASE} + SLURM_JOB_ID % {RDZV_PORT_SPAN}))"
    python = shell_word(node_python(app))
    port_expr = (
        str(port) if port else f'"$({python} -m {FREE_PORT} 2>/dev/null || echo {fallback})"'
    )
    lines += [
        "",
        "umask 077  # the job dir and trainlaunch's files in it are private (like the local store)",
        "",
        "# Shared by every replica: rank 0 is the first node of the first role (this script's",
        "# node), its rendezvous port a free one there, chosen now.",
        f'export {settings.RANK0_HOST}="$(scontrol show hostnames "{rank0_nodes}" | head -n 1)"',
        f"export {settings.RDZV_PORT}={port_expr}",
        f'export {settings.RESTART_COUNT}="${{SLURM_RESTART_COUNT:-0}}"',
        "export PYTHONUNBUFFERED=1",
        f"trainlaunch_job_dir={job_dir_word}",
        *(
            [f"# {note}"] * bool(note)
            + [f"cd -- {shell_word(workdir.replace(macros.app_id, _APP_ID), rt)} || exit 1"]
            if workdir
            else []
        ),
        f'echo "trainlaunch: job $SLURM_JOB_ID attempt ${settings.RESTART_COUNT} on '
        f'$SLURM_JOB_NODELIST; rank 0 at ${settings.RANK0_HOST}:${settings.RDZV_PORT}"',
        *start_lines(),
        "trainlaunch_pids=()",
    ]
    lines += _watchdog_lines(app, cfg)
    ntasks_per_node = int(cfg.get("ntasks_per_node") or 1)  # type: ignore[arg-type]
    for i, role in enumerate(app.roles):
        lines += _role_step(app, i, role, cfg, session, job_dir_word, het, ntasks_per_node, rt)
    lines += ["", "# Wait for every role; the first failure stops the others.", *wait_lines()]
    retries = max(r.max_retries for r in app.roles)
    lines += [
        "",
        "# Requeue after a rank saved and exited 75, or retry a failure.",
        *end_lines(retries, max_requeues(cfg), _exclude_from(app, cfg, job_dir_word)),
    ]
    lines += [
        "# The result, unless Slurm ended the job (scancel, time limit): Slurm says how then.",
        'if [ "$trainlaunch_term" -eq 0 ]; then',
        f'    printf \'restart=%s exit=%s end=%s\\n\' "${settings.RESTART_COUNT}" "$trainlaunch_rc" '
        f'"${{EPOCHREALTIME:-$(date +%s)}}" >"$trainlaunch_job_dir/{RESULT_FILE}.tmp" &&',
        f'        mv -f "$trainlaunch_job_dir/{RESULT_FILE}.tmp" "$trainlaunch_job_dir/{RESULT_FILE}"',
        "fi",
        'echo "trainlaunch: exit code $trainlaunch_rc"',
        'exit "$trainlaunch_rc"',
    ]
    return head, lines


def _exclude_from(app: AppDef, cfg: Mapping[str, CfgVal], job_dir_word: str) -> str | None:
    """Node 0's replica dir when a failed preflight requeues without its nodes (exclude.py)."""
    if not (cfg.get("preflight") and cfg.get("preflight_exclude_bad_nodes")):
        return None
    agents = [r for r in app.roles if r.node_agent]
    if not agents:
        return None
    return f"{job_dir_word}/{shlex.quote(agents[0].name)}/0"


def _watchdog_lines(app: AppDef, cfg: Mapping[str, CfgVal]) -> list[str]:
    """With hang_timeout: start the hang watchdog next to this script (docs/hangs.md)."""
    timeout = cfg.get("hang_timeout")
    if not timeout:
        return []
    on_hang = str(cfg.get("on_hang") or "none")  # one of ON_HANG: the schema checked it
    agents = [r for r in app.roles if r.node_agent]
    if not agents:
        raise UsageError(
            "hang_timeout on slurm needs a dist.ddp role (its node agents record the ranks)"
        )
    retries = max(r.max_retries for r in app.roles)
    python = shell_word(node_python(app))
    return [
        "",
        f"# Hang watchdog (hang_timeout={timeout}, on_hang={on_hang}): ends with this script.",
        f'export {settings.HEARTBEAT_PATH}="$trainlaunch_job_dir"/heartbeat/rank{{rank}}',
        f"export {settings.FLIGHT_RECORDER}=1  # hangs name the collective (docs/hangs.md)",
        f'( exec {python} -m trainlaunch.schedulers.slurm.watchdog "$trainlaunch_job_dir" '
        f'{float(timeout)} {on_hang} {retries} $$ >>"$trainlaunch_job_dir/watchdog.log" 2>&1 & )',  # type: ignore[arg-type]
    ]


def _sbatch_options(
    app: AppDef,
    role: Role,
    cfg: Mapping[str, CfgVal],
    job_dir: str,
    first: bool,
    array: bool = False,
) -> list[str]:
    """The #SBATCH options of one role's component (job-wide ones on the first)."""
    opts = [f"--job-name={app.name}"]
    if first:
        app_id = "%A_%a" if array else "%j"
        out = job_dir.replace("%", "%%").replace(macros.app_id, app_id) + "/" + BATCH_LOG
        opts += [f"--output={sbatch_value(out)}", "--open-mode=append"]
        sig = cfg.get("signal")
        if sig and str(sig).lower() != "none":
            opts.append(f"--signal={sig}")
        if max(r.max_retries for r in app.roles) or max_requeues(cfg):
            opts.append("--requeue")
        for key, flag in (
            ("comment", "comment"),
            ("mail_user", "mail-user"),
            ("mail_type", "mail-type"),
        ):
            if cfg.get(key):
                opts.append(f"--{flag}={sbatch_value(str(cfg[key]))}")
    per_node = int(cfg.get("ntasks_per_node") or 1)  # type: ignore[arg-type]
    nodes = -(-role.num_replicas // per_node)
    opts += [f"--nodes={nodes}", f"--ntasks={role.num_replicas}", f"--ntasks-per-node={per_node}"]
    cpus = cfg.get("cpus_per_task")
    cpus = role.resource.cpu if cpus is None else cpus
    if cpus:
        opts.append(f"--cpus-per-task={cpus}")
    mem = cfg.get("mem")
    if mem is None and role.resource.memMB:
        opts.append(f"--mem={role.resource.memMB * per_node}M")
    elif mem and str(mem).lower() != "omit":
        opts.append(f"--mem={mem}")
    gpus = cfg.get("gpus_per_node")
    gpus = role.resource.gpu * per_node if gpus is None else gpus
    if gpus:
        kind = f"{cfg['gpu_type']}:" if cfg.get("gpu_type") else ""
        opts.append(f"--gpus-per-node={kind}{gpus}")
    for key in ("partition", "account", "qos", "constraint", "time"):
        if cfg.get(key):
            opts.append(f"--{key}={sbatch_value(str(cfg[key]))}")
    if cfg.get("exclusive"):
        opts.append("--exclusive")
    opts += [str(x) for x in cfg.get("extra") or []]  # type: ignore[union-attr]
    return opts


def _role_step(
    app: AppDef,
    index: int,
    role: Role,
    cfg: Mapping[str, CfgVal],
    session: str,
    job_dir_word: str,
    het: bool,
    per_node: int,
    runtime: Mapping[str, str] = _RUNTIME,
) -> list[str]:
    """The replica script of one role (a quoted here-document) and its srun step."""
    body = replica_script(role, session, job_dir_word, cfg, node_python(app), runtime)
    var = f"trainlaunch_role_{index}"
    end = f"EOF_ROLE_{index}"
    while end in body.split("\n"):  # an argument line that equals the terminator
        end += "_"
    nodes = -(-role.num_replicas // per_node)
    srun = (
        ["srun"]
        + ([f"--het-group={index}"] if het else [])
        + [f"--nodes={nodes}", f"--ntasks={role.num_replicas}", f"--ntasks-per-node={per_node}"]
    )
    cpus = cfg.get("cpus_per_task")
    cpus = role.resource.cpu if cpus is None else cpus
    if cpus:
        srun.append(f"--cpus-per-task={cpus}")  # 22.05 steps do not inherit it from sbatch
    path = f'"$trainlaunch_job_dir/{role_file(index)}"'
    srun += ["--kill-on-bad-exit=1", "bash", path]
    return [
        "",
        f"# Role {role.name!r}: {role.num_replicas} replicas, one srun task each "
        "(replica id = task rank).",
        f"IFS= read -r -d '' {var} <<'{end}' || true",
        body.rstrip("\n"),
        end,
        "# its tasks read it from a private file, never from their command line (ps, sacct)",
        f'printf \'%s\' "${var}" >"$trainlaunch_job_dir/{role_file(index)}.tmp" &&',
        f'    mv -f "$trainlaunch_job_dir/{role_file(index)}.tmp" {path}',
        " ".join(srun) + " &",
        "trainlaunch_pids+=($!)",
    ]


def _check_sizes(role: str, argv: Sequence[str], env: Mapping[str, str]) -> None:
    """Refuse an argument or env string no exec could take (UsageError, at submission)."""
    sizes = [
        (f"argument {i}", len(a.encode("utf-8", "surrogateescape"))) for i, a in enumerate(argv)
    ]
    sizes += [
        (f"env {k}", len(f"{k}={v}".encode("utf-8", "surrogateescape"))) for k, v in env.items()
    ]
    for what, n in sizes:
        if n + 1 > MAX_ARG_BYTES:
            raise UsageError(
                f"{what} of role {role!r} is {n} bytes: over the kernel's limit for one "
                f"argument or environment string ({MAX_ARG_BYTES - 1} bytes), no node could "
                "start it",
                hint="put the value in a file and pass the file's path",
            )


def replica_script(
    role: Role,
    session: str,
    job_dir_word: str,
    cfg: Mapping[str, CfgVal],
    python: str,
    runtime: Mapping[str, str] = _RUNTIME,
) -> str:
    """What every task of role runs on its node (expanded there, not in the batch script).

    python runs the replica runner; a node without it writes stdout.log and stderr.log only.
    """
    r = _substitute(role)
    identity = {
        settings.APP_ID: _APP_ID,
        settings.HANDLE: f"{BACKEND}://{session}/{_APP_ID}",
        settings.ROLE_NAME: role.name,
        settings.REPLICA_ID: _REPLICA_ID,
        settings.NUM_REPLICAS: str(role.num_replicas),
    }
    env = {**identity, **dict(r.env)}
    _check_sizes(role.name, (r.entrypoint, *r.args), r.env)
    lines = [
        f"trainlaunch_dir={job_dir_word}/{shlex.quote(role.name)}/{_RUNTIME[_REPLICA_ID]}",
        f'export {settings.REPLICA_LOG_DIR}="$trainlaunch_dir"',
    ]
    for name, value in env.items():
        if not _IDENT.fullmatch(name):
            raise UsageError(
                f"role {role.name!r}: env name {name!r} is not a shell variable "
                "name; the slurm backend cannot set it"
            )
        lines.append(f"export {name}={shell_word(value, runtime)}")
    sig = str(cfg.get("signal") or "")
    m = _SIGNAL.fullmatch(sig) if sig.lower() != "none" else None
    if m and m.group(3).upper() in ("USR1", "USR2", "10", "12"):
        name = {"10": "USR1", "12": "USR2"}.get(m.group(3), m.group(3).upper())
        lines.append(f"trap '' {name}  # the --signal warning: ignored unless the app handles it")
    lines += [
        "trap : TERM  # outlive SIGTERM to record the exit code; the app still gets it",
        'mkdir -p -- "$trainlaunch_dir" || exit 1',
        "trainlaunch_status() {",
        f"    printf 'restart=%s host=%s start=%s%s\\n' \"${settings.RESTART_COUNT}\" "
        f'"$SLURMD_NODENAME" "$trainlaunch_start" "$1" >"$trainlaunch_dir/{STATUS_FILE}.tmp" &&',
        f'        mv -f "$trainlaunch_dir/{STATUS_FILE}.tmp" "$trainlaunch_dir/{STATUS_FILE}"',
        "}",
        'trainlaunch_start="${EPOCHREALTIME:-$(date +%s)}"',
        "trainlaunch_status ''",
        f'umask "${{{settings.USER_UMASK}:-077}}"  # files of the app itself: the user umask',
        "trainlaunch_cmd=("
        + " ".join(
            [_command_word(r.entrypoint, runtime), *(shell_word(a, runtime) for a in r.args)]
        )
        + ")",
        f"trainlaunch_python={shell_word(python)}",
        'if command -v "$trainlaunch_python" >/dev/null; then  # both streams in arrival order',
        f'    "$trainlaunch_python" -m {RUNNER} "$trainlaunch_dir" "${{trainlaunch_cmd[@]}}"',
        "else  # no such python on this node: stdout.log and stderr.log only",
        '    "${trainlaunch_cmd[@]}" '
        f'>>"$trainlaunch_dir/{STREAM_FILES["stdout"]}" '
        f'2>>"$trainlaunch_dir/{STREAM_FILES["stderr"]}"',
        "fi",
        "trainlaunch_rc=$?",
        "umask 077",
        'trainlaunch_status " exit=$trainlaunch_rc end=${EPOCHREALTIME:-$(date +%s)}"',
        'exit "$trainlaunch_rc"',
    ]
    return "\n".join(lines) + "\n"
