"""Provider views: one shape for what a model answered, whichever provider answered it.

A view reads a recorded (or built) interaction of any dialect the provider layer knows
(:mod:`pytest_toolnexus._providers`: OpenAI chat completions and Responses, Anthropic Messages,
Gemini, Ollama, Amazon Bedrock Converse, and the realtime WebSocket sessions of OpenAI Realtime
and Gemini Live), streamed or not, and gives the text, the tool calls with their ``arguments``
as a JSON string, the finish reason, the usage, the model, and the text deltas with the time
each arrived. This module turns a stored body into the pieces a
dialect reads; the dialect reads them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pytest_toolnexus._providers import (
    EXCEPTION_PREFIX,
    REALTIME,
    Dialect,
    Name,
    Piece,
    ProviderView,
    ToolCallView,
    Usage,
    ViewError,
    WireRequest,
    read,
    shown,
)
from pytest_toolnexus._providers import provider_of as _dialect_of
from pytest_toolnexus._store.cassette import (
    EventStreamBody,
    Interaction,
    JsonBody,
    MalformedCassette,
    NdjsonBody,
    SseBody,
    TextBody,
    WebSocketBody,
)
from pytest_toolnexus._store.ws_frames import frames_of

__all__ = [
    "Provider",
    "ProviderView",
    "ToolCallView",
    "Usage",
    "ViewError",
    "dialect_of",
    "provider_of",
    "stream_errors",
    "view",
]

Provider = Name


def provider_of(url: str) -> Provider | None:
    """The provider whose API a URL belongs to, from its path; None when none matches."""
    dialect = _dialect_of("POST", url) or _dialect_of("GET", url)
    return None if dialect is None else dialect.name


def dialect_of(interaction: Interaction) -> Dialect | None:
    """The dialect of an interaction's request, from its method, URL and headers; None when
    the answer is not of the dialect's kind (a WebSocket session for an HTTP dialect's path,
    or an HTTP answer to a path only a realtime dialect claims, such as a status page's
    ``GET /realtime``)."""
    request = interaction.request
    dialect = _dialect_of(request.method, request.url, request.headers)
    response = interaction.response
    session = response is not None and isinstance(response.body, WebSocketBody)
    if dialect is not None and response is not None and session != (dialect in REALTIME):
        return None
    return dialect


def view(interaction: Interaction) -> ProviderView:
    """The provider view of one interaction. Raises :class:`ViewError` when it has no
    successful answer of a known provider, or the answer does not parse."""
    response = interaction.response
    if response is None:
        raise ViewError("the interaction ended in a transport error, with no answer to read")
    session = isinstance(response.body, WebSocketBody)
    if not (200 <= response.status < 300 or session):
        raise ViewError(f"the answer is an HTTP {response.status}, not a model's answer")
    dialect = dialect_of(interaction)
    if dialect is None:
        kind = "WebSocket session" if session else "answer"
        raise ViewError(
            f"no provider view reads the {kind} to "
            f"{interaction.request.method} {interaction.request.url}"
        )
    request = interaction.request
    return read(dialect, _pieces(response.body), WireRequest(request.method, request.url))


def stream_errors(interaction: Interaction) -> list[str]:
    """What each piece of a 2xx answer that reports an error says (an ``event: error`` in a
    stream, a Responses ``response.failed``); empty for an answer with none, or one that is
    not a known dialect's."""
    response = interaction.response
    dialect = dialect_of(interaction)
    if response is None or dialect is None or not _answered(response.status, response.body):
        return []
    found = []
    try:
        for _, name, payload in _pieces(response.body):
            problem = dialect.stream_error(name, payload)
            if problem is not None:
                found.append(problem)
    except (ViewError, MalformedCassette, TypeError, ValueError, KeyError, AttributeError):
        return found  # what does not parse is the view's to report
    return found


def _answered(status: int, body: object) -> bool:
    """Whether an answer is one a view reads: a 2xx, or a WebSocket session's 101."""
    return 200 <= status < 300 or isinstance(body, WebSocketBody)


def _pieces(body: object) -> Iterator[Piece]:
    """``(t in seconds or None, event name, payload)`` for every piece of a body; for a
    WebSocket session, every frame but a close, named by its sender."""
    if isinstance(body, WebSocketBody):
        for sent in frames_of(body.frames):
            if sent.kind == "close":
                continue
            payload = sent.value
            if payload is None and isinstance(sent.message, str):
                payload = _maybe_json(sent.message)
            elif payload is None and isinstance(sent.message, bytes):
                payload = _json_bytes(sent.message)
            yield sent.t / 1000, sent.sender, payload
    elif isinstance(body, SseBody):
        for event in body.events:
            if "data" in event:
                payload = event["data"]
            elif "text" in event:
                text = event["text"]
                if str(text).strip() == "[DONE]":
                    continue
                payload = _maybe_json(text)
            else:
                continue
            yield _seconds(event.get("t")), event.get("event"), payload
    elif isinstance(body, NdjsonBody):
        for line in body.lines:
            payload = line["value"] if "value" in line else _maybe_json(line.get("text", ""))
            yield _seconds(line.get("t")), None, payload
    elif isinstance(body, EventStreamBody):
        for frame in body.frames:
            headers = {str(h[0]): h[-1] for h in frame.get("headers", []) if len(h) == 3}
            name = headers.get(":event-type")
            if headers.get(":message-type") in ("exception", "error"):
                kind = headers.get(":exception-type", headers.get(":error-code"))
                name = f"{EXCEPTION_PREFIX}{kind}"
            payload = frame["payload"] if "payload" in frame else _maybe_json(frame.get("text", ""))
            yield _seconds(frame.get("t")), name, payload
    elif isinstance(body, JsonBody):
        value = body.value
        # Gemini streams without alt=sse as one JSON array of responses, each element with
        # its arrival time when it came element by element.
        if isinstance(value, list):
            times = body.times or [None] * len(value)
            for t, item in zip(times, value, strict=True):
                yield None if t is None else t / 1000, None, item
        else:
            yield None, None, value
    elif isinstance(body, TextBody):
        yield None, None, _maybe_json(body.text)
    else:
        raise ViewError(f"a {type(body).__name__} holds no model answer")


def _seconds(t: object) -> float:
    if t is None:
        return 0.0
    if isinstance(t, bool) or not isinstance(t, int | float):
        raise ViewError(f"a piece is stamped {shown(t, 40)}, not a time in ms")
    return float(t) / 1000


def _json_bytes(data: bytes) -> Any:
    """A binary frame's JSON (the Gemini API sends its Live messages so), or its bytes."""
    if data.lstrip()[:1] not in (b"{", b"["):
        return data
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return data


def _maybe_json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text
