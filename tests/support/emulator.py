"""Loopback LLM-provider emulator for tests.

A real HTTP/1.1 server (standard library only) bound to ``127.0.0.1`` on an ephemeral
port, run in a background thread by the test that uses it.  It speaks enough of the
OpenAI (Chat Completions and Responses), Anthropic (Messages), Ollama (``/api/chat``), Gemini
and Amazon Bedrock Converse (:mod:`tests.support.bedrock`) wire formats for the unmodified
official Python SDKs to work against it::

    with Emulator() as emu:
        client = openai.OpenAI(api_key="k", base_url=emu.base_url + "/v1", max_retries=0)
        client.chat.completions.create(model="m", messages=[...])
        emu.requests[0].body        # parsed JSON the SDK sent
        emu.responses[0].offsets    # when each body event was flushed, per request

Everything in a reply is a pure function of the request (conversation and tools) and of
the emulator configuration: ids are hashes of the request, ``created`` timestamps are
fixed, reply text is taken from :data:`WORDS`, and no ``Date`` header is sent.

Timing model.  Times are real: :func:`tests.support.realtime.wall` readings (the kernel's
monotonic clock, which ``time.monotonic`` reads when no virtual clock is installed), so a
virtual clock installed while the emulator serves does not reach them.  ``received_at`` is
when the request (headers and body) had been read completely.  A streamed reply sends its
headers at once, waits
``first_event_delay``, then writes its events one by one, each as its own HTTP chunk
(flushed, Nagle disabled).  Framing events (``message_start``, role chunks, ...) are
written back to back with their neighbours; before every content *delta* but the
first the server waits ``delay`` seconds.  A non-streamed reply is held back for the
same total (``first_event_delay + delay * (events - 1)``) and then sent in one write
with a ``Content-Length``.  Each written event is logged with the time just before its
write began and the time at which it returned, see :class:`ResponseRecord`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip as gzip_module
import hashlib
import http
import http.server
import json
import re
import socket
import socketserver
import sys
import threading
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast
from urllib.parse import parse_qsl, urlsplit

from tests.support.realtime import wall

__all__ = [
    "CREATED",
    "OLLAMA_CREATED_AT",
    "WORDS",
    "Emulator",
    "EmulatorConfig",
    "ReceivedRequest",
    "ResponseRecord",
    "ScriptedFailure",
    "StreamEvent",
    "error_payload",
    "reply_deltas",
]

CREATED: Final = 1_700_000_000
"""Fixed ``created`` / ``created_at`` unix timestamp of every reply."""

OLLAMA_CREATED_AT: Final = "2023-11-14T22:13:20Z"
"""Fixed Ollama ``created_at`` (the same instant as :data:`CREATED`)."""

DEFAULT_MODEL: Final = "emulator-model"

WORDS: Final[tuple[str, ...]] = (
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliett",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
)
"""The vocabulary replies are made of."""

CHAT_PATH: Final = "/v1/chat/completions"
RESPONSES_PATH: Final = "/v1/responses"
MESSAGES_PATH: Final = "/v1/messages"
OLLAMA_CHAT_PATH: Final = "/api/chat"
_ROUTES: Final = frozenset({CHAT_PATH, RESPONSES_PATH, MESSAGES_PATH, OLLAMA_CHAT_PATH})

EventKind = Literal["frame", "delta", "body"]


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class ReceivedRequest:
    """One request as the emulator received it."""

    index: int
    method: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: Any
    raw_body: bytes
    received_at: float
    """Real time (:func:`wall`) once the request line, headers and body had been read."""

    @property
    def params(self) -> list[tuple[str, str]]:
        """The query string as ``(name, value)`` pairs."""
        return parse_qsl(self.query, keep_blank_values=True)

    def header(self, name: str) -> str | None:
        """First value of header ``name`` (case-insensitive), or ``None``."""
        wanted = name.lower()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value
        return None


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One body write: an SSE event, an NDJSON line, or a whole non-streamed body."""

    name: str
    """SSE ``event:`` name, the chunk ``object`` / ``type``, ``"line"`` or ``"body"``."""
    kind: EventKind
    """``"delta"`` for content deltas, ``"frame"`` for other stream events, else ``"body"``."""
    data: bytes
    """The event exactly as framed on the wire, before any gzip encoding."""
    sent_at: float
    """Real time (:func:`wall`) right after the bytes were written and flushed."""
    started_at: float
    """Real time just before the write began: no client can have the event earlier."""


