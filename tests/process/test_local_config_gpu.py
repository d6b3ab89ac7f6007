"""`run` honours config precedence end to end, and slices GPUs per replica (dry runs in-process,
runs through a real interpreter)."""

from __future__ import annotations

import json

from tests.conftest import CLI, InProcessCLI


def dryrun_env(cli: CLI, *args: str, env: dict[str, str] | None = None) -> list[dict]:
    out = cli("run", "--dryrun", "--json", *args, env=env, check=True).stdout
    return [r["env"] for r in json.loads(out)["replicas"]]


def test_seed_precedence_cli_over_env_over_project_over_user(
    cli: CLI, inprocess_cli: InProcessCLI
) -> None:
    user = cli.home / "xdg-config" / "trainlaunch"
    user.mkdir(parents=True)
    (user / "config.toml").write_text("[run]\nseed = 1\nexport_strategy = 'sampled'\n")
    env = {"TRAINLAUNCH_CONFIG": str(cli.cwd / ".trainlaunch.toml")}
    assert dryrun_env(inprocess_cli, "utils.echo")[0]["TRAINLAUNCH_SEED"] == "1"
    (cli.cwd / ".trainlaunch.toml").write_text(
        "[run]\nseed = 2\n[scheduler.local]\ngrace_period = 3.0\n"
        "[component.'utils.echo']\nmsg = 'from config'\n"
    )
    envs = dryrun_env(inprocess_cli, "utils.echo", env=env)
    assert envs[0]["TRAINLAUNCH_SEED"] == "2"
    assert envs[0]["TRAINLAUNCH_EXPORT_STRATEGY"] == "sampled"  # user file still applies
    assert (
        dryrun_env(inprocess_cli, "utils.echo", env={**env, "TRAINLAUNCH_SEED": "3"})[0][
            "TRAINLAUNCH_SEED"
        ]
        == "3"
    )
    assert (
        dryrun_env(
            inprocess_cli, "--seed", "4", "utils.echo", env={**env, "TRAINLAUNCH_SEED": "3"}
        )[0]["TRAINLAUNCH_SEED"]
        == "4"
    )
    # component defaults from config, but an explicit argument wins
    handle = cli("run", "utils.echo", env=env, check=True).stdout.strip()
    cli.wait(handle)
    assert "from config" in cli("logs", "--raw", handle, check=True).stdout
    handle = cli("run", "utils.echo", "--msg", "explicit", env=env, check=True).stdout.strip()
    cli.wait(handle)
    assert "explicit" in cli("logs", "--raw", handle, check=True).stdout


def test_unknown_config_key_is_a_usage_error(inprocess_cli: InProcessCLI) -> None:
    (inprocess_cli.cwd / ".trainlaunch.toml").write_text("[run]\nseeed = 2\n")
    proc = inprocess_cli("run", "utils.echo", env={"TRAINLAUNCH_CONFIG": ".trainlaunch.toml"})
    assert proc.returncode == 2
    assert "seeed" in proc.stderr and "Traceback" not in proc.stderr


def test_each_replica_gets_its_own_gpu_slice(cli: CLI, inprocess_cli: InProcessCLI) -> None:
    sh = ["utils.sh", "--gpu"]
    envs = dryrun_env(
        inprocess_cli, "--cfg", "gpu_count=4", *sh, "2", "--num-replicas", "2", "true"
    )
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0,1", "2,3"]
    three = {"TRAINLAUNCH_GPU_COUNT": "3"}
    envs = dryrun_env(inprocess_cli, *sh, "1", "--num-replicas", "3", "true", env=three)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0", "1", "2"]
    too_many = inprocess_cli(
        "run",
        "--dryrun",
        "--cfg",
        "gpu_count=2",
        "utils.sh",
        "--gpu",
        "2",
        "--num-replicas",
        "2",
        "true",
    )
    assert too_many.returncode == 3 and "4 GPUs" in too_many.stderr
    assert "CUDA_VISIBLE_DEVICES" not in dryrun_env(inprocess_cli, "utils.sh", "true")[0]
    handle = cli.run(
        "--cfg",
        "gpu_count=2",
        "utils.sh",
        "--gpu",
        "1",
        "--num-replicas",
        "2",
        "echo gpus=$CUDA_VISIBLE_DEVICES",
    )
    cli.wait(handle)
    out = cli("logs", handle, check=True).stdout
    assert "sh/0 gpus=0" in out and "sh/1 gpus=1" in out


def test_gpu_slices_honour_cuda_visible_devices_like_the_agent(inprocess_cli: InProcessCLI) -> None:
    # 4 GPUs on the machine, 2 and 3 given to us: the replicas get 2 and 3, not 0 and 1
    env = {"TRAINLAUNCH_GPU_COUNT": "4", "CUDA_VISIBLE_DEVICES": "2,3"}
    envs = dryrun_env(
        inprocess_cli, "utils.sh", "--gpu", "1", "--num-replicas", "2", "true", env=env
    )
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["2", "3"]
    too_many = inprocess_cli(
        "run", "--dryrun", "utils.sh", "--gpu", "1", "--num-replicas", "3", "true", env=env
    )
    assert too_many.returncode == 3 and "3 GPUs in total but 2 are visible" in too_many.stderr
