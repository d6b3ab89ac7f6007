"""torchrun's recipes, pasted: its grammar, per-node commands, --redirects, `trainlaunch torchrun`.

Real ``torchrun`` runs next to trainlaunch where that is cheap; the multi-command recipes
(the multinode tutorial's c10d and static forms) start two commands together on this machine.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import CLI, InProcessCLI, processes_with_env, wait_until
from tests.process.test_torchrun_launcher_port import free_port, launch

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ddp"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
DROPIN = [sys.executable, "-m", "trainlaunch", "torchrun"]

GRAMMAR_CASES = [
    ["--nproc-per=2", "train.py", "--lr", "0.1"],
    ["--nproc-per-node", "2", "-m", "pkg.train", "--lr", "0.1"],
    ["--module", "pkg.train", "--nproc-per-node", "3"],  # after the module: the program's
    ["--max-restart=0", "--redirect=3", "train.py"],
    ["--max-re=0", "train.py"],  # --max-retries is trainlaunch's: torchrun's flag wins
    ["-r3", "-t", "1", "train.py"],
    ["--no-python", "run.sh", "-x"],
    ["train.py", "--", "--lr"],
    ["-m", "pkg.train", "--", "--lr"],
    ["--", "train.py", "--", "x"],
    ["--nproc_per_node=2", "--", "train.py", "-m", "y"],
    ["--standalone", "train.py", "--standalone"],
]
GRAMMAR_ERRORS = [
    (["--nproc=2", "train.py"], None),  # dist.ddp's own --nproc alias: fine there
    (["--n=1", "train.py"], "ambiguous option: --n=1 could match --nnodes"),
    (["--rdzv=x", "train.py"], "ambiguous option: --rdzv=x could match"),
    (["-m"], "the following arguments are required: training_script"),
]
FIELDS = ("training_script", "training_script_args", "module", "no_python", "nproc_per_node")
FIELDS += ("redirects", "tee", "max_restarts", "standalone")


def torchrun_parse(argv: list[str]) -> dict[str, object]:
    """What real torchrun's parser makes of argv (in-process: its parser, no launch)."""
    from torch.distributed.run import get_args_parser

    ns = get_args_parser().parse_args(argv)
    out = {k: getattr(ns, k) for k in FIELDS}
    out["training_script_args"] = list(ns.training_script_args)
    return out


def ddp_parse(argv: list[str], redirects_default: str = "0") -> dict[str, object]:
    """What dist.ddp makes of the same argv, as its agent reads it back."""
    from trainlaunch.agent import flags
    from trainlaunch.resolver import find_component

    app = find_component("dist.ddp").materialize(argv)
    args = flags.parse(list(app.roles[0].args)[2:], {})
    out: dict[str, object] = {
        "training_script": args.script,
        "training_script_args": list(args.script_args),
    }
    out.update({k: args.values[k] for k in FIELDS[2:]})
    return out


@pytest.mark.parametrize("argv", GRAMMAR_CASES, ids=" ".join)
def test_dist_ddp_reads_torchruns_command_line_as_torchrun(argv: list[str]) -> None:
    want, got = torchrun_parse(argv), ddp_parse(argv)
    tee = "0" if argv.count("-r3") or any(a.startswith("--redirect") for a in argv) else "3"
    if "-t" not in argv:
        want["tee"] = tee  # dist.ddp's default --tee 3 (unless --redirects is given)
    assert got == want


@pytest.mark.parametrize("argv, message", GRAMMAR_ERRORS, ids=lambda a: str(a))
def test_grammar_errors_say_what_torchrun_says(argv: list[str], message: str | None) -> None:
    from trainlaunch.errors import ComponentError

    if message is None:
        assert ddp_parse(argv)["nproc_per_node"] == "2"
        return
    with pytest.raises(SystemExit):
        torchrun_parse(argv)  # argparse prints the message and exits 2
    with pytest.raises(ComponentError, match=message.replace("-", r"\-")):
        ddp_parse(argv)