@dataclass(slots=True)
class ResponseRecord:
    """What the emulator sent back for one request, with timings."""

    request_index: int
    path: str
    received_at: float
    status: int = 0
    streamed: bool = False
    gzip: bool = False
    headers: list[tuple[str, str]] = field(default_factory=list)
    headers_sent_at: float | None = None
    events: list[StreamEvent] = field(default_factory=list)
    finished_at: float | None = None
    aborted: bool = False
    """The client went away (or the emulator stopped) before the reply was complete."""

    @property
    def event_times(self) -> list[float]:
        """Real time at which each event was written and flushed."""
        return [event.sent_at for event in self.events]

    @property
    def offsets(self) -> list[float]:
        """:attr:`event_times` relative to the request's ``received_at``."""
        return [event.sent_at - self.received_at for event in self.events]

    @property
    def delta_times(self) -> list[float]:
        """Write times of the content-delta events only."""
        return [event.sent_at for event in self.events if event.kind == "delta"]

    @property
    def delta_offsets(self) -> list[float]:
        """:attr:`delta_times` relative to the request's ``received_at``."""
        return [t - self.received_at for t in self.delta_times]

    @property
    def body(self) -> bytes:
        """The whole (uncompressed) body as framed on the wire."""
        return b"".join(event.data for event in self.events)

    def snapshot(self) -> ResponseRecord:
        """A copy that later writes by the server thread do not change."""
        return dataclasses.replace(self, headers=list(self.headers), events=list(self.events))


@dataclass(frozen=True, slots=True)
class EmulatorConfig:
    """Settings applied to a request; a snapshot is taken when the request arrives."""

    events: int = 5
    """Number of content deltas per streamed reply (and of words in a text reply)."""
    delay: float = 0.0
    """Seconds between consecutive content deltas."""
    first_event_delay: float = 0.0
    """Seconds between sending the headers and the first body event."""
    gzip: bool = False
    """Send bodies with ``Content-Encoding: gzip`` (streams are sync-flushed per event)."""

    def __post_init__(self) -> None:
        if self.events < 1:
            raise ValueError("events must be >= 1")
        if self.delay < 0 or self.first_event_delay < 0:
            raise ValueError("delays must be >= 0")


@dataclass(slots=True)
class ScriptedFailure:
    """A queued failure, see :meth:`Emulator.fail_next`."""

    status: int
    retry_after: str | None
    body: bytes | None
    content_type: str | None
    headers: list[tuple[str, str]]
    path: str | None
    remaining: int


# --------------------------------------------------------------------------- helpers


def _dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _digest(*parts: object) -> str:
    text = _dumps([*parts])
    return hashlib.sha256(text.encode()).hexdigest()


def reply_deltas(seed: int, count: int) -> list[str]:
    """The text deltas of a plain reply: ``count`` consecutive words of :data:`WORDS`.

    The first delta is a bare word and every later one is ``" " + word``.
    """
    start = seed % len(WORDS)
    words = [WORDS[(start + i) % len(WORDS)] for i in range(count)]
    return [word if i == 0 else " " + word for i, word in enumerate(words)]


def _seed_of(conversation: object) -> int:
    return int(_digest(conversation)[:8], 16)


def _split_even(text: str, count: int) -> list[str]:
    """Split ``text`` into ``count`` (or fewer, never empty) nearly equal pieces."""
    if not text:
        return [""]
    count = max(1, min(count, len(text)))
    size, extra = divmod(len(text), count)
    pieces: list[str] = []
    pos = 0
    for i in range(count):
        end = pos + size + (1 if i < extra else 0)
        pieces.append(text[pos:end])
        pos = end
    return pieces


def _count_tokens(obj: object) -> int:
    return max(1, len(re.findall(r"[A-Za-z0-9]+", _dumps(obj))))


def _text_of(content: object) -> str:
    """Flatten an OpenAI / Anthropic / Ollama message content into text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping):
                for key in ("text", "output", "content"):
                    if key in part:
                        texts.append(_text_of(part[key]))
                        break
        return "".join(texts)
    if isinstance(content, Mapping) and "text" in content:
        return _text_of(content["text"])
    return _dumps(content)


def _example_value(schema: object, key: str, seed: int) -> object:
    if not isinstance(schema, Mapping):
        return WORDS[seed % len(WORDS)]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "integer":
        return 3
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return _example_arguments(schema, seed)
    return WORDS[(seed + len(key)) % len(WORDS)]


def _example_arguments(schema: object, seed: int) -> dict[str, object]:
    """Deterministic arguments matching a JSON schema's top-level ``properties``."""
    if not isinstance(schema, Mapping):
        return {}
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {
        str(key): _example_value(prop, str(key), seed + i)
        for i, (key, prop) in enumerate(properties.items())
    }


@dataclass(frozen=True, slots=True)
class _ToolCall:
    name: str
    arguments: dict[str, object]
    digest: str

    @property
    def arguments_json(self) -> str:
        return _dumps(self.arguments)


@dataclass(frozen=True, slots=True)
class _Turn:
    """What the emulated model answers: text, or a call to a tool."""

    digest: str
    text: str
    deltas: list[str]
    tool_call: _ToolCall | None
    prompt_tokens: int

    @property
    def completion_tokens(self) -> int:
        return len(self.deltas)


def _plan_turn(
    conversation: object,
    tool: tuple[str, object] | None,
    tool_result: str | None,
    events: int,
) -> _Turn:
    digest = _digest(conversation)
    seed = _seed_of(conversation)
    prompt_tokens = _count_tokens(conversation)
    if tool_result is not None:
        text = f"The tool returned {tool_result}."
        return _Turn(digest, text, _split_even(text, events), None, prompt_tokens)
    if tool is not None:
        name, schema = tool
        call = _ToolCall(name, _example_arguments(schema, seed), digest)
        return _Turn(digest, "", _split_even(call.arguments_json, events), call, prompt_tokens)
    deltas = reply_deltas(seed, events)
    return _Turn(digest, "".join(deltas), deltas, None, prompt_tokens)


