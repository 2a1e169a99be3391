"""The control API under ``/_toolnexus/``: JSON in, JSON out (docs/serve.md).

``GET cassettes`` lists what is served with each one's state; ``GET report?cassette=NAME``
gives what a cassette played, left unused and missed; ``POST reset``, ``POST load`` and
``POST faults`` change it. A request the API cannot act on is answered 400 (or 404 for a
cassette or an endpoint that does not exist) with ``{"error": "..."}`` saying why.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from pytest_toolnexus._seam.errors import CassetteError

from .catalog import Catalog, ServedCassette
from .fault_spec import FaultSpecError, faults_from

__all__ = ["PREFIX", "control", "report_of"]

PREFIX: Final = "/_toolnexus/"

Endpoint = Callable[[Catalog, web.Request], Awaitable[web.Response]]


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _state(served: ServedCassette) -> dict[str, Any]:
    session = served.session
    return {
        "name": served.name,
        "path": str(served.path),
        "interactions": len(session.interactions),
        "played": session.play_count,
        "unused": [f"#{i} {r.method} {r.url}" for i, r in session.unused()],
        "misses": len(served.misses),
    }


def _report(served: ServedCassette) -> dict[str, Any]:
    session = served.session
    return {
        **_state(served),
        "misses": list(served.misses),
        "faults": [repr(fault) for fault in served.faults],
        "requests": [
            {
                "method": sent.method,
                "url": sent.url,
                "status": sent.status,
                "replayed": sent.replayed,
                "interaction": sent.interaction,
                "faults": list(sent.faults),
            }
            for sent in list(session.requests)
        ],
        # What WebSocket clients left of the sessions they opened: client frames never sent,
        # server frames never read (as pytest reports them at teardown).
        "websocket_leftovers": list(served.websocket_leftovers),
    }


async def _body(request: web.Request) -> dict[str, Any]:
    text = await request.text()
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise _Refused(400, f"the body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise _Refused(400, "the body must be a JSON object")
    return value


def _named(catalog: Catalog, name: object) -> ServedCassette:
    if not isinstance(name, str):
        raise _Refused(400, 'name the cassette: {"cassette": "<name>"} (?cassette=<name>)')
    served = catalog.get(name)
    if served is None:
        raise _Refused(
            404, f"no cassette {name!r} is served; served: {', '.join(catalog.names()) or 'none'}"
        )
    return served


async def _cassettes(catalog: Catalog, request: web.Request) -> web.Response:
    return web.json_response({"cassettes": [_state(s) for s in catalog.all()]})


def report_of(catalog: Catalog) -> dict[str, Any]:
    """Every served cassette's report, and the requests that named none."""
    return {"cassettes": [_report(s) for s in catalog.all()], "unrouted": list(catalog.unrouted)}


async def _report_of(catalog: Catalog, request: web.Request) -> web.Response:
    name = request.query.get("cassette")
    if name is None:
        return web.json_response(report_of(catalog))
    return web.json_response(_report(_named(catalog, name)))


async def _reset(catalog: Catalog, request: web.Request) -> web.Response:
    body = await _body(request)
    chosen = [_named(catalog, body["cassette"])] if "cassette" in body else catalog.all()
    for served in chosen:
        served.reset()
    if "cassette" not in body:
        catalog.unrouted.clear()
    return web.json_response({"reset": [s.name for s in chosen]})


async def _load(catalog: Catalog, request: web.Request) -> web.Response:
    paths = (await _body(request)).get("paths")
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        raise _Refused(400, '"paths" must be a non-empty list of cassette files or folders')
    try:
        loaded = catalog.load(Path(p) for p in paths)
    except CassetteError as exc:
        raise _Refused(400, str(exc)) from None
    return web.json_response({"loaded": loaded})


async def _faults(catalog: Catalog, request: web.Request) -> web.Response:
    body = await _body(request)
    served = _named(catalog, body.get("cassette"))
    try:
        made = faults_from(body.get("faults"))
    except FaultSpecError as exc:
        raise _Refused(400, str(exc)) from None
    served.inject(made)
    return web.json_response({"cassette": served.name, "faults": [repr(f) for f in made]})


async def _health(catalog: Catalog, request: web.Request) -> web.Response:
    return web.json_response({"ok": True, "cassettes": len(catalog.names())})


ENDPOINTS: Final[dict[tuple[str, str], Endpoint]] = {
    ("GET", "health"): _health,
    ("GET", "cassettes"): _cassettes,
    ("GET", "report"): _report_of,
    ("POST", "reset"): _reset,
    ("POST", "load"): _load,
    ("POST", "faults"): _faults,
}


async def control(catalog: Catalog, request: web.Request) -> web.Response:
    """Answer one control request."""
    endpoint = ENDPOINTS.get((request.method, request.path[len(PREFIX) :].strip("/")))
    try:
        if endpoint is None:
            known = ", ".join(f"{m} {PREFIX}{p}" for m, p in ENDPOINTS)
            raise _Refused(
                404, f"{request.method} {request.path} is not a control endpoint: {known}"
            )
        return await endpoint(catalog, request)
    except _Refused as refused:
        return web.json_response({"error": str(refused)}, status=refused.status)