def test_script_option_then_program_flags(cli: CLI) -> None:
    got = ddp_parse(["--nproc", "2", "--script", "train.py", "--steps", "3"])
    assert (got["training_script"], got["training_script_args"]) == ("train.py", ["--steps", "3"])


def test_dropin_refuses_in_torchruns_words(cli: CLI) -> None:
    for argv, words in (
        (["--foo", "x.py"], "unrecognized arguments: --foo"),
        (["--nproc=2", "x.py"], "ambiguous option: --nproc=2 could match --nproc-per-node"),
        ([], "the following arguments are required: training_script"),
    ):
        proc = cli("torchrun", *argv)
        assert proc.returncode == 2 and words in proc.stderr, proc.stderr


def test_dryrun_says_who_starts_the_nodes(inprocess_cli: InProcessCLI) -> None:
    (inprocess_cli.cwd / "t.py").write_text("")  # the local backend checks that the script exists
    ep = ["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:29400"]
    cases = {
        ("--nnodes", "2"): "trainlaunch starts all 2 nodes",
        ("--nnodes", "2", *ep): "this app is ONE node (node rank assigned at rendezvous)",
        ("--nnodes", "1:2", *ep): "this app is ONE node",
        ("--nnodes", "2", "--master-addr", "h", "--master-port", "1", "--node-rank", "1"): (
            "ONE node (node rank 1) of a 2-node job that meets at h:1"
        ),
    }
    for argv, words in cases.items():
        text = inprocess_cli("run", "--dryrun", "dist.ddp", *argv, "t.py", check=True).stdout
        assert words in text, text
        replicas = len(re.findall(r"^\[t/\d+\]$", text, flags=re.M))  # not the "[t/N ranks]" plans
        assert replicas == (2 if "all 2" in words else 1), text


@pytest.mark.slow  # real torchrun: ~30 s on a loaded machine
def test_redirects_alone_shows_no_worker_line(cli: CLI, tmp_path: Path) -> None:
    argv = ["--nproc-per-node", "2", "--redirects", "3", str(FIXTURES / "chatter.py")]
    real = subprocess.run([*TORCHRUN, *argv], capture_output=True, text=True, env=cli.env)
    dropin = subprocess.run(
        [*DROPIN, *argv], capture_output=True, text=True, env=cli.env, cwd=cli.cwd
    )
    handle = cli.run("dist.ddp", *argv)
    assert cli.wait(handle)["state"] == "SUCCEEDED"
    logs = cli("logs", handle, check=True).stdout
    assert real.returncode == dropin.returncode == 0
    for shown in (real.stdout + real.stderr, dropin.stdout + dropin.stderr, logs):
        assert "out 0 a" not in shown and "err 1" not in shown, shown
    # tee alone (no --redirects) still shows them, prefixed, in the drop-in as in torchrun
    teed = subprocess.run([*DROPIN, "--tee", "3", *argv[:2], argv[-1]], **_quiet(cli))
    assert "[default0]:out 0 a" in teed.stdout and "[default1]:err 1" in teed.stderr


def _quiet(cli: CLI) -> dict[str, object]:
    return {"capture_output": True, "text": True, "env": cli.env, "cwd": cli.cwd}


@pytest.mark.slow  # real torchrun: ~30 s on a loaded machine
def test_module_with_program_flags_matches_torchrun(cli: CLI, tmp_path: Path) -> None:
    argv = ["--nproc-per-node", "2", "-m", "dumpmod", "--lr", "0.1"]
    seen = {}
    for name, head in (
        ("torchrun", TORCHRUN),
        ("drop-in", DROPIN),
        ("run", [*DROPIN[:3], "run", "--wait", "dist.ddp"]),
    ):
        dump = tmp_path / name
        dump.mkdir()
        env = {**cli.env, "DUMP_DIR": str(dump), "PYTHONPATH": str(FIXTURES)}
        proc = subprocess.run([*head, *argv], capture_output=True, text=True, env=env, cwd=cli.cwd)
        assert proc.returncode == 0, proc.stderr
        docs = [json.loads((dump / f"rank{r}_a0.json").read_text()) for r in (0, 1)]
        seen[name] = [(d["argv"][1:], d["env"]["WORLD_SIZE"]) for d in docs]
    assert seen["drop-in"] == seen["run"] == seen["torchrun"] == [(["--lr", "0.1"], "2")] * 2