def _mapping_list(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _first_function_tool(tools: object) -> tuple[str, object] | None:
    """First ``{"type": "function", "function": {...}}`` tool (OpenAI chat / Ollama)."""
    for tool in _mapping_list(tools):
        function = tool.get("function")
        if tool.get("type", "function") == "function" and isinstance(function, Mapping):
            return str(function.get("name", "tool")), function.get("parameters")
    return None


def _event(name: str, kind: EventKind, data: str) -> tuple[str, EventKind, bytes]:
    return name, kind, data.encode()


def _sse(event_type: str | None, payload: object, kind: EventKind) -> tuple[str, EventKind, bytes]:
    data = _dumps(payload)
    if event_type is None:
        name = str(payload.get("object", "data")) if isinstance(payload, Mapping) else "data"
        return _event(name, kind, f"data: {data}\n\n")
    return _event(event_type, kind, f"event: {event_type}\ndata: {data}\n\n")


@dataclass(slots=True)
class _Plan:
    """A reply: a JSON body, or a list of stream events."""

    status: int = 200
    content_type: str = "application/json"
    body: bytes = b""
    events: list[tuple[str, EventKind, bytes]] | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    deltas: int = 1


def _json_plan(payload: object, status: int = 200, deltas: int = 1) -> _Plan:
    return _Plan(status=status, body=_dumps(payload).encode(), deltas=deltas)


# OpenAI / Anthropic error vocabularies by status.
_OPENAI_ERRORS: Final[dict[int, tuple[str, str | None]]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "not_found"),
    409: ("invalid_request_error", "conflict"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", "service_unavailable"),
}
_ANTHROPIC_ERRORS: Final[dict[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


def error_payload(path: str, status: int, message: str | None = None) -> dict[str, object]:
    """The provider-shaped JSON error body for ``path``."""
    text = message or f"{_phrase(status)} (emulated)"
    if path == MESSAGES_PATH:
        kind = _ANTHROPIC_ERRORS.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return {"type": "error", "error": {"type": kind, "message": text}}
    if path.startswith("/api/"):
        return {"error": text}
    if path.startswith("/model/"):
        return {"message": text}  # Bedrock: the error type is in x-amzn-ErrorType
    default = ("server_error", None) if status >= 500 else ("invalid_request_error", None)
    kind, code = _OPENAI_ERRORS.get(status, default)
    return {"error": {"message": text, "type": kind, "param": None, "code": code}}


# --------------------------------------------------------------------------- providers


def _chat_completion(body: Mapping[str, Any], config: EmulatorConfig) -> _Plan:
    messages = body.get("messages")
    conversation = {"messages": messages}
    tool_messages = [m for m in _mapping_list(messages) if m.get("role") == "tool"]
    result = _text_of(tool_messages[-1].get("content")) if tool_messages else None
    tool = None if result is not None else _first_function_tool(body.get("tools"))
    turn = _plan_turn(conversation, tool, result, config.events)
    model = str(body.get("model") or DEFAULT_MODEL)
    completion_id = f"chatcmpl-{turn.digest[:29]}"
    finish = "tool_calls" if turn.tool_call else "stop"
    usage = {
        "prompt_tokens": turn.prompt_tokens,
        "completion_tokens": turn.completion_tokens,
        "total_tokens": turn.prompt_tokens + turn.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    call_id = f"call_{turn.digest[32:56]}"
    base = {"id": completion_id, "created": CREATED, "model": model}

    if not body.get("stream"):
        message: dict[str, object] = {
            "role": "assistant",
            "content": turn.text if turn.tool_call is None else None,
            "refusal": None,
            "annotations": [],
        }
        if turn.tool_call is not None:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": turn.tool_call.name,
                        "arguments": turn.tool_call.arguments_json,
                    },
                }
            ]
        payload = {
            **base,
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": usage,
            "service_tier": "default",
            "system_fingerprint": "fp_emulator",
        }
        return _json_plan(payload, deltas=len(turn.deltas))

    options = body.get("stream_options")
    include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))

    def chunk(delta: Mapping[str, object], finish_reason: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            **base,
            "object": "chat.completion.chunk",
            "service_tier": "default",
            "system_fingerprint": "fp_emulator",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if include_usage:
            out["usage"] = None
        return out

    events: list[tuple[str, EventKind, bytes]] = []
    if turn.tool_call is None:
        events.append(
            _sse(None, chunk({"role": "assistant", "content": "", "refusal": None}), "frame")
        )
        events.extend(_sse(None, chunk({"content": piece}), "delta") for piece in turn.deltas)
    else:
        head = {
            "index": 0,
            "id": call_id,
            "type": "function",
            "function": {"name": turn.tool_call.name, "arguments": ""},
        }
        events.append(
            _sse(
                None,
                chunk({"role": "assistant", "content": None, "tool_calls": [head]}),
                "frame",
            )
        )
        events.extend(
            _sse(
                None,
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                "delta",
            )
            for piece in turn.deltas
        )
    events.append(_sse(None, chunk({}, finish), "frame"))
    if include_usage:
        final = {**chunk({}), "choices": [], "usage": usage}
        events.append(_sse(None, final, "frame"))
    events.append(_event("done", "frame", "data: [DONE]\n\n"))
    return _Plan(content_type="text/event-stream; charset=utf-8", events=events)


def _responses(body: Mapping[str, Any], config: EmulatorConfig) -> _Plan:
    raw_input = body.get("input")
    conversation = {"instructions": body.get("instructions"), "input": raw_input}
    outputs = [i for i in _mapping_list(raw_input) if i.get("type") == "function_call_output"]
    result = _text_of(outputs[-1].get("output")) if outputs else None
    tool: tuple[str, object] | None = None
    if result is None:
        for entry in _mapping_list(body.get("tools")):
            if entry.get("type") == "function":
                tool = (str(entry.get("name", "tool")), entry.get("parameters"))
                break
    turn = _plan_turn(conversation, tool, result, config.events)
    model = str(body.get("model") or DEFAULT_MODEL)
    response_id = f"resp_{turn.digest[:48]}"
    usage = {
        "input_tokens": turn.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": turn.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.prompt_tokens + turn.completion_tokens,
    }

    def response(status: str, output: list[object], final: bool) -> dict[str, object]:
        return {
            "id": response_id,
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "background": False,
            "completed_at": CREATED if final else None,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "max_tool_calls": None,
            "model": model,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "service_tier": "default",
            "store": bool(body.get("store", True)),
            "temperature": body.get("temperature", 1.0),
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_logprobs": 0,
            "top_p": body.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": usage if final else None,
            "user": None,
            "metadata": body.get("metadata") or {},
        }

    call = turn.tool_call
    item_id = f"fc_{turn.digest[:48]}" if call is not None else f"msg_{turn.digest[:48]}"

    def part(text: str) -> dict[str, object]:
        return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}

    def item(status: str, value: str) -> dict[str, object]:
        """The output item; ``value`` is the arguments (function call) or the text."""
        if call is not None:
            return {
                "id": item_id,
                "type": "function_call",
                "status": status,
                "arguments": value,
                "call_id": f"call_{turn.digest[32:56]}",
                "name": call.name,
            }
        return {
            "id": item_id,
            "type": "message",
            "status": status,
            "content": [part(value)] if status == "completed" else [],
            "role": "assistant",
        }

    done_item = item("completed", call.arguments_json if call is not None else turn.text)

    if not body.get("stream"):
        return _json_plan(response("completed", [done_item], True), deltas=len(turn.deltas))

    sequence = 0
    events: list[tuple[str, EventKind, bytes]] = []

    def emit(event_type: str, kind: EventKind, **fields: object) -> None:
        nonlocal sequence
        payload = {"type": event_type, "sequence_number": sequence, **fields}
        events.append(_sse(event_type, payload, kind))
        sequence += 1

    where = {"item_id": item_id, "output_index": 0}
    emit("response.created", "frame", response=response("in_progress", [], False))
    emit("response.in_progress", "frame", response=response("in_progress", [], False))
    emit("response.output_item.added", "frame", output_index=0, item=item("in_progress", ""))
    if turn.tool_call is not None:
        for piece in turn.deltas:
            emit("response.function_call_arguments.delta", "delta", **where, delta=piece)
        emit(
            "response.function_call_arguments.done",
            "frame",
            **where,
            name=turn.tool_call.name,
            arguments=turn.tool_call.arguments_json,
        )
    else:
        text_where = {**where, "content_index": 0}
        emit("response.content_part.added", "frame", **text_where, part=part(""))
        for piece in turn.deltas:
            emit("response.output_text.delta", "delta", **text_where, delta=piece, logprobs=[])
        emit("response.output_text.done", "frame", **text_where, text=turn.text, logprobs=[])
        emit("response.content_part.done", "frame", **text_where, part=part(turn.text))
    emit("response.output_item.done", "frame", output_index=0, item=done_item)
    emit("response.completed", "frame", response=response("completed", [done_item], True))
    return _Plan(content_type="text/event-stream; charset=utf-8", events=events)


