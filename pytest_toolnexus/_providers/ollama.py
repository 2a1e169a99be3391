"""Ollama's native API: ``POST /api/chat`` and ``POST /api/generate`` (NDJSON lines up to
``done: true``, or one JSON object). Ollama's OpenAI-compatible ``/v1/chat/completions`` is
OpenAI chat, not this dialect."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._answer import Answer, Name, Piece, ProviderView, cut, items, mappings, obj, raw_reason, usage
from ._protocol import WireRequest

__all__ = ["DIALECT", "Ollama"]


@dataclass(frozen=True, slots=True)
class Ollama:
    name: Name = "ollama"
    url: str = "http://localhost:11434/api/chat"
    stream_type: str = "application/x-ndjson"

    def claims(self, request: WireRequest) -> bool:
        return request.method == "POST" and request.path.endswith(("/api/chat", "/api/generate"))

    def streams(self, request: WireRequest) -> bool:
        return False

    def ends(self, event: str | None, payload: object) -> bool:
        return isinstance(payload, Mapping) and payload.get("done") is True

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": message}

    def error_event(self, message: str) -> bytes:
        return (json.dumps({"error": message}) + "\n").encode()

    def stream_error(self, event: str | None, payload: object) -> str | None:
        if isinstance(payload, Mapping) and payload.get("error"):
            error = payload["error"]
            return error if isinstance(error, str) else cut(json.dumps(error, default=str), 300)
        return None

    def read(self, pieces: Iterable[Piece], request: WireRequest) -> ProviderView:
        answer = Answer(self.name)
        lines = 0
        for t, name, doc in mappings(pieces):
            problem = self.stream_error(name, doc)
            if problem is not None:
                answer.fail(problem)
                continue
            lines += 1
            model = doc.get("model")
            answer.model = model if isinstance(model, str) else answer.model
            if doc.get("response"):  # /api/generate
                answer.say(t, doc["response"])
            message = obj(doc.get("message"))
            if message.get("content"):
                answer.say(t, message["content"])
            if message.get("thinking"):
                answer.think(message["thinking"])
            for call in items(message.get("tool_calls")):
                function = obj(call.get("function"))
                answer.call(call.get("id"), function.get("name"), function.get("arguments", {}))
            if doc.get("done"):
                answer.raw = raw_reason(doc.get("done_reason")) or "stop"
                answer.usage = usage(doc.get("prompt_eval_count"), doc.get("eval_count"))
        answer.streamed = lines > 1
        return answer.done({})


DIALECT: Final = Ollama()