def test_abbreviated_flags_run(cli: CLI, tmp_path: Path) -> None:
    argv = ["--nproc-per=2", "--max-restart=0", "--redirect=3"]
    argv += [str(FIXTURES / "touch_rank.py"), "--touch-dir", "{out}"]
    for launcher in ("run", "trainlaunch-torchrun"):
        got = launch(cli, launcher, argv, tmp_path / launcher)
        assert got.code == 0 and got.files == {"0", "1"}, got.err
        assert "rank 0 of 2" not in got.out  # --redirect=3: in the files only


def test_dropin_exit_code_handle_and_status(cli: CLI) -> None:
    fail = [str(FIXTURES / "fail.py"), "1", "exit:7"]
    proc = cli("torchrun", "--nproc-per-node", "2", *fail)
    assert proc.returncode == 7, proc.stderr  # the failing rank's code
    handle = proc.stderr.split("trainlaunch: ", 1)[1].split()[0]
    assert cli.status(handle)["state"] == "FAILED"
    assert "rank 1 about to fail" in cli("logs", handle, check=True).stdout
    one = cli("torchrun", "--torchrun-exit-codes", "--nproc-per-node", "2", *fail)
    assert one.returncode == 1, one.stderr  # torchrun's own: always 1


def test_dropin_streams_live_and_ctrl_c_stops_the_app(cli: CLI, tmp_path: Path) -> None:
    err = tmp_path / "stderr.txt"
    with err.open("w") as err_file:
        proc = cli.popen(
            "torchrun",
            "--nproc-per-node",
            "2",
            "--tee",
            "3",
            str(FIXTURES / "ticker.py"),
            stdout=subprocess.PIPE,
            stderr=err_file,
        )
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()  # live: the app is still running
            assert first.startswith(("[default0]:tick ", "[default1]:tick ")), first
            handle = wait_until(lambda: "trainlaunch: " in err.read_text() and err.read_text())
            app_id = handle.split("trainlaunch: ", 1)[1].split()[0].rsplit("/", 1)[1]
            assert processes_with_env("TRAINLAUNCH_APP_ID", app_id)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 130
        finally:
            if proc.poll() is None:
                proc.kill()
    wait_until(
        lambda: not processes_with_env("TRAINLAUNCH_APP_ID", app_id),
        timeout=30,
        what="every process of the app to be gone",
    )
    assert cli.status(f"local://trainlaunch/{app_id}")["state"] == "CANCELLED"


# --- the multinode tutorial's per-node recipes: two commands, one job -----------------------


def _two_nodes(cli: CLI, head: list[str], per_node: list[list[str]], out: Path) -> list[int]:
    out.mkdir()
    script = [str(FIXTURES / "allreduce.py"), str(out)]

    def one(flags: list[str]) -> int:
        proc = subprocess.run(
            [*head, *flags, *script], capture_output=True, text=True, env=cli.env, cwd=cli.cwd
        )
        return proc.returncode

    with ThreadPoolExecutor(2) as pool:
        codes = list(pool.map(one, per_node))
    docs = [json.loads((out / str(r)).read_text()) for r in range(4)]
    assert [(d["rank"], d["world"]) for d in docs] == [(r, 4) for r in range(4)]
    return codes


HEADS = {
    "torchrun": TORCHRUN,
    "run": [*DROPIN[:3], "run", "--wait", "dist.ddp"],
    "trainlaunch-torchrun": DROPIN,
}


