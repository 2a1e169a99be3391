"""Anthropic Messages: ``POST .../messages`` on any host, and Claude on Vertex AI
(``.../publishers/anthropic/models/{model}:rawPredict`` or ``:streamRawPredict``).

The view reads every content block type: ``text``; ``tool_use`` (the client's tool calls);
``server_tool_use`` and ``mcp_tool_use`` (tools Anthropic or an MCP server runs, in
``extra["server_tool_calls"]``); every ``*_tool_result`` block (``web_search_tool_result``,
``web_fetch_tool_result``, ``code_execution_tool_result``, ``mcp_tool_result``, ...) in
``extra["server_tool_results"]``; ``thinking`` (with ``thinking_delta``; a
``signature_delta`` carries nothing to read) in ``extra["reasoning"]``, and
``redacted_thinking``, counted in ``extra["redacted_reasoning"]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._answer import (
    Answer,
    Name,
    Piece,
    ProviderView,
    ViewError,
    cut,
    items,
    mappings,
    obj,
    raw_reason,
    shown,
    usage,
)
from ._protocol import WireRequest

__all__ = ["DIALECT", "AnthropicMessages"]

_REASONS: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    "tool_use": "tool_calls",
}
_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_CLIENT_CALL: Final = "tool_use"
_SERVER_CALLS: Final = frozenset({"server_tool_use", "mcp_tool_use"})


@dataclass(frozen=True, slots=True)
class AnthropicMessages:
    name: Name = "anthropic"
    url: str = "https://api.anthropic.com/v1/messages"
    stream_type: str = "text/event-stream"

    def claims(self, request: WireRequest) -> bool:
        if request.method != "POST":
            return False
        if request.path.endswith("/messages"):
            return "/threads/" not in request.path  # OpenAI Assistants' thread messages

        return "/publishers/anthropic/models/" in request.path and request.path.endswith(
            (":rawPredict", ":streamRawPredict")
        )

    def streams(self, request: WireRequest) -> bool:
        return request.path.endswith(":streamRawPredict")

    def ends(self, event: str | None, payload: object) -> bool:
        kind = payload.get("type") if isinstance(payload, Mapping) else None
        return (event or kind) == "message_stop"

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def error_event(self, message: str) -> bytes:
        payload = {"type": "error", "error": {"type": "overloaded_error", "message": message}}
        return f"event: error\ndata: {json.dumps(payload)}\n\n".encode()

    def stream_error(self, event: str | None, payload: object) -> str | None:
        if not isinstance(payload, Mapping) or payload.get("type", event) != "error":
            return None
        error = payload.get("error")
        if isinstance(error, Mapping):
            return f"{error.get('type', 'error')}: {error.get('message', '')}"
        return cut(json.dumps(error, default=str), 300)

    def read(self, pieces: Iterable[Piece], request: WireRequest) -> ProviderView:
        answer = Answer(self.name)
        blocks: dict[int, dict[str, Any]] = {}
        input_tokens: object = None
        output_tokens: object = None
        for t, name, doc in mappings(pieces):
            kind = doc.get("type", name)
            if kind == "error":
                answer.fail(self.stream_error(name, doc) or "an error event")
                continue
            if kind == "message":
                answer.model = _model(doc.get("model"))
                answer.raw = raw_reason(doc.get("stop_reason"))
                u = obj(doc.get("usage"))
                input_tokens, output_tokens = u.get("input_tokens"), u.get("output_tokens")
                for index, block in enumerate(items(doc.get("content"))):
                    _whole_block(answer, blocks, index, block)
                continue
            answer.streamed = True
            if kind == "message_start":
                message = obj(doc.get("message"))
                answer.model = _model(message.get("model"))
                input_tokens = obj(message.get("usage")).get("input_tokens")
            elif kind == "content_block_start":
                _start_block(answer, blocks, _index(doc), obj(doc.get("content_block")))
            elif kind == "content_block_delta":
                _delta(answer, blocks, t, _index(doc), obj(doc.get("delta")))
            elif kind == "message_delta":
                answer.raw = raw_reason(obj(doc.get("delta")).get("stop_reason")) or answer.raw
                output_tokens = obj(doc.get("usage")).get("output_tokens", output_tokens)
        for _, block in sorted(blocks.items()):
            arguments = block["args"] or block.get("start") or "{}"
            if block["type"] == _CLIENT_CALL:
                answer.call(block.get("id"), block.get("name"), arguments)
            else:
                answer.server_call(block.get("id"), block.get("name"), arguments)
        answer.usage = usage(input_tokens, output_tokens)
        return answer.done(_REASONS)


def _model(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _index(doc: Mapping[str, Any]) -> int:
    index = doc.get("index", 0)
    if not isinstance(index, int) or isinstance(index, bool):
        raise ViewError(f"a content block event has the index {shown(index, 40)}, not a number")
    return index


def _whole_block(
    answer: Answer, calls: dict[int, dict[str, Any]], index: int, block: Mapping[str, Any]
) -> None:
    kind = block.get("type")
    if kind == "text":
        answer.say(None, block.get("text", ""))
    elif kind == _CLIENT_CALL or kind in _SERVER_CALLS:
        calls[index] = {**block, "args": block.get("input", {})}
    else:
        _other_block(answer, block)


def _start_block(
    answer: Answer, calls: dict[int, dict[str, Any]], index: int, block: Mapping[str, Any]
) -> None:
    kind = block.get("type")
    if kind == _CLIENT_CALL or kind in _SERVER_CALLS:
        # The input arrives as input_json_delta pieces; a start that already holds all of it
        # (and gets no delta) keeps the one it came with.
        start = block.get("input")
        calls[index] = {**block, "args": "", "start": start if start else None}
    elif kind != "text":
        _other_block(answer, block)


def _other_block(answer: Answer, block: Mapping[str, Any]) -> None:
    """A block that is neither text nor a tool call: thinking, or a server tool's result."""
    kind = block.get("type")
    if kind == "thinking":
        answer.think(block.get("thinking"))
    elif kind == "redacted_thinking":
        answer.redacted_reasoning += 1
    elif isinstance(kind, str) and kind.endswith("_tool_result"):
        answer.server_result(block.get("tool_use_id"), kind)


def _delta(
    answer: Answer,
    calls: dict[int, dict[str, Any]],
    t: float | None,
    index: int,
    delta: Mapping[str, Any],
) -> None:
    kind = delta.get("type")
    if kind == "text_delta":
        answer.say(t, delta.get("text", ""))
    elif kind == "thinking_delta":
        answer.think(delta.get("thinking"))
    elif kind == "input_json_delta":
        if index not in calls:
            raise ViewError(
                f"an input_json_delta for content block {index} came with no tool call block "
                "started at that index"
            )
        piece = delta.get("partial_json", "")
        if not isinstance(piece, str):
            raise ViewError(f"an input_json_delta holds {shown(piece)}, not a string")
        calls[index]["args"] += piece


DIALECT: Final = AnthropicMessages()
