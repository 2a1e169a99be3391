"""The OpenAI Responses API: ``POST .../responses`` (streamed or whole) and ``GET
.../responses/{id}`` (a stored response, or its stream again with ``?stream=true``).

The view reads the final ``response`` object (from ``response.completed``, ``.incomplete`` or
``.failed``, or the whole answer): ``message`` items give the text, ``function_call`` and
``custom_tool_call`` items the client's tool calls, ``reasoning`` items the summary text, and
the tools OpenAI runs (``web_search_call``, ``file_search_call``, ``code_interpreter_call``,
``image_generation_call``, ``mcp_call``) the server tool calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._answer import (
    Answer,
    Name,
    Piece,
    ProviderView,
    ViewError,
    items,
    mappings,
    obj,
    raw_reason,
    shown,
    usage,
)
from ._protocol import WireRequest
from .openai_chat import openai_error_body

__all__ = ["DIALECT", "OpenAIResponses"]

_STORED: Final = re.compile(r"/responses/[^/]+$")
_TERMINAL: Final = frozenset(
    {"response.completed", "response.incomplete", "response.failed", "response.done"}
)
_REASONS: Final = {
    "completed": "stop",
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}
# Output items for tools OpenAI runs itself, and the name each gets in the view.
_SERVER_ITEMS: Final = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_interpreter",
    "image_generation_call": "image_generation",
}


@dataclass(frozen=True, slots=True)
class OpenAIResponses:
    name: Name = "openai-responses"
    url: str = "https://api.openai.com/v1/responses"
    stream_type: str = "text/event-stream"

    def claims(self, request: WireRequest) -> bool:
        if request.method == "POST":
            return request.path.endswith("/responses")
        return request.method == "GET" and _STORED.search(request.path) is not None

    def streams(self, request: WireRequest) -> bool:
        return _STORED.search(request.path) is not None and request.asks("stream", "true")

    def ends(self, event: str | None, payload: object) -> bool:
        kind = payload.get("type") if isinstance(payload, Mapping) else None
        return event in _TERMINAL or kind in _TERMINAL

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return openai_error_body(status, message)

    def error_event(self, message: str) -> bytes:
        # https://platform.openai.com/docs/api-reference/responses-streaming/error
        payload = {
            "type": "error",
            "code": "server_error",
            "message": message,
            "param": None,
            "sequence_number": 0,
        }
        return f"event: error\ndata: {json.dumps(payload)}\n\n".encode()

    def stream_error(self, event: str | None, payload: object) -> str | None:
        if not isinstance(payload, Mapping):
            return None
        kind = payload.get("type", event)
        if kind == "error":
            message = payload.get("message") or obj(payload.get("error")).get("message")
            return str(message or payload.get("code") or "an error event")
        final = obj(payload.get("response")) if kind == "response.failed" else payload
        if kind == "response.failed" or (
            payload.get("object") == "response" and payload.get("status") == "failed"
        ):
            error = obj(final.get("error"))
            return f"the response failed: {error.get('message') or error.get('code') or '?'}"
        return None

    def read(self, pieces: Iterable[Piece], request: WireRequest) -> ProviderView:
        answer = Answer(self.name)
        final: Mapping[str, Any] | None = None
        for t, name, doc in mappings(pieces):
            kind = doc.get("type", name)
            problem = self.stream_error(name, doc)
            if problem is not None:
                answer.fail(problem)
            if kind == "response.output_text.delta":
                answer.streamed = True
                answer.say(t, doc.get("delta", ""))
            elif kind in _TERMINAL:
                answer.streamed = True
                final = obj(doc.get("response")) or None
            elif kind == "error":
                answer.streamed = True
            elif doc.get("object") == "response":
                final = doc
        if final is None and answer.error is not None:
            return answer.done(_REASONS)  # the stream ended in its error, with no response
        if final is None:
            raise ViewError("the Responses answer has no final response object")
        whole: list[str] = []
        for item in items(final.get("output")):
            _item(answer, item, whole)
        status = raw_reason(final.get("status"))
        details = obj(final.get("incomplete_details"))
        answer.raw = raw_reason(details.get("reason")) if status == "incomplete" else status
        u = obj(final.get("usage"))
        answer.usage = usage(u.get("input_tokens"), u.get("output_tokens"), u.get("total_tokens"))
        model = final.get("model")
        answer.model = model if isinstance(model, str) else None
        return answer.done(_REASONS, "".join(whole) or "".join(answer.text))


def _item(answer: Answer, item: Mapping[str, Any], whole: list[str]) -> None:
    """Read one output item of the final response into ``answer`` (message text into
    ``whole``); an item type the view does not know is skipped."""
    kind = item.get("type")
    if kind == "message":
        for part in items(item.get("content")):
            if part.get("type") == "output_text":
                text = part.get("text", "")
                if not isinstance(text, str):
                    raise ViewError(f"an output_text part holds {shown(text)}, not a string")
                whole.append(text)
    elif kind == "function_call":
        answer.call(item.get("call_id"), item.get("name"), item.get("arguments", ""))
    elif kind == "custom_tool_call":
        answer.call(item.get("call_id"), item.get("name"), json.dumps(item.get("input", "")))
    elif kind == "reasoning":
        for part in items(item.get("summary")) or items(item.get("content")):
            answer.think(part.get("text"))
    elif kind == "mcp_call":
        answer.server_call(item.get("id"), item.get("name"), item.get("arguments", ""))
    elif isinstance(kind, str) and kind in _SERVER_ITEMS:
        details = {k: v for k, v in item.items() if k not in ("id", "type", "status")}
        answer.server_call(item.get("id"), _SERVER_ITEMS[kind], details)


DIALECT: Final = OpenAIResponses()
