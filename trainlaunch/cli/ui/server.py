"""The web page's server (Starlette): JSON endpoints that are exactly the board's documents
(cli/board/), charts drawn from the same documents as SVG (svg.py), and the page itself.
Read-only: nothing here stops, submits or writes anything.

Every Runner and board call runs in a worker thread (the event loop never waits on a backend
or a file); each request opens its own Runner (cheap: backends open lazily). Errors become
JSON ``{"error", "hint"}`` with the status their kind calls for: 400 usage, 404 no such app
or sweep, 502 a backend failed, 500 a bug.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from trainlaunch.cli.board import apps as board_apps
from trainlaunch.cli.board import sweep as board_sweep
from trainlaunch.cli.board.rates import RateBook
from trainlaunch.cli.ui import charts
from trainlaunch.cli.ui.gate import TokenGate
from trainlaunch.errors import AppNotFound, TrainlaunchError, UsageError
from trainlaunch.metrics.reader import json_safe

STATIC = Path(__file__).parent / "static"
MAX_LINES = 2000  # of the log tail one request may ask for
RunnerFactory = Callable[[], AbstractContextManager[Any]]


class Json(JSONResponse):
    """JSON with non-finite numbers spelled as the metrics files spell them."""

    def render(self, content: Any) -> bytes:
        return super().render(json_safe(content))


def create_app(token: str, backends: Sequence[str], runner_factory: RunnerFactory) -> Any:
    """The ASGI app: the page and its endpoints behind the token gate (gate.py)."""
    rates = RateBook()  # steps/s and CPU % from one refresh to the next, shared by all pages

    async def board(call: Callable[[Any], Any]) -> Response:
        """call(runner) in a worker thread, its document as JSON (errors as JSON too)."""
        return await _answer(lambda: _with_runner(runner_factory, call), Json)

    async def overview(request: Request) -> Response:
        metric = request.query_params.get("metric") or None
        return await board(lambda r: board_apps.overview(r, backends, rates, metric))

    async def one_app(request: Request) -> Response:
        from trainlaunch.cli.board.app import app_view

        handle, q = request.path_params["handle"], request.query_params
        metric = q.get("metric") or None

        def view(runner: Any) -> dict[str, Any]:
            lines = _int(q.get("lines"), 200, 1, MAX_LINES)
            ranks = _ranks(q.get("ranks"))
            # the page draws its charts apart (/charts/): series=0 spares reading whole files
            series = q.get("series") != "0"
            return app_view(runner, handle, rates, metric, lines, ranks, series)

        return await board(view)

    async def sweep_list(request: Request) -> Response:
        return await _answer(board_sweep.sweeps, Json)

    async def one_sweep(request: Request) -> Response:
        handle, metric = request.path_params["handle"], request.query_params.get("metric")
        return await board(lambda r: board_sweep.sweep_view(r, handle, metric or None))

    async def stacks(request: Request) -> Response:
        from trainlaunch.cli.board.stacks import stacks_view

        handle = request.path_params["handle"]
        native = request.query_params.get("native") == "1"
        return await board(lambda r: stacks_view(r, handle, native))

    async def chart(request: Request) -> Response:
        kind, handle = request.path_params["kind"], request.path_params["handle"]
        q = request.query_params
        if kind not in charts.KINDS:
            raise HTTPException(404, f"no chart of kind {kind!r}")

        def draw(runner: Any) -> str:
            return charts.KINDS[kind](
                runner,
                handle,
                log=q.get("log") == "1",
                metric=q.get("metric") or None,
                ranks=_ranks(q.get("ranks")),
                param=q.get("param") or None,
                which=q.get("which") or None,
            )

        return await _answer(lambda: _with_runner(runner_factory, draw), _svg)

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    routes = [
        Route("/", index),
        Route("/api/apps", overview),
        Route("/api/apps/{handle:path}", one_app),
        Route("/api/sweeps", sweep_list),
        Route("/api/sweeps/{handle:path}", one_sweep),
        Route("/api/stacks/{handle:path}", stacks),
        Route("/charts/{kind}/{handle:path}", chart),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    return TokenGate(app, token)


def _with_runner(runner_factory: RunnerFactory, call: Callable[[Any], Any]) -> Any:
    with runner_factory() as runner:
        return call(runner)


async def _answer(work: Callable[[], Any], respond: Callable[..., Response]) -> Response:
    """work() in a worker thread; its result through respond, or the error as JSON."""
    try:
        return respond(await run_in_threadpool(work))
    except AppNotFound as e:
        return _error(404, e.message, e.hint)
    except UsageError as e:
        return _error(400, e.message, e.hint)
    except TrainlaunchError as e:  # a backend that cannot answer now
        return _error(502, e.message, e.hint)
    except Exception as e:  # noqa: BLE001 - the server's boundary: one line, the page goes on
        sys.stderr.write(f"trainlaunch ui: internal error: {type(e).__name__}: {e}\n")
        return _error(500, f"internal error: {type(e).__name__}: {e}", "rerun with --debug")


def _svg(text: str) -> Response:
    return Response(text, media_type="image/svg+xml")


def _error(status: int, message: str, hint: str | None = None) -> Response:
    return Json({"error": message, "hint": hint}, status_code=status)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else str(exc)
    return _error(status, detail)


def _int(text: str | None, default: int, lo: int, hi: int) -> int:
    try:
        return min(hi, max(lo, int(text))) if text else default
    except ValueError:
        raise UsageError(f"not a number: {text!r}") from None


def _ranks(text: str | None) -> frozenset[int] | None:
    """``0,2-3`` as ``--rank`` spells it (None: every rank)."""
    if not text:
        return None
    from trainlaunch.stacks.values import parse_rank_list

    try:
        return frozenset(parse_rank_list(text))
    except ValueError as e:
        raise UsageError(f"ranks: {e}", hint="e.g. ranks=1 or ranks=0,2-3") from None


__all__ = ["create_app"]
