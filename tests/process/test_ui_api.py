"""`trainlaunch ui`'s server through HTTP: a real `python -m trainlaunch ui` on 127.0.0.1 against
real local apps. Its JSON endpoints are the board's documents (the ones `status --json` and
`describe --json` print); every request needs the token; the CLI's errors are one line each."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import CLI, InProcessCLI
from tests.process.ui_helpers import enc, finished_sweep, start_ranks_app, ui_server

NOPE = "local://trainlaunch/nope-1"


def test_every_request_needs_the_token(cli: CLI) -> None:
    with ui_server(cli) as ui:
        for path in ("/", "/api/apps", "/api/sweeps", "/static/app.js", "/charts/app/x"):
            refused = httpx.get(ui.base + path)
            assert refused.status_code == 403, path
            assert "token" in refused.json()["error"]
            assert "default-src 'self'" in refused.headers["content-security-policy"]
        wrong = ("y" if ui.token[0] == "x" else "x") + ui.token[1:]  # never the token itself
        assert httpx.get(f"{ui.base}/api/apps?token={wrong}").status_code == 403
        bearer = {"Authorization": f"Bearer {wrong}"}
        assert httpx.get(f"{ui.base}/api/apps", headers=bearer).status_code == 403
        port = ui.base.rsplit(":", 1)[1]
        cookies = {f"trainlaunch-ui-{port}": wrong}
        assert httpx.get(f"{ui.base}/api/apps", cookies=cookies).status_code == 403

        # the printed URL: the token becomes a cookie and leaves the address at once
        first = httpx.get(ui.url)
        assert first.status_code == 303 and first.headers["location"] == "/"
        cookie = first.headers["set-cookie"]
        assert cookie.startswith(f"trainlaunch-ui-{port}={ui.token};")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        with httpx.Client(base_url=ui.base, cookies=first.cookies) as browser:
            page = browser.get("/")
            assert page.status_code == 200 and "/static/app.js" in page.text
            csp = page.headers["content-security-policy"]
            assert "default-src 'self'" in csp and "script-src 'self'" in csp
            assert page.headers["x-content-type-options"] == "nosniff"
            assert page.headers["referrer-policy"] == "no-referrer"
            assert browser.get("/static/app.js").status_code == 200
            assert browser.get("/api/apps").json()["apps"] == []
        assert httpx.get(ui.base + "/api/sweeps", headers=ui.auth()).json() == []
    assert "serving the apps of local" in ui.stderr


def test_what_is_not_there_is_a_json_error(cli: CLI) -> None:
    with ui_server(cli) as ui, httpx.Client(base_url=ui.base, headers=ui.auth()) as http:
        missing = http.get(f"/api/apps/{enc(NOPE)}")
        assert missing.status_code == 404
        assert "nope-1" in missing.json()["error"] and missing.json()["hint"]
        assert http.get(f"/api/apps/{NOPE}").status_code == 404  # unquoted works too
        assert (
            http.get("/api/sweeps/" + enc("local://trainlaunch/sweep:abcdefghij")).status_code
            == 404
        )
        bad = http.get("/api/apps/" + enc("local:/x"))
        assert bad.status_code == 400 and "handle" in bad.json()["error"]
        assert http.get(f"/api/apps/{enc(NOPE)}?ranks=x-y").status_code == 400
        assert http.get(f"/api/stacks/{enc(NOPE)}").status_code == 404
        assert http.get(f"/charts/app/{enc(NOPE)}").status_code == 404
        assert http.get(f"/charts/pie/{enc(NOPE)}").status_code == 404
        nowhere = http.get("/api/nothing-here")
        assert nowhere.status_code == 404 and nowhere.json()["error"]
        assert "content-security-policy" in nowhere.headers


@pytest.mark.slow  # ~15 s: a 2-rank app, a 2-point sweep, then every endpoint
def test_the_endpoints_are_the_boards_documents(cli: CLI, tmp_path: Path) -> None:
    go = tmp_path / "go"
    handle = start_ranks_app(cli, go)
    sweep = finished_sweep(cli)
    with (
        ui_server(cli) as ui,
        httpx.Client(base_url=ui.base, headers=ui.auth(), timeout=60) as http,
    ):
        rows = {r["handle"]: r for r in http.get("/api/apps").json()["apps"]}
        assert rows[handle]["state"] == "RUNNING" and rows[handle]["world"] == 2
        assert rows[handle]["step"] == 29 and rows[handle]["ranks_alive"] == 2
        sweep_doc = http.get(f"/api/sweeps/{enc(sweep)}").json()
        points = [p["handle"] for p in sweep_doc["points"]]
        assert all(rows[p]["state"] == "SUCCEEDED" for p in points)

        view = http.get(f"/api/apps/{enc(handle)}?ranks=1&lines=50")
        assert view.status_code == 200
        assert "hush-hush" not in view.text  # describe's secrets stay masked
        doc = view.json()
        assert [r["rank"] for r in doc["ranks"]] == [0, 1]
        assert doc["metrics"]["names"] == ["loss", "lr"] and doc["metrics"]["metric"] == "loss"
        assert sorted(doc["metrics"]["series"]) == ["0", "1"]
        assert len(doc["metrics"]["series"]["0"]) == 30
        assert doc["logs"] and all(line["ranks"] == [1] for line in doc["logs"])
        assert len(doc["logs"]) == 30  # rank 1's 30 lines (50 asked for)
        lean = http.get(f"/api/apps/{enc(handle)}?series=0").json()["metrics"]
        assert lean["series"] == {} and lean["names"] == ["loss", "lr"]
        env = doc["describe"]["app"]["roles"][0]["env"]
        assert env["WANDB_API_KEY"] == "********"

        chart = http.get(f"/charts/app/{enc(handle)}?metric=loss&log=1")
        assert chart.headers["content-type"].startswith("image/svg+xml")
        assert chart.text.count('class="series"') == 2 and "loss (log)" in chart.text

        stacks = http.get(f"/api/stacks/{enc(handle)}").json()
        assert sorted(r["rank"] for r in stacks["ranks"]) == [0, 1]
        assert "ranks.py" in stacks["text"]

        assert [s["handle"] for s in http.get("/api/sweeps").json()] == [sweep]
        assert sweep_doc["params"] == ["lr"] and len(sweep_doc["points"]) == 2
        assert sweep_doc["points"][0]["last"]["loss"] < sweep_doc["points"][1]["last"]["loss"]
        overlay = http.get(f"/charts/sweep/{enc(sweep)}?metric=loss").text
        assert overlay.count('class="series"') == 2 and "lr=0.3 seed=1" in overlay
        scatter = http.get(f"/charts/scatter/{enc(sweep)}?metric=loss&param=lr&which=best").text
        assert scatter.count('class="point"') == 2 and "loss (best) against lr" in scatter

        # an ended app: its documents are exactly what `status --json` / `describe --json` say
        cli("stop", handle, check=True)
        cli.wait(handle)
        ended = http.get(f"/api/apps/{enc(handle)}").json()
        assert ended["status"] == cli.status(handle)
        described = json.loads(cli("describe", "--json", handle, check=True).stdout)
        assert ended["describe"] == described
        gone = http.get(f"/api/stacks/{enc(handle)}")
        assert gone.status_code == 400 and "has ended" in gone.json()["error"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"), reason="needs root")
def test_another_local_user_cannot_read_the_page(cli: CLI, tmp_path: Path) -> None:
    code = (
        "import sys, urllib.request, urllib.error\n"
        "try:\n"
        "    urllib.request.urlopen(sys.argv[1] + '/api/apps')\n"
        "    print(200)\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.code)\n"
    )
    with ui_server(cli) as ui:
        other = subprocess.run(
            ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", code, ui.base],
            capture_output=True, text=True, timeout=30, cwd="/",
        )  # fmt: skip
        assert other.stdout.strip() == "403", other.stderr
        # the token is on no command line and in no file the server could have written
        cmdline = Path(f"/proc/{ui.proc.pid}/cmdline").read_bytes()
        assert ui.token.encode() not in cmdline
        for path in tmp_path.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert ui.token.encode() not in path.read_bytes(), path


def test_other_interfaces_keep_the_token_and_warn(cli: CLI) -> None:
    with ui_server(cli, "--host", "0.0.0.0") as ui:
        assert ui.url.startswith("http://127.0.0.1:")
        assert httpx.get(ui.base + "/api/apps").status_code == 403
        assert httpx.get(ui.base + "/api/apps", headers=ui.auth()).status_code == 200
    assert "warning: listening on 0.0.0.0" in ui.stderr


def test_a_port_in_use_and_a_bad_host_are_one_line_errors(inprocess_cli: InProcessCLI) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        busy = inprocess_cli("ui", "--port", str(port))
    assert busy.returncode == 2 and busy.stdout == ""
    assert busy.stderr.splitlines()[0] == f"error: port {port} on 127.0.0.1 is in use"
    assert "--port 0" in busy.stderr
    bad = inprocess_cli("ui", "--host", "no-such-host.invalid")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --host 'no-such-host.invalid'")
    assert inprocess_cli("ui", "--port", "70000").returncode == 2


def _python(code: str, cli: CLI) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli.env, timeout=60
    )


def test_without_the_extra_it_says_how_to_install_it(cli: CLI) -> None:
    code = (
        "import sys\n"
        "sys.modules['uvicorn'] = None  # as if trainlaunch[ui] were not installed\n"
        "from trainlaunch.cli.boundary import main\n"
        "main(['ui'])\n"
    )
    out = _python(code, cli)
    assert out.returncode == 2, out.stderr
    first, hint = out.stderr.splitlines()[:2]
    assert first == "error: `trainlaunch ui` needs uvicorn (the optional extra trainlaunch[ui])"
    assert hint.startswith("hint: ") and "[ui]" in hint and "install" in hint


def test_help_imports_no_server_and_no_torch(cli: CLI) -> None:
    code = (
        "import sys\n"
        "from trainlaunch.cli.boundary import main\n"
        "try:\n"
        "    main(['ui', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('starlette', 'uvicorn', 'torch', 'numpy', 'anyio')\n"
        "print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = _python(code, cli)
    assert "trainlaunch ui --port 0" in out.stdout and "--host" in out.stdout
    assert out.stdout.splitlines()[-1] == "LOADED []", out.stdout
