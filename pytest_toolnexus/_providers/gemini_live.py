"""The Gemini Live API (``BidiGenerateContent`` over a WebSocket, on the Gemini API or Vertex
AI; google-genai's ``client.aio.live.connect(...)``), read from its server messages.

A model turn is the ``serverContent`` messages up to ``turnComplete`` (or ``interrupted``,
a barge-in): the ``modelTurn.parts`` give its text (a ``thought`` part is reasoning), its
audio (``inlineData`` with an ``audio/*`` MIME type, base64) and any ``functionCall``;
``outputTranscription`` gives the audio's transcript, read as text. A ``toolCall`` message
ends its turn with the calls the client must run (Gemini Live sends no ``turnComplete`` until
the client answers). ``usageMetadata`` gives the turn's usage; the client's ``setup`` names
the model. The server sends camelCase field names; snake_case reads the same. Messages may
come as binary frames of JSON, as the Gemini API sends them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._answer import Name, Piece, ProviderView, items, mappings, obj, usage
from ._protocol import WireRequest
from ._turns import Session, Turn, either
from .gemini import DIALECT as GEMINI

__all__ = ["DIALECT", "GeminiLive"]

_REASONS: Final = {"turnComplete": "stop"}


@dataclass(frozen=True, slots=True)
class GeminiLive:
    name: Name = "gemini-live"
    url: str = (
        "wss://generativelanguage.googleapis.com//ws/"
        "google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent"
    )
    stream_type: str = "application/json"

    def claims(self, request: WireRequest) -> bool:
        return request.method == "GET" and "BidiGenerateContent" in request.path

    def streams(self, request: WireRequest) -> bool:
        return False  # a WebSocket session, not an HTTP stream

    def ends(self, event: str | None, payload: object) -> bool:
        return False

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return GEMINI.error_body(status, message)

    def error_event(self, message: str) -> bytes | None:
        return None  # Gemini Live reports errors by closing the connection with a reason

    def stream_error(self, event: str | None, payload: object) -> str | None:
        if event == "client":
            return None
        return GEMINI.stream_error(None, payload)

    def read(self, pieces: Iterable[Piece], request: WireRequest) -> ProviderView:
        session = Session(self.name)
        for t, sender, doc in mappings(pieces):
            if sender == "client":
                session.asked_at = t
                model = obj(doc.get("setup")).get("model")
                if isinstance(model, str) and model:
                    session.model = model.rsplit("/", 1)[-1]
                continue
            problem = self.stream_error(sender, doc)
            if problem is not None:
                session.fail(problem)
            content = obj(either(doc, "serverContent", "server_content"))
            if content:
                _content(session, t, content)
            calls = obj(either(doc, "toolCall", "tool_call"))
            if calls:
                turn = session.turn()
                for call in items(either(calls, "functionCalls", "function_calls")):
                    turn.answer.call(call.get("id"), call.get("name"), call.get("args", {}))
                session.end()
            metadata = obj(either(doc, "usageMetadata", "usage_metadata"))
            if metadata and session.turns:
                session.turns[-1].answer.usage = usage(
                    either(metadata, "promptTokenCount", "prompt_token_count"),
                    either(metadata, "responseTokenCount", "response_token_count"),
                    either(metadata, "totalTokenCount", "total_token_count"),
                )
        return session.view(_REASONS)


def _content(session: Session, t: float | None, content: Mapping[str, Any]) -> None:
    """One ``serverContent`` message: parts, transcription, and the end of the turn."""
    turn: Turn | None = None
    model_turn = obj(either(content, "modelTurn", "model_turn"))
    for part in items(model_turn.get("parts")):
        turn = turn or session.turn()
        _part(turn, t, part)
    transcript = obj(either(content, "outputTranscription", "output_transcription"))
    if "text" in transcript:
        turn = turn or session.turn()
        turn.answer.say(t, transcript["text"])
    interrupted = content.get("interrupted") is True
    if interrupted or either(content, "turnComplete", "turn_complete") is True:
        turn = turn or session.turn()
        turn.answer.streamed = True
        reason = either(content, "turnCompleteReason", "turn_complete_reason")
        if interrupted:
            turn.answer.raw = "interrupted"
        else:
            turn.answer.raw = reason if isinstance(reason, str) and reason else "turnComplete"
        session.end()


def _part(turn: Turn, t: float | None, part: Mapping[str, Any]) -> None:
    turn.answer.streamed = True
    if "text" in part:
        if part.get("thought"):
            turn.answer.think(part["text"])
        else:
            turn.answer.say(t, part["text"])
    blob = obj(either(part, "inlineData", "inline_data"))
    mime = either(blob, "mimeType", "mime_type")
    if isinstance(mime, str) and mime.startswith("audio/"):
        turn.hear(t, blob.get("data"))
    call = obj(either(part, "functionCall", "function_call"))
    if call:
        turn.answer.call(call.get("id"), call.get("name"), call.get("args", {}))


DIALECT: Final = GeminiLive()