def _anthropic_messages(body: Mapping[str, Any], config: EmulatorConfig) -> _Plan:
    messages = body.get("messages")
    conversation = {"system": body.get("system"), "messages": messages}
    results = [
        block
        for message in _mapping_list(messages)
        for block in _mapping_list(message.get("content"))
        if block.get("type") == "tool_result"
    ]
    result = _text_of(results[-1].get("content")) if results else None
    tool: tuple[str, object] | None = None
    if result is None:
        for entry in _mapping_list(body.get("tools")):
            if "name" in entry and entry.get("type") in (None, "custom"):
                tool = (str(entry["name"]), entry.get("input_schema"))
                break
    turn = _plan_turn(conversation, tool, result, config.events)
    model = str(body.get("model") or DEFAULT_MODEL)
    message_id = f"msg_01{turn.digest[:22]}"
    stop_reason = "tool_use" if turn.tool_call else "end_turn"
    tool_id = f"toolu_01{turn.digest[32:54]}"
    usage = {
        "input_tokens": turn.prompt_tokens,
        "output_tokens": turn.completion_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "service_tier": "standard",
    }

    def message(
        content: list[object], stop: str | None, out_usage: Mapping[str, object]
    ) -> dict[str, object]:
        return {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": dict(out_usage),
        }

    if turn.tool_call is not None:
        name = turn.tool_call.name
        block: dict[str, object] = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
        full_block = {**block, "input": turn.tool_call.arguments}
    else:
        block = {"type": "text", "text": ""}
        full_block = {"type": "text", "text": turn.text}

    if not body.get("stream"):
        return _json_plan(message([full_block], stop_reason, usage), deltas=len(turn.deltas))

    events: list[tuple[str, EventKind, bytes]] = []

    def emit(event_type: str, kind: EventKind, **fields: object) -> None:
        events.append(_sse(event_type, {"type": event_type, **fields}, kind))

    emit("message_start", "frame", message=message([], None, {**usage, "output_tokens": 1}))
    emit("content_block_start", "frame", index=0, content_block=block)
    emit("ping", "frame")
    for piece in turn.deltas:
        if turn.tool_call is not None:
            delta = {"type": "input_json_delta", "partial_json": piece}
        else:
            delta = {"type": "text_delta", "text": piece}
        emit("content_block_delta", "delta", index=0, delta=delta)
    emit("content_block_stop", "frame", index=0)
    emit(
        "message_delta",
        "frame",
        delta={"stop_reason": stop_reason, "stop_sequence": None},
        usage={"output_tokens": turn.completion_tokens},
    )
    emit("message_stop", "frame")
    return _Plan(content_type="text/event-stream; charset=utf-8", events=events)


