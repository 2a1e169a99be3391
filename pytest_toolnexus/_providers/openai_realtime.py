"""The OpenAI Realtime API: a WebSocket session opened by ``GET …/realtime`` (the openai
SDK's ``client.realtime.connect(model=...)``), read from its server events.

Each ``response`` (``response.created`` to ``response.done``) is a turn: its text from
``response.output_text.delta`` and its audio's transcript from
``response.output_audio_transcript.delta`` (the GA names, which ``openai.types.realtime``
defines; the beta API's ``response.text.delta`` and ``response.audio_transcript.delta``, in
``openai.types.beta.realtime``, read the same), its audio from the base64
``response.output_audio.delta`` (``response.audio.delta``), its tool calls from
``response.function_call_arguments.delta`` and ``.done`` (named by the ``function_call``
output item), and its status and usage from ``response.done``. An ``error`` event is the
view's ``error``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._answer import Name, Piece, ProviderView, items, mappings, obj, raw_reason, usage
from ._protocol import WireRequest
from ._turns import Session, Turn
from .openai_chat import openai_error_body

__all__ = ["DIALECT", "OpenAIRealtime"]

_TEXT: Final = frozenset(
    {
        "response.output_text.delta",
        "response.output_audio_transcript.delta",
        "response.text.delta",
        "response.audio_transcript.delta",
    }
)
_AUDIO: Final = frozenset({"response.output_audio.delta", "response.audio.delta"})
_ITEMS: Final = frozenset({"response.output_item.added", "response.output_item.done"})
_REASONS: Final = {
    "completed": "stop",
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


@dataclass(frozen=True, slots=True)
class OpenAIRealtime:
    name: Name = "openai-realtime"
    url: str = "wss://api.openai.com/v1/realtime"
    stream_type: str = "application/json"

    def claims(self, request: WireRequest) -> bool:
        return request.method == "GET" and request.path.endswith("/realtime")

    def streams(self, request: WireRequest) -> bool:
        return False  # a WebSocket session, not an HTTP stream

    def ends(self, event: str | None, payload: object) -> bool:
        return False  # a session ends when a side closes it, not with a response

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return openai_error_body(status, message)

    def error_event(self, message: str) -> bytes:
        # platform.openai.com/docs/api-reference/realtime-server-events/error
        error = {
            "type": "server_error",
            "code": "server_error",
            "message": message,
            "param": None,
            "event_id": None,
        }
        return json.dumps({"type": "error", "event_id": "event_error", "error": error}).encode()

    def stream_error(self, event: str | None, payload: object) -> str | None:
        if event == "client" or not isinstance(payload, Mapping):
            return None
        kind = payload.get("type")
        if kind == "error":
            error = obj(payload.get("error"))
            return str(error.get("message") or error.get("code") or "an error event")
        if kind == "response.done":
            response = obj(payload.get("response"))
            if response.get("status") == "failed":
                error = obj(obj(response.get("status_details")).get("error"))
                said = error.get("message") or error.get("code") or error.get("type") or "?"
                return f"the response failed: {said}"
        return None

    def read(self, pieces: Iterable[Piece], request: WireRequest) -> ProviderView:
        session = Session(self.name)
        session.model = dict(request.query).get("model") or None
        for t, sender, doc in mappings(pieces):
            if sender == "client":
                session.asked_at = t
                continue
            kind = doc.get("type")
            problem = self.stream_error(sender, doc)
            if problem is not None:
                session.fail(problem)
            if kind in ("session.created", "session.updated"):
                model = obj(doc.get("session")).get("model")
                session.model = model if isinstance(model, str) and model else session.model
            elif kind == "response.created":
                session.turn(_id(obj(doc.get("response")).get("id")))
            elif kind in _TEXT:
                turn = session.turn(_id(doc.get("response_id")))
                turn.answer.streamed = True
                turn.answer.say(t, doc.get("delta", ""))
            elif kind in _AUDIO:
                session.turn(_id(doc.get("response_id"))).hear(t, doc.get("delta"))
            elif kind in _ITEMS:
                item = obj(doc.get("item"))
                if item.get("type") == "function_call":
                    _call(session.turn(_id(doc.get("response_id"))), item.get("id"), item)
            elif kind == "response.function_call_arguments.delta":
                turn = session.turn(_id(doc.get("response_id")))
                call = turn.calling(str(doc.get("item_id")), call_id=doc.get("call_id"))
                call["arguments"].append(str(doc.get("delta", "")))
            elif kind == "response.function_call_arguments.done":
                _call(session.turn(_id(doc.get("response_id"))), doc.get("item_id"), doc)
            elif kind == "response.done":
                _done(session, obj(doc.get("response")))
        return session.view(_REASONS)


def _id(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _call(turn: Turn, item_id: object, fields: Mapping[str, Any]) -> None:
    """A function call item (or the arguments' done event) for the call streamed as
    ``item_id``: its call id, name and, when given, its whole arguments."""
    call = turn.calling(str(item_id), call_id=fields.get("call_id"), name=fields.get("name"))
    arguments = fields.get("arguments")
    if isinstance(arguments, str) and arguments:
        call["whole"] = arguments


def _done(session: Session, response: Mapping[str, Any]) -> None:
    """``response.done``: the turn's status, usage and output items, and its end."""
    turn = session.turn(_id(response.get("id")))
    turn.answer.streamed = True
    for item in items(response.get("output")):
        if item.get("type") == "function_call":
            _call(turn, item.get("id"), item)
    status = raw_reason(response.get("status"))
    details = obj(response.get("status_details"))
    turn.answer.raw = raw_reason(details.get("reason")) if status == "incomplete" else status
    u = obj(response.get("usage"))
    turn.answer.usage = usage(u.get("input_tokens"), u.get("output_tokens"), u.get("total_tokens"))
    session.end(_id(response.get("id")))


DIALECT: Final = OpenAIRealtime()
