"""A small serving example with vLLM-shaped endpoints, for the server debug flag ``GRAPHCHECK=1``.

Serves graphcheck's reference model (:mod:`graphcheck.reference`) on the CPU twin of a
CUDA-graph engine (engine.py): completions replay the captured graph. Endpoints:

==========================  ==============================================================
``GET /health``             200 once the model is loaded
``GET /v1/models``          the one model
``POST /capture``           warm up and capture the graph (completions capture on first use)
``POST /v1/completions``    ``{"prompt": str, "max_tokens": 1..64}``: greedy bytes, by replay
``POST /sleep?level=1|2``   vLLM's sleep levels (weights arena)
``POST /wake_up[?tags=..]`` wake the weights
``GET /is_sleeping``        ``{"is_sleeping": bool}``
``POST /reload_weights``    ``{"mode": "in_place"|"rebind", "seed": int}`` (JSON or query)
``GET /graphcheck/report``  with ``GRAPHCHECK=1``: the last check point (``?seq=N``,
                            ``?format=text``); ``GET /graphcheck/reports``: all of them
==========================  ==============================================================

Bad requests get a 400 naming the field, requests that do not fit the engine's state a 409,
and with ``GRAPHCHECK_MODE=error`` a check point with findings fails the request that
triggered it (500 with the text report), never the server. Run::

    GRAPHCHECK=1 GRAPHCHECK_DIR=/tmp/gc python examples/server/server.py --variant legacy

Needs starlette and uvicorn (examples/server/requirements.txt; tested with the versions pinned
in scripts/versions.env).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

import graphcheck
from engine import RELOAD_MODES, EngineStateError, ReferenceEngine, install_graphcheck

log = logging.getLogger("graphcheck.example_server")

Handler = Callable[[Request], Awaitable[Response]]


class BadRequest(ValueError):
    """A request the server cannot read: HTTP 400 with this message."""


def error(status: int, message: str, kind: str, **extra: Any) -> JSONResponse:
    """An OpenAI/vLLM-style error body: ``{"error": {"message", "type", "code", ...}}``."""
    body = {"message": message, "type": kind, "code": status, **extra}
    return JSONResponse({"error": body}, status)


def checkpoint_summary(result: Any) -> dict[str, Any] | None:
    """What a response says about the check point its request triggered."""
    if result is None:
        return None
    return {
        "seq": result.seq,
        "label": result.label,
        "ok": result.ok,
        "findings": result.counts,
        "report": f"/graphcheck/report?seq={result.seq}",
    }


def guarded(handler: Callable[[Request, ReferenceEngine], Awaitable[dict[str, Any]]]) -> Handler:
    """Runs an endpoint: its dict as JSON, errors as clear HTTP errors, check points attached."""

    async def endpoint(request: Request) -> Response:
        engine: ReferenceEngine = request.app.state.engine
        watch = graphcheck.current_watch()
        before = watch.last.seq if watch is not None and watch.last is not None else 0
        try:
            body = await handler(request, engine)
        except BadRequest as exc:
            return error(400, str(exc), "BadRequestError")
        except EngineStateError as exc:
            return error(409, str(exc), "ConflictError")
        except graphcheck.FindingsError as exc:
            result = exc.result
            return error(
                500,
                result.summary_line(),
                "GraphcheckFindings",
                checkpoint=checkpoint_summary(result),
                text=result.text(),
            )
        watch = graphcheck.current_watch()
        last = watch.last if watch is not None else None
        if last is not None and last.seq > before:
            body["graphcheck"] = checkpoint_summary(last)
        return JSONResponse(body)

    return endpoint


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be a JSON object, got {type(body).__name__}")
    return body


def _int(value: Any, name: str, low: int, high: int, default: int | None = None) -> int:
    if value is None:
        if default is None:
            raise BadRequest(f"{name}: required (an integer in {low}..{high})")
        return default
    number = None
    if not isinstance(value, (bool, float)):
        with contextlib.suppress(TypeError, ValueError):
            number = int(value)
    if number is None or not low <= number <= high:
        raise BadRequest(f"{name}: expected an integer in {low}..{high}, got {value!r}")
    return number


async def health(request: Request) -> Response:
    """``GET /health``: 200 once the model is loaded."""
    return JSONResponse({"status": "ok", "variant": request.app.state.engine.variant})


async def models(request: Request) -> Response:
    """``GET /v1/models``: the one model, named after its variant."""
    engine: ReferenceEngine = request.app.state.engine
    name = f"graphcheck-reference-{engine.variant}"
    return JSONResponse({"object": "list", "data": [{"id": name, "object": "model"}]})


async def capture(request: Request, engine: ReferenceEngine) -> dict[str, Any]:
    """``POST /capture``: warm up and capture the graph (the ``capture`` check point)."""
    engine.compile_or_warm_up_model()
    return {"captured": True, "ops": engine.graph.node_count}


async def completions(request: Request, engine: ReferenceEngine) -> dict[str, Any]:
    """``POST /v1/completions``: greedy bytes by graph replay, and whether replay = eager."""
    body = await _json_body(request)
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise BadRequest(f"prompt: expected a non-empty string, got {prompt!r}")
    max_tokens = _int(body.get("max_tokens"), "max_tokens", 1, 64, default=16)
    text, matches = engine.generate(prompt.encode("utf-8"), max_tokens)
    return {
        "id": f"cmpl-{time.monotonic_ns()}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": f"graphcheck-reference-{engine.variant}",
        "choices": [
            {"index": 0, "text": text.decode("utf-8", "replace"), "finish_reason": "length"}
        ],
        "usage": {"prompt_tokens": len(prompt.encode("utf-8")), "completion_tokens": max_tokens},
        "graph": {"replayed": True, "matches_eager": matches},
    }


async def sleep(request: Request, engine: ReferenceEngine) -> dict[str, Any]:
    """``POST /sleep?level=1|2``."""
    level = _int(request.query_params.get("level"), "level", 1, 2, default=1)
    engine.sleep(level)
    return {"is_sleeping": True, "level": level}


async def wake_up(request: Request, engine: ReferenceEngine) -> dict[str, Any]:
    """``POST /wake_up[?tags=weights]``: the ``after_wake`` check point."""
    tags = request.query_params.getlist("tags") or None
    engine.wake_up(tags)
    return {"is_sleeping": False}


async def is_sleeping(request: Request) -> Response:
    """``GET /is_sleeping``."""
    return JSONResponse({"is_sleeping": request.app.state.engine.is_sleeping})


async def reload_weights(request: Request, engine: ReferenceEngine) -> dict[str, Any]:
    """``POST /reload_weights``: ``mode`` and ``seed`` from the JSON body or the query."""
    body = {**request.query_params, **await _json_body(request)}
    mode = body.get("mode", "in_place")
    if mode not in RELOAD_MODES:
        raise BadRequest(f"mode: expected one of {', '.join(RELOAD_MODES)}, got {mode!r}")
    seed = _int(body.get("seed"), "seed", 0, 2**31 - 1, default=engine.seed)
    engine.reload_weights(mode=mode, seed=seed)
    return {"reloaded": True, "mode": mode, "seed": seed}


async def report(request: Request) -> Response:
    """``GET /graphcheck/report``: the last check point, or ``?seq=N``; ``?format=text``."""
    watch = graphcheck.current_watch()
    if watch is None:
        return error(404, "graphcheck is off: start the server with GRAPHCHECK=1", "NotFoundError")
    results = watch.results
    seq = request.query_params.get("seq")
    if seq is not None:
        number = _seq(seq)
        if number is None:
            return error(400, f"seq: expected a positive integer, got {seq!r}", "BadRequestError")
        results = [r for r in results if r.seq == number]
    if not results:
        return error(404, "no such check point yet (POST /capture first)", "NotFoundError")
    result = results[-1]
    fmt = request.query_params.get("format", "json")
    if fmt == "text":
        return PlainTextResponse(result.text() + "\n")
    if fmt != "json":
        return error(400, f"format: expected json or text, got {fmt!r}", "BadRequestError")
    return JSONResponse(
        {**result.to_dict(), "origin": watch.origin, "report": json.loads(result.report.to_json())}
    )


def _seq(text: str) -> int | None:
    return int(text) if text.isdigit() and int(text) > 0 else None


async def reports(request: Request) -> Response:
    """``GET /graphcheck/reports``: every check point, without the reports themselves."""
    watch = graphcheck.current_watch()
    if watch is None:
        return error(404, "graphcheck is off: start the server with GRAPHCHECK=1", "NotFoundError")
    checkpoints = [r.to_dict() for r in watch.results]
    return JSONResponse({"origin": watch.origin, "checkpoints": checkpoints})


def create_app(engine: ReferenceEngine) -> Starlette:
    """The Starlette app serving ``engine`` (loaded by the caller)."""
    app = Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/capture", guarded(capture), methods=["POST"]),
            Route("/v1/completions", guarded(completions), methods=["POST"]),
            Route("/sleep", guarded(sleep), methods=["POST"]),
            Route("/wake_up", guarded(wake_up), methods=["POST"]),
            Route("/is_sleeping", is_sleeping, methods=["GET"]),
            Route("/reload_weights", guarded(reload_weights), methods=["POST"]),
            Route("/graphcheck/report", report, methods=["GET"]),
            Route("/graphcheck/reports", reports, methods=["GET"]),
        ]
    )
    app.state.engine = engine
    return app


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, load the model, serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--variant", choices=("legacy", "registered"), default="registered")
    parser.add_argument("--tokens", type=int, default=8, help="the graph's static input length")
    parser.add_argument("--seed", type=int, default=0, help="the checkpoint loaded at start")
    parser.add_argument("--capture-on-start", action="store_true", help="capture as vLLM does")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    setup = install_graphcheck()
    if setup is not None:
        log.info("graphcheck on (watch started by %s)", setup.origin)
    engine = ReferenceEngine(args.variant, tokens=args.tokens, seed=args.seed)
    engine.load_model()
    if args.capture_on_start:
        engine.compile_or_warm_up_model()
    uvicorn.run(create_app(engine), host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
