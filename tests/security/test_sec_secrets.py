"""Secret env values (names like *TOKEN*, *SECRET*, *PASSWORD*, *KEY*) are never printed by
`describe` or `run --dryrun` (text or --json), nor by status/list, unless --show-secrets.

The record on disk keeps them (it is what the replica gets); the store is private (0700/0600,
see test_sec_store.py).
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.conftest import CLI

# name -> a unique value; the names are spelled the ways people spell them
SECRET_NAMES = [
    "HF_TOKEN",
    "GITHUB_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "DB_PASSWORD",
    "OPENAI_API_KEY",
    "WANDB_API_KEY",
    "SSH_KEY",
    "client_secret",
    "my_password",
    "Api_Key",
    "PASSWD",
    "KEY",
]
# *KEY* as documented ("names like ... *KEY*"): the key word glued to another word
GLUED_KEY_NAMES = ["PRIVATEKEY", "SSHKEY", "GPGKEY_PASSPHRASE"]


def _secrets(names: list[str]) -> dict[str, str]:
    return {n: f"s3cr3t-{uuid.uuid4().hex}" for n in names}


def _env_args(secrets: dict[str, str]) -> list[str]:
    out = ["--env", "PLAIN_SETTING=visible-value"]
    for k, v in secrets.items():
        out += ["--env", f"{k}={v}"]
    return out


def _leaks(text: str, secrets: dict[str, str]) -> list[str]:
    return [k for k, v in secrets.items() if v in text]


@pytest.mark.parametrize(
    "component", ["utils.sh", pytest.param("dist.ddp", marks=pytest.mark.slow)]
)
def test_dryrun_masks_secrets(cli: CLI, component: str) -> None:
    secrets = _secrets(SECRET_NAMES)
    tail = ["true"] if component == "utils.sh" else ["-j", "1x2", "--script", "train.py"]
    (cli.cwd / "train.py").write_text("")  # the local backend checks that the script exists
    args = [component, *_env_args(secrets), *tail]
    for fmt in ([], ["--json"]):
        proc = cli("run", "--dryrun", *fmt, *args, check=True)
        assert _leaks(proc.stdout + proc.stderr, secrets) == [], f"dryrun {fmt} leaks"
        assert "visible-value" in proc.stdout
        shown = cli("run", "--dryrun", "--show-secrets", *fmt, *args, check=True)
        assert _leaks(shown.stdout, secrets) == list(secrets), "--show-secrets shows them all"
    doc = json.loads(cli("run", "--dryrun", "--json", *args, check=True).stdout)
    env = doc["replicas"][0]["env"]
    assert all(env[k] == "********" for k in secrets), env


def test_describe_status_list_mask_secrets(reaper: CLI) -> None:
    cli = reaper
    secrets = _secrets(SECRET_NAMES)
    handle = cli.run("utils.sh", *_env_args(secrets), "exit 2")
    cli.wait(handle)
    for args in (
        ["describe", handle],
        ["describe", "--json", handle],
        ["status", handle],
        ["status", "--json", handle],
        ["list"],
        ["list", "--json"],
        ["wait", handle],
    ):
        proc = cli(*args)
        assert _leaks(proc.stdout + proc.stderr, secrets) == [], f"{args} leaks"
    desc = json.loads(cli("describe", "--json", handle, check=True).stdout)
    assert "visible-value" in json.dumps(desc)
    for args in (
        ["describe", "--show-secrets", handle],
        ["describe", "--json", "--show-secrets", handle],
    ):
        proc = cli(*args, check=True)
        assert _leaks(proc.stdout, secrets) == list(secrets), f"{args} must show them"


def test_names_with_key_glued_to_another_word_are_masked(cli: CLI) -> None:
    """docs/cli.md: `--show-secrets` prints names like *TOKEN*, *SECRET*, *PASSWORD*, *KEY*."""
    secrets = _secrets(GLUED_KEY_NAMES)
    proc = cli("run", "--dryrun", "utils.sh", *_env_args(secrets), "true", check=True)
    assert _leaks(proc.stdout, secrets) == []


# issue 23 #22: values that are credentials whatever their variable is called
CREDENTIAL_VALUES = {
    "GITHUB_PAT": "ghp_" + "a1B2c3D4e5" * 4,
    "DATABASE_URL": "postgres://trainer:pw-{}@db.example.com:5432/runs",
    "UPSTREAM": "https://bot:{}@git.example.com/org/repo.git",
    "HUB": "hf_" + "Zx9" * 12,
    "AWS_ID": "AKIAIOSFODNN7EXAMPL3",
    "SLACK_HOOK": "xoxb-" + "1234567890-" * 3,
}


def test_values_that_look_like_credentials_are_masked(reaper: CLI) -> None:
    cli = reaper
    secrets = {k: v.format(uuid.uuid4().hex) for k, v in CREDENTIAL_VALUES.items()}
    plain = {"HOMEPAGE": "https://example.com/docs", "NOTE": "sk-learn"}
    args = ["utils.sh", *_env_args({**secrets, **plain}), "true"]
    for fmt in ([], ["--json"]):
        proc = cli("run", "--dryrun", *fmt, *args, check=True)
        assert _leaks(proc.stdout + proc.stderr, secrets) == [], f"dryrun {fmt} leaks"
        assert _leaks(proc.stdout, plain) == list(plain), "ordinary values stay visible"
    handle = cli.run(*args)
    cli.wait(handle)
    for fmt in ([], ["--json"]):
        proc = cli("describe", *fmt, handle, check=True)
        assert _leaks(proc.stdout + proc.stderr, secrets) == [], f"describe {fmt} leaks"
        shown = cli("describe", "--show-secrets", *fmt, handle, check=True)
        assert _leaks(shown.stdout, secrets) == list(secrets)


@pytest.mark.parametrize(
    "backend",
    [["-s", "local"], ["-s", "slurm"], ["-s", "kubernetes", "--cfg", "namespace=ns"]],
    ids=["local", "slurm-array", "kubernetes"],
)
def test_sweep_dryrun_masks_secrets_as_run_does(inprocess_cli: CLI, backend: list[str]) -> None:
    # issue 23 #4: sweep --dryrun printed --env secrets in clear text where run --dryrun masks
    secrets = {**_secrets(["HF_TOKEN", "DB_PASSWORD"]), "GITHUB_PAT": "ghp_" + "q7" * 18}
    args = ["sweep", "--dryrun", *backend, "--param", "x=1,2,3", "--max-parallel", "2"]
    args += ["utils.sh", "--image", "python:3.12", *_env_args(secrets), "echo {x}"]
    for fmt in ([], ["--json"]):
        proc = inprocess_cli(*args[:2], *fmt, *args[2:], check=True)
        assert _leaks(proc.stdout + proc.stderr, secrets) == [], f"sweep --dryrun {fmt} leaks"
        assert "visible-value" in proc.stdout and "********" in proc.stdout