def _ollama_chat(body: Mapping[str, Any], config: EmulatorConfig) -> _Plan:
    messages = body.get("messages")
    conversation = {"messages": messages}
    tool_messages = [m for m in _mapping_list(messages) if m.get("role") == "tool"]
    result = _text_of(tool_messages[-1].get("content")) if tool_messages else None
    tool = None if result is not None else _first_function_tool(body.get("tools"))
    turn = _plan_turn(conversation, tool, result, config.events)
    model = str(body.get("model") or DEFAULT_MODEL)
    step_ns = round(config.delay * 1e9)
    first_ns = round(config.first_event_delay * 1e9)
    eval_ns = step_ns * max(0, len(turn.deltas) - 1)
    final_stats = {
        "done_reason": "stop",
        "total_duration": first_ns + eval_ns,
        "load_duration": 0,
        "prompt_eval_count": turn.prompt_tokens,
        "prompt_eval_duration": first_ns,
        "eval_count": turn.completion_tokens,
        "eval_duration": eval_ns,
    }

    def line(message: Mapping[str, object], done: bool, **extra: object) -> dict[str, object]:
        return {
            "model": model,
            "created_at": OLLAMA_CREATED_AT,
            "message": dict(message),
            "done": done,
            **extra,
        }

    tool_calls: list[object] | None = None
    if turn.tool_call is not None:
        tool_calls = [
            {
                "id": f"call_{turn.digest[32:40]}",
                "function": {
                    "index": 0,
                    "name": turn.tool_call.name,
                    "arguments": turn.tool_call.arguments,
                },
            }
        ]

    stream = body.get("stream")
    if stream is not None and not stream:  # Ollama streams unless told otherwise
        reply: dict[str, object] = {"role": "assistant", "content": turn.text}
        if tool_calls is not None:
            reply["tool_calls"] = tool_calls
        return _json_plan(line(reply, True, **final_stats), deltas=len(turn.deltas))

    events: list[tuple[str, EventKind, bytes]] = []
    if tool_calls is not None:
        # Ollama sends a tool call whole, in a single line.
        tool_line = line({"role": "assistant", "content": "", "tool_calls": tool_calls}, False)
        events.append(_event("line", "delta", _dumps(tool_line) + "\n"))
    else:
        for piece in turn.deltas:
            content_line = line({"role": "assistant", "content": piece}, False)
            events.append(_event("line", "delta", _dumps(content_line) + "\n"))
    final = line({"role": "assistant", "content": ""}, True, **final_stats)
    events.append(_event("line", "frame", _dumps(final) + "\n"))
    return _Plan(content_type="application/x-ndjson", events=events)