@pytest.mark.slow
@pytest.mark.parametrize("launcher", list(HEADS))
def test_tutorial_c10d_one_command_per_node(cli: CLI, tmp_path: Path, launcher: str) -> None:
    common = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d"]
    common += ["--rdzv-endpoint", f"localhost:{free_port()}", "--rdzv-id", "job1"]
    assert _two_nodes(cli, HEADS[launcher], [common, common], tmp_path / "out") == [0, 0]


@pytest.mark.slow
@pytest.mark.parametrize("launcher", list(HEADS))
def test_tutorial_static_one_command_per_node(cli: CLI, tmp_path: Path, launcher: str) -> None:
    common = ["--nnodes", "2", "--nproc-per-node", "2", "--master-addr", "localhost"]
    common += ["--master-port", str(free_port())]
    nodes = [[*common, "--node-rank", str(r)] for r in (0, 1)]
    assert _two_nodes(cli, HEADS[launcher], nodes, tmp_path / "out") == [0, 0]


@pytest.mark.slow
def test_elastic_issue_flags_one_command_is_one_node(cli: CLI, tmp_path: Path) -> None:
    # the issue's exact flags: one command, one node of a 1:2 job -> WORLD_SIZE = nproc
    argv = ["--nnodes", "1:2", "--nproc-per-node", "2", "--rdzv-backend", "c10d"]
    argv += ["--rdzv-endpoint", f"localhost:{free_port()}"]
    argv += [str(FIXTURES / "touch_rank.py"), "--touch-dir", "{out}"]
    for launcher in ("torchrun", "run", "trainlaunch-torchrun"):
        got = launch(cli, launcher, argv, tmp_path / launcher)
        assert got.code == 0 and got.files == {"0", "1"}, (launcher, got.err)
        assert {(tmp_path / launcher / r).read_text() for r in got.files} == {"2"}


@pytest.mark.parametrize(
    "argv",
    [
        ["--nnodes", "2", "t.py"],
        ["--nnodes", "2", "--rdzv-backend", "c10d", "t.py"],
        ["--nnodes", "1:3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1", "t.py"],
        ["--nnodes", "2", "--node-rank", "1", "t.py"],
    ],
    ids=" ".join,
)
def test_every_dropin_command_is_one_node(argv: list[str]) -> None:
    from trainlaunch.agent import flags
    from trainlaunch.cli.torchrun import ddp_arguments
    from trainlaunch.resolver import find_component

    app = find_component("dist.ddp").call(ddp_arguments(flags.parse(argv, {}, "torchrun")))
    assert app.roles[0].num_replicas == 1


def test_a_handover_to_torchrun_keeps_torchruns_own_log_lines(cli: CLI, tmp_path: Path) -> None:
    # issue 22 #27: handed over as `python -m torch.distributed.run`, torchrun's logger was
    # `__main__`'s, outside torch's log format: its warnings lost their `W... run.py:N]` prefix
    cli.env.pop("OMP_NUM_THREADS", None)  # torchrun warns that it sets it (nproc > 1)
    script = tmp_path / "hi.py"
    # one write per line: CI runs unbuffered, and print's two writes of two ranks interleave
    script.write_text("import sys\nsys.stdout.write('hi\\n')\n")
    argv = ["--nnodes", "1:2", "--nproc-per-node", "2", "--rdzv-backend", "c10d"]
    argv += ["--rdzv-conf", "last_call_timeout=1"]  # not 30 s for a second node that never comes
    proc = cli("torchrun", *argv, "--rdzv-endpoint", f"localhost:{free_port()}", str(script))
    assert proc.returncode == 0 and proc.stdout.splitlines() == ["hi", "hi"], proc.stderr
    assert "[trainlaunch] using torchrun: elastic" in proc.stderr  # it was handed over
    warned = [ln for ln in proc.stderr.splitlines() if "Setting OMP_NUM_THREADS" in ln]
    assert len(warned) == 1, proc.stderr
    assert re.match(r"W\d{4} [\d:.]+ +\d+ torch/distributed/run\.py:\d+\] Setting", warned[0])
