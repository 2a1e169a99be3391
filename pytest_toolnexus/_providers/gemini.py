"""Gemini ``generateContent`` and ``streamGenerateContent`` (as SSE with ``alt=sse``, or one
JSON array of responses without it), on the Gemini API or Vertex AI.

A ``functionCall`` part with no ``id`` (the Gemini API often sends none) gives a tool call
whose ``id`` is None: the view does not invent one. ``thought`` parts are reasoning, in
``extra["reasoning"]``, not text.
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
    cut,
    items,
    mappings,
    obj,
    raw_reason,
    usage,
)
from ._protocol import WireRequest

__all__ = ["DIALECT", "Gemini"]

_REASONS: Final = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}
_STATUSES: Final = {  # the google.rpc.Code names Google APIs send with each status
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


@dataclass(frozen=True, slots=True)
class Gemini:
    name: Name = "gemini"
    url: str = "https://generativelanguage.googleapis.com/v1/models"
    stream_type: str = "text/event-stream"

    def claims(self, request: WireRequest) -> bool:
        return request.method == "POST" and request.path.endswith(
            (":generateContent", ":streamGenerateContent")
        )

    def streams(self, request: WireRequest) -> bool:
        return request.path.endswith(":streamGenerateContent") or request.asks("alt", "sse")

    def ends(self, event: str | None, payload: object) -> bool:
        return False  # the stream ends when the server closes it

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        state = _STATUSES.get(status, "UNKNOWN")
        return {"error": {"code": status, "message": message, "status": state}}

    def error_event(self, message: str) -> bytes:
        return f"data: {json.dumps(self.error_body(503, message))}\n\n".encode()

    def stream_error(self, event: str | None, payload: object) -> str | None:
        if not isinstance(payload, Mapping) or not payload.get("error"):
            return None
        error = payload["error"]
        if isinstance(error, Mapping):
            return f"{error.get('status', error.get('code', 'error'))}: {error.get('message', '')}"
        return cut(json.dumps(error, default=str), 300)

    def read(self, pieces: Iterable[Piece], request: WireRequest) -> ProviderView:
        answer = Answer(self.name)
        count = 0
        for t, name, doc in mappings(pieces):
            problem = self.stream_error(name, doc)
            if problem is not None:
                answer.fail(problem)
                continue
            count += 1
            model = doc.get("modelVersion")
            answer.model = model if isinstance(model, str) else answer.model
            metadata = obj(doc.get("usageMetadata"))
            if "candidatesTokenCount" in metadata or "totalTokenCount" in metadata:
                answer.usage = usage(
                    metadata.get("promptTokenCount"),
                    metadata.get("candidatesTokenCount"),
                    metadata.get("totalTokenCount"),
                )
            for candidate in items(doc.get("candidates"))[:1]:
                answer.raw = raw_reason(candidate.get("finishReason")) or answer.raw
                for part in items(obj(candidate.get("content")).get("parts")):
                    if "text" in part:
                        if part.get("thought"):
                            answer.think(part["text"])
                        else:
                            answer.say(t, part["text"])
                    if "functionCall" in part:
                        call = obj(part["functionCall"])
                        answer.call(call.get("id"), call.get("name"), call.get("args", {}))
        answer.streamed = count > 1 or bool(answer.deltas)
        return answer.done(_REASONS)


DIALECT: Final = Gemini()