def _gemini(body: Mapping[str, Any], config: EmulatorConfig, model: str, stream: bool) -> _Plan:
    """Gemini ``generateContent`` (one JSON body) and ``streamGenerateContent`` (SSE, one
    ``GenerateContentResponse`` per delta, the last carrying the finish reason and usage)."""
    conversation = {"contents": body.get("contents")}
    turn = _plan_turn(conversation, None, None, config.events)
    usage = {
        "promptTokenCount": turn.prompt_tokens,
        "candidatesTokenCount": turn.completion_tokens,
        "totalTokenCount": turn.prompt_tokens + turn.completion_tokens,
    }

    def answer(text: str, final: bool) -> dict[str, object]:
        candidate: dict[str, object] = {
            "content": {"parts": [{"text": text}], "role": "model"},
            "index": 0,
        }
        reply: dict[str, object] = {"candidates": [candidate], "modelVersion": model}
        if final:
            candidate["finishReason"] = "STOP"
            reply["usageMetadata"] = usage
        reply["responseId"] = turn.digest[:16]
        return reply

    if not stream:
        return _json_plan(answer(turn.text, True), deltas=len(turn.deltas))
    events = [
        _event("data", "delta", f"data: {_dumps(answer(piece, i == len(turn.deltas) - 1))}\r\n\r\n")
        for i, piece in enumerate(turn.deltas)
    ]
    return _Plan(content_type="text/event-stream", events=events)


_GEMINI_PATH: Final = re.compile(
    r"^/v1(?:beta)?/models/([^/:]+):(generateContent|streamGenerateContent)$"
)

_PROVIDERS: Final = {
    CHAT_PATH: _chat_completion,
    RESPONSES_PATH: _responses,
    MESSAGES_PATH: _anthropic_messages,
    OLLAMA_CHAT_PATH: _ollama_chat,
}


_BEDROCK_PATH: Final = re.compile(r"^/model/([^/]+)/(converse|converse-stream)$")


def _provider(path: str) -> Any:
    """The reply builder for ``path``, or None for a path the emulator does not serve."""
    if path in _PROVIDERS:
        return _PROVIDERS[path]
    bedrock = _BEDROCK_PATH.match(path)
    if bedrock is not None:
        from tests.support.bedrock import converse

        def bedrock_converse(body: Mapping[str, Any], config: EmulatorConfig) -> _Plan:
            return converse(body, config, bedrock.group(2) == "converse-stream")

        return bedrock_converse
    found = _GEMINI_PATH.match(path)
    if found is None:
        return None
    model, method = found.groups()

    def gemini(body: Mapping[str, Any], config: EmulatorConfig) -> _Plan:
        return _gemini(body, config, model, method == "streamGenerateContent")

    return gemini


# --------------------------------------------------------------------------- server


