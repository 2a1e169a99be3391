"""OpenAI chat completions, and every API that speaks it (OpenRouter, vLLM, Ollama's and
Gemini's OpenAI-compatible routes, Azure OpenAI): ``POST .../chat/completions`` on any host."""

from __future__ import annotations

import json
from collections.abc import Iterable
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
    usage,
)
from ._protocol import WireRequest

__all__ = ["DIALECT", "OpenAIChat", "openai_error_body"]


def openai_error_body(status: int, message: str) -> dict[str, Any]:
    """The error body of the OpenAI API (chat completions and Responses alike)."""
    kind = {429: "rate_limit_exceeded"}.get(
        status, "server_error" if status >= 500 else "invalid_request_error"
    )
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def openai_error_text(error: object) -> str:
    """What an OpenAI ``error`` value says: its message, or the value itself."""
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return cut(json.dumps(error, default=str), 300)


@dataclass(frozen=True, slots=True)
class OpenAIChat:
    name: Name = "openai"
    url: str = "https://api.openai.com/v1/chat/completions"
    stream_type: str = "text/event-stream"

    def claims(self, request: WireRequest) -> bool:
        return request.method == "POST" and request.path.endswith("/chat/completions")

    def streams(self, request: WireRequest) -> bool:
        return False

    def ends(self, event: str | None, payload: object) -> bool:
        return isinstance(payload, str) and payload.strip() == "[DONE]"

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return openai_error_body(status, message)

    def error_event(self, message: str) -> bytes:
        payload = {"error": {"message": message, "type": "server_error", "code": None}}
        return f"data: {json.dumps(payload)}\n\n".encode()

    def stream_error(self, event: str | None, payload: object) -> str | None:
        if isinstance(payload, dict) and payload.get("error"):
            return openai_error_text(payload["error"])
        return None

    def read(self, pieces: Iterable[Piece], request: WireRequest) -> ProviderView:
        answer = Answer(self.name)
        streamed_calls: dict[int, dict[str, str]] = {}
        for t, name, doc in mappings(pieces):
            problem = self.stream_error(name, doc)
            if problem is not None:
                answer.fail(problem)
                continue
            model = doc.get("model")
            answer.model = model if isinstance(model, str) else answer.model
            if doc.get("usage"):
                u = obj(doc["usage"])
                answer.usage = usage(
                    u.get("prompt_tokens"), u.get("completion_tokens"), u.get("total_tokens")
                )
            for choice in items(doc.get("choices")):
                answer.raw = raw_reason(choice.get("finish_reason")) or answer.raw
                if "delta" not in choice:
                    message = obj(choice.get("message"))
                    _content(answer, None, message.get("content"))
                    for call in items(message.get("tool_calls")):
                        function = obj(call.get("function"))
                        answer.call(
                            call.get("id"), function.get("name"), function.get("arguments", "")
                        )
                    continue
                answer.streamed = True
                delta = obj(choice["delta"])
                if delta.get("content"):
                    _content(answer, t, delta["content"])
                for call in items(delta.get("tool_calls")):
                    index = call.get("index", 0)
                    if not isinstance(index, int):
                        raise ViewError(f"a streamed tool call has the index {index!r}")
                    slot = streamed_calls.setdefault(index, {"id": "", "name": "", "args": ""})
                    function = obj(call.get("function"))
                    slot["id"] = _str(call.get("id")) or slot["id"]
                    slot["name"] = _str(function.get("name")) or slot["name"]
                    slot["args"] += _str(function.get("arguments"))
        for _, slot in sorted(streamed_calls.items()):
            answer.call(slot["id"], slot["name"], slot["args"])
        return answer.done({})


def _content(answer: Answer, t: float | None, content: object) -> None:
    """A message's (or a delta's) ``content``: a string, or a list of typed chunks, as Mistral's
    reasoning models send it: ``text`` chunks are the answer's text, ``thinking`` chunks (each
    a list of text chunks, or a string) its reasoning."""
    if not isinstance(content, list):
        answer.say(t, content)
        return
    for chunk in items(content):
        kind = chunk.get("type")
        if kind == "text":
            answer.say(t, chunk.get("text"))
        elif kind == "thinking":
            thinking = chunk.get("thinking")
            if isinstance(thinking, list):
                for part in items(thinking):
                    answer.think(part.get("text"))
            else:
                answer.think(thinking)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


DIALECT: Final = OpenAIChat()
