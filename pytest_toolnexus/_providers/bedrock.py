"""Amazon Bedrock's Converse API: ``POST /model/{id}/converse`` (one JSON answer) and
``/model/{id}/converse-stream`` (AWS event stream frames). The model is named in the URL."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final
from urllib.parse import unquote

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

__all__ = ["DIALECT", "BedrockConverse"]

_PATH: Final = re.compile(r"/model/([^/]+)/(?:converse|converse-stream)$")
_STREAM_PATHS: Final = ("/converse-stream", "/invoke-with-response-stream")
_REASONS: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "content_filtered": "content_filter",
    "guardrail_intervened": "content_filter",
}
_EXCEPTIONS: Final = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    503: "ServiceUnavailableException",
}
EXCEPTION_PREFIX: Final = "exception:"
"""The event name the views give an exception frame: ``exception:<:exception-type>``."""


@dataclass(frozen=True, slots=True)
class BedrockConverse:
    name: Name = "bedrock"
    url: str = "https://bedrock-runtime.us-east-1.amazonaws.com/model"
    stream_type: str = "application/vnd.amazon.eventstream"

    def claims(self, request: WireRequest) -> bool:
        return request.method == "POST" and _PATH.search(request.path) is not None

    def streams(self, request: WireRequest) -> bool:
        return request.path.endswith(_STREAM_PATHS)

    def ends(self, event: str | None, payload: object) -> bool:
        return False  # ``messageStop`` is followed by ``metadata``; the server closes the stream

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = _EXCEPTIONS.get(status, "InternalServerException")
        return {"message": message, "__type": kind}

    def error_event(self, message: str) -> bytes | None:
        return None  # an exception frame is binary AWS event stream framing, not written here

    def stream_error(self, event: str | None, payload: object) -> str | None:
        if event is None or not event.startswith(EXCEPTION_PREFIX):
            return None
        message = payload.get("message") if isinstance(payload, Mapping) else payload
        return f"{event[len(EXCEPTION_PREFIX) :]}: {message}"

    def read(self, pieces: Iterable[Piece], request: WireRequest) -> ProviderView:
        answer = Answer(self.name)
        blocks: dict[int, dict[str, Any]] = {}
        for t, name, doc in mappings(pieces):
            problem = self.stream_error(name, doc)
            if problem is not None:
                answer.fail(problem)
                continue
            if name is None:  # converse: one JSON answer
                message = obj(obj(doc.get("output")).get("message"))
                for block in items(message.get("content")):
                    if "text" in block:
                        answer.say(None, block["text"])
                    elif "toolUse" in block:
                        use = obj(block["toolUse"])
                        answer.call(use.get("toolUseId"), use.get("name"), use.get("input", {}))
                    elif "reasoningContent" in block:
                        text = obj(obj(block["reasoningContent"]).get("reasoningText"))
                        answer.think(text.get("text"))
                answer.raw = raw_reason(doc.get("stopReason"))
            else:
                answer.streamed = True
            index = doc.get("contentBlockIndex", 0)
            if name == "contentBlockStart":
                use = obj(obj(doc.get("start")).get("toolUse"))
                if use:
                    blocks[_index(index)] = {**use, "args": ""}
            elif name == "contentBlockDelta":
                delta = obj(doc.get("delta"))
                if "text" in delta:
                    answer.say(t, delta["text"])
                elif "toolUse" in delta:
                    slot = blocks.get(_index(index))
                    if slot is None:
                        raise ViewError(f"a toolUse delta for block {index} has no toolUse start")
                    piece = obj(delta["toolUse"]).get("input", "")
                    slot["args"] += piece if isinstance(piece, str) else ""
                elif "reasoningContent" in delta:
                    answer.think(obj(delta["reasoningContent"]).get("text"))
            elif name == "messageStop":
                answer.raw = raw_reason(doc.get("stopReason"))
            u = obj(doc.get("usage")) if name in (None, "metadata") else {}
            if u:
                answer.usage = usage(
                    u.get("inputTokens"), u.get("outputTokens"), u.get("totalTokens")
                )
        for _, block in sorted(blocks.items()):
            answer.call(block.get("toolUseId"), block.get("name"), block["args"] or "{}")
        view = answer.done(_REASONS)
        if view.model is None:
            found = _PATH.search(request.path)
            view = replace(view, model=unquote(found.group(1)) if found else None)
        return view


def _index(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ViewError(f"a content block event has the index {shown(value, 40)}, not a number")
    return value


DIALECT: Final = BedrockConverse()