class _ClientGone(Exception):
    """The connection broke or the emulator is stopping."""


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, emulator: Emulator, stopping: threading.Event, port: int = 0) -> None:
        self.emulator = emulator
        self.stopping = stopping
        # Only a fixed port (re-recording the examples) needs to rebind at once; an ephemeral
        # one must not be handed straight back to another test on this machine.
        self.allow_reuse_address = port != 0
        super().__init__(("127.0.0.1", port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client resetting or timing out its connection is routine, not an error.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)

    def server_bind(self) -> None:
        # Skip HTTPServer.server_bind's reverse DNS lookup (socket.getfqdn).
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "toolnexus-emulator/1.0"
    sys_version = ""
    disable_nagle_algorithm = True
    timeout = 30.0  # idle keep-alive connections are dropped after this long

    @property
    def _emulator(self) -> Emulator:
        return cast(_Server, self.server).emulator

    def setup(self) -> None:
        super().setup()
        self._emulator._register(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self._emulator._unregister()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default per-request logging to stderr."""

    def send_response(self, code: int, message: str | None = None) -> None:
        # Like the base class but without a ``Date`` header, to keep replies deterministic.
        self.log_request(code)
        self.send_response_only(code, message)
        self.send_header("Server", self.version_string())

    def _dispatch(self) -> None:
        self._emulator._handle(self, cast(_Server, self.server).stopping)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts: list[bytes] = []
            while True:
                size_line = self.rfile.readline(65537)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline(65537)
            raw = b"".join(parts)
        else:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding", "").lower() == "gzip" and raw:
            raw = gzip_module.decompress(raw)
        return raw

    def write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as exc:
            self.close_connection = True
            raise _ClientGone from exc


class Emulator:
    """Loopback OpenAI / Anthropic / Ollama emulator; see the module docstring.

    Use as a context manager (``with Emulator() as emu:``) or call :meth:`start` and
    :meth:`stop`.  ``base_url`` stays readable after :meth:`stop` so that a client built
    for the recording run can be reused to prove that a replay needs no server.
    """

    def __init__(
        self,
        *,
        events: int = 5,
        delay: float = 0.0,
        first_event_delay: float = 0.0,
        gzip: bool = False,
        port: int = 0,
    ) -> None:
        self._port = port
        self._lock = threading.Condition()
        self._config = EmulatorConfig(events, delay, first_event_delay, gzip)
        self._requests: list[ReceivedRequest] = []
        self._responses: list[ResponseRecord] = []
        self._failures: list[ScriptedFailure] = []
        self._in_flight = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._connections: dict[threading.Thread, socket.socket] = {}
        self._address: tuple[str, int] | None = None

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> Emulator:
        """Bind 127.0.0.1 (an ephemeral port unless ``port`` was given) and serve in a thread."""
        with self._lock:
            if self._server is not None:
                raise RuntimeError("emulator already running")
            self._stopping = threading.Event()
            server = _Server(self, self._stopping, self._port)
            host, port = server.server_address[:2]
            self._address = (str(host), int(port))
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"llm-emulator:{port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, drop every open connection and wait for handler threads."""
        with self._lock:
            server, thread = self._server, self._thread
            self._server = self._thread = None
            if server is None:
                return
            self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = dict(self._connections)
        for conn in connections.values():
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if thread is not None:
            thread.join(timeout)
        deadline = wall() + timeout
        for handler_thread in connections:
            handler_thread.join(max(0.0, deadline - wall()))

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        with self._lock:
            return self._server is not None

    @property
    def host(self) -> str:
        return self._require_address()[0]

    @property
    def port(self) -> int:
        return self._require_address()[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (without a trailing slash or ``/v1``)."""
        host, port = self._require_address()
        return f"http://{host}:{port}"

    def _require_address(self) -> tuple[str, int]:
        if self._address is None:
            raise RuntimeError("emulator was never started")
        return self._address

    # -- configuration --------------------------------------------------------------

    @property
    def config(self) -> EmulatorConfig:
        with self._lock:
            return self._config

    def configure(
        self,
        *,
        events: int | None = None,
        delay: float | None = None,
        first_event_delay: float | None = None,
        gzip: bool | None = None,
    ) -> EmulatorConfig:
        """Change several settings at once; affects requests that arrive afterwards."""
        changes: dict[str, Any] = {
            "events": events,
            "delay": delay,
            "first_event_delay": first_event_delay,
            "gzip": gzip,
        }
        with self._lock:
            self._config = dataclasses.replace(
                self._config, **{k: v for k, v in changes.items() if v is not None}
            )
            return self._config

    @property
    def events(self) -> int:
        return self.config.events

    @events.setter
    def events(self, value: int) -> None:
        self.configure(events=value)

    @property
    def delay(self) -> float:
        return self.config.delay

    @delay.setter
    def delay(self, value: float) -> None:
        self.configure(delay=value)

    @property
    def first_event_delay(self) -> float:
        return self.config.first_event_delay

    @first_event_delay.setter
    def first_event_delay(self, value: float) -> None:
        self.configure(first_event_delay=value)

    @property
    def gzip(self) -> bool:
        return self.config.gzip

    @gzip.setter
    def gzip(self, value: bool) -> None:
        self.configure(gzip=value)

    def fail_next(
        self,
        status: int = 429,
        retry_after: str | float | None = "1",
        body: bytes | str | Mapping[str, Any] | list[Any] | None = None,
        times: int = 1,
        path: str | None = None,
        *,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer the next ``times`` requests (to ``path``, or any path) with ``status``.

        Failures are queued: each one is used up before the next applies.  ``body``
        defaults to the provider-shaped JSON error for the request's path; ``str`` and
        ``bytes`` bodies are sent as they are (``text/html`` if they start with ``<``).
        """
        if times < 1:
            raise ValueError("times must be >= 1")
        raw: bytes | None
        if body is None:
            raw = None
        elif isinstance(body, bytes):
            raw = body
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = _dumps(body).encode()
            content_type = content_type or "application/json"
        if raw is not None and content_type is None:
            looks_html = raw.lstrip().startswith(b"<")
            content_type = "text/html; charset=utf-8" if looks_html else "text/plain"
        failure = ScriptedFailure(
            status=status,
            retry_after=None if retry_after is None else str(retry_after),
            body=raw,
            content_type=content_type,
            headers=list((headers or {}).items()),
            path=path,
            remaining=times,
        )
        with self._lock:
            self._failures.append(failure)

    @property
    def pending_failures(self) -> list[ScriptedFailure]:
        with self._lock:
            return [dataclasses.replace(f) for f in self._failures]

    def clear(self) -> None:
        """Forget recorded requests/responses and queued failures."""
        with self._lock:
            self._requests.clear()
            self._responses.clear()
            self._failures.clear()

    # -- observations ---------------------------------------------------------------

    @property
    def requests(self) -> list[ReceivedRequest]:
        """Snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def responses(self) -> list[ResponseRecord]:
        """Snapshot of the replies, parallel to :attr:`requests`."""
        with self._lock:
            return [record.snapshot() for record in self._responses]

    @property
    def streams(self) -> list[ResponseRecord]:
        """The streamed replies only."""
        return [record for record in self.responses if record.streamed]

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no reply is being written; ``False`` on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self._in_flight == 0, timeout)

    # -- server side ------------------------------------------------------------------

    def _register(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections[threading.current_thread()] = conn

    def _unregister(self) -> None:
        with self._lock:
            self._connections.pop(threading.current_thread(), None)

    def _take_failure(self, path: str) -> ScriptedFailure | None:
        for failure in self._failures:
            if failure.path is None or failure.path == path:
                failure.remaining -= 1
                if failure.remaining <= 0:
                    self._failures.remove(failure)
                return failure
        return None

    def _handle(self, handler: _Handler, stopping: threading.Event) -> None:
        try:
            raw = handler.read_body()
        except (OSError, ValueError, EOFError, zlib.error):
            handler.close_connection = True
            return
        received_at = wall()
        split = urlsplit(handler.path)
        path = split.path
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        with self._lock:
            request = ReceivedRequest(
                index=len(self._requests),
                method=handler.command,
                path=path,
                query=split.query,
                headers=[(str(k), str(v)) for k, v in handler.headers.items()],
                body=body,
                raw_body=raw,
                received_at=received_at,
            )
            self._requests.append(request)
            record = ResponseRecord(request.index, path, received_at)
            self._responses.append(record)
            config = self._config
            failure = self._take_failure(path)
            self._in_flight += 1
        try:
            try:
                plan = self._plan(request, failure, config)
            except Exception as exc:  # a bug in the emulator: report it to the client
                plan = _json_plan(error_payload(path, 500, f"emulator error: {exc!r}"), 500)
            self._send(handler, plan, record, config, stopping)
        except _ClientGone:
            with self._lock:
                record.aborted = True
        finally:
            with self._lock:
                record.finished_at = wall()
                self._in_flight -= 1
                self._lock.notify_all()

    def _plan(
        self,
        request: ReceivedRequest,
        failure: ScriptedFailure | None,
        config: EmulatorConfig,
    ) -> _Plan:
        path = request.path
        if failure is not None:
            if failure.body is None:
                plan = _json_plan(error_payload(path, failure.status), failure.status)
            else:
                plan = _Plan(
                    status=failure.status,
                    content_type=failure.content_type or "text/plain",
                    body=failure.body,
                )
            if failure.retry_after is not None:
                plan.headers.append(("Retry-After", failure.retry_after))
            plan.headers.extend(failure.headers)
            plan.deltas = 0
            return plan
        provider = _provider(path)
        if provider is None:
            return _json_plan(error_payload(path, 404, f"Unknown path {path!r}"), 404)
        if request.method != "POST":
            plan = _json_plan(error_payload(path, 405, f"Use POST for {path}"), 405)
            plan.headers.append(("Allow", "POST"))
            return plan
        if not isinstance(request.body, Mapping):
            return _json_plan(error_payload(path, 400, "Request body must be a JSON object"), 400)
        plan: _Plan = provider(request.body, config)
        return plan

    def _send(
        self,
        handler: _Handler,
        plan: _Plan,
        record: ResponseRecord,
        config: EmulatorConfig,
        stopping: threading.Event,
    ) -> None:
        def pause(seconds: float) -> None:
            if seconds > 0 and stopping.wait(seconds):
                handler.close_connection = True
                raise _ClientGone

        headers = [("Content-Type", plan.content_type)]
        request_id = f"req_{_digest(record.path, record.request_index)[:24]}"
        headers.append(("x-request-id", request_id))
        if record.path == MESSAGES_PATH:
            headers.append(("request-id", request_id))
        if config.gzip:
            headers.append(("Content-Encoding", "gzip"))
        headers.extend(plan.headers)

        if plan.events is None:
            pause(config.first_event_delay + config.delay * max(0, plan.deltas - 1))
            wire = gzip_module.compress(plan.body, mtime=0) if config.gzip else plan.body
            headers.append(("Content-Length", str(len(wire))))
            self._send_headers(handler, plan.status, headers, record, streamed=False)
            started_at = wall()
            handler.write(wire)
            self._log_event(record, StreamEvent("body", "body", plan.body, wall(), started_at))
            return

        headers += [("Cache-Control", "no-cache"), ("Transfer-Encoding", "chunked")]
        self._send_headers(handler, plan.status, headers, record, streamed=True)
        compressor = zlib.compressobj(6, zlib.DEFLATED, 31) if config.gzip else None
        pause(config.first_event_delay)
        deltas_sent = 0
        for name, kind, data in plan.events:
            if kind == "delta":
                if deltas_sent:
                    pause(config.delay)
                deltas_sent += 1
            wire = data
            if compressor is not None:
                wire = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
            started_at = wall()
            handler.write(b"%x\r\n%s\r\n" % (len(wire), wire))
            self._log_event(record, StreamEvent(name, kind, data, wall(), started_at))
        tail = compressor.flush(zlib.Z_FINISH) if compressor is not None else b""
        end = (b"%x\r\n%s\r\n" % (len(tail), tail) if tail else b"") + b"0\r\n\r\n"
        handler.write(end)

    def _send_headers(
        self,
        handler: _Handler,
        status: int,
        headers: Iterable[tuple[str, str]],
        record: ResponseRecord,
        *,
        streamed: bool,
    ) -> None:
        handler.send_response(status)
        sent: list[tuple[str, str]] = []
        for key, value in headers:
            handler.send_header(key, value)
            sent.append((key, value))
        try:
            handler.end_headers()
        except OSError as exc:
            handler.close_connection = True
            raise _ClientGone from exc
        with self._lock:
            record.status = status
            record.streamed = streamed
            record.gzip = any(k == "Content-Encoding" and v == "gzip" for k, v in sent)
            record.headers = sent
            record.headers_sent_at = wall()

    def _log_event(self, record: ResponseRecord, event: StreamEvent) -> None:
        with self._lock:
            record.events.append(event)
