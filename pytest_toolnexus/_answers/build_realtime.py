"""Built realtime sessions: an OpenAI Realtime or Gemini Live WebSocket session nobody
recorded, one interaction whose 101 answer holds every frame both ways.

A session is a list of :class:`RealtimeTurn`: what the client sends (``asks``, stored as
*patterns*: a client frame matches when it holds what the pattern holds, so
``"response.create"`` matches any ``{"type": "response.create", ...}``) and what the model
answers (text, audio chunks with their transcript, tool calls). Replay releases each answer
on the cadence counted from the client's last frame of its turn (the causal release of
docs/realtime.md): acknowledgements and an answer's opening events at once, its content
events ``ttft`` after, then one every ``gap``, and its closing events with the last content
event. The client's frames are stamped as sent the moment the turn before was over, so a
client that answers at once gets every event at exactly its built time.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pytest_toolnexus._providers import GEMINI_LIVE, OPENAI_REALTIME
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._store.cassette import (
    EmptyBody,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    WebSocketBody,
)
from pytest_toolnexus._store.ws_frames import frame_doc, message_of

from .build_base import DEFAULT_CADENCE, Cadence, ToolCall, pieces, split_text, usage_numbers

__all__ = [
    "GEMINI_LIVE_URL",
    "OPENAI_REALTIME_URL",
    "RealtimeTurn",
    "gemini_live",
    "openai_realtime",
]

OPENAI_REALTIME_URL: Final = OPENAI_REALTIME.url
GEMINI_LIVE_URL: Final = GEMINI_LIVE.url
"""The URL google-genai (3.x) opens for ``client.aio.live.connect`` on the Gemini API, its
doubled slash included."""
_AUDIO_MIME: Final = "audio/pcm;rate=24000"


@dataclass(frozen=True, slots=True)
class RealtimeTurn:
    """One answer of a built session and what the client sends to ask for it.

    ``asks`` are the client's frames before the answer, each an event type (OpenAI: a
    ``"type"``; Gemini: the message's one key, such as ``"client_content"``) or a mapping the
    frame must hold; None gives the provider's usual ones (below). ``audio`` are raw chunks,
    sent base64 encoded, with ``transcript`` their text. ``cadence`` overrides the session's
    for this turn."""

    text: str = ""
    audio: Sequence[bytes] = ()
    transcript: str = ""
    tool_calls: Sequence[ToolCall] = ()
    asks: Sequence[str | Mapping[str, Any]] | None = None
    cadence: Cadence | None = None


class _Frames:
    """The frames of a session being built, in order, with the time now."""

    def __init__(self) -> None:
        self.docs: list[dict[str, Any]] = []
        self.now = 0.0

    def client(self, pattern: Mapping[str, Any]) -> None:
        doc = frame_doc(self.now, "client", message_of(dict(pattern)))
        self.docs.append({**doc, "pattern": True})

    def server(self, value: Mapping[str, Any], t: float | None = None) -> None:
        self.now = self.now if t is None else max(t, self.now)
        self.docs.append(frame_doc(self.now, "server", message_of(dict(value))))

    def close(self) -> None:
        self.docs.append(frame_doc(self.now, "client", None, code=1000))


def _session(
    url: str, headers: Sequence[tuple[str, str]], frames: _Frames, at: float
) -> Interaction:
    request = RecordedRequest("GET", url, Headers(), EmptyBody())
    upgrade = Headers([("Upgrade", "websocket"), ("Connection", "Upgrade"), *headers])
    response = RecordedResponse(101, upgrade, WebSocketBody(frames.docs), at, frames.now)
    return Interaction(request, response)


def _pattern(ask: str | Mapping[str, Any], key: str | None) -> Mapping[str, Any]:
    if isinstance(ask, Mapping):
        return ask
    return {key: ask} if key is not None else {ask: {}}


def _content_times(
    turn: RealtimeTurn, cadence: Cadence, start: float, count: int
) -> Iterator[float]:
    chosen = turn.cadence or cadence
    return iter([round(start + t, 3) for t in chosen.times(max(count, 1))])


# -- OpenAI Realtime --------------------------------------------------------------------------


def openai_realtime(
    turns: Iterable[RealtimeTurn],
    *,
    model: str = "gpt-realtime",
    session_update: bool = False,
    usage: Mapping[str, int] | None = None,
    cadence: Cadence = DEFAULT_CADENCE,
    url: str = OPENAI_REALTIME_URL,
) -> Interaction:
    """An OpenAI Realtime session (the GA event names of ``openai.types.realtime``) as
    ``client.realtime.connect(model=model)`` opens it at ``url?model=...``:
    ``session.created`` on connect; with ``session_update``, a ``session.update`` the server
    answers with ``session.updated``; then each turn, asked for by default with a
    ``conversation.item.create`` (answered with ``conversation.item.added``) and a
    ``response.create``, answered from ``response.created`` to ``response.done``."""
    frames = _Frames()
    ids = itertools.count(1)
    at = round(cadence.headers * 1000, 3)
    frames.now = at

    def event(kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "event_id": f"event_{next(ids):04d}built", **fields}

    session = {
        "type": "realtime",
        "object": "realtime.session",
        "id": "sess_builtbytoolnexus",
        "model": model,
    }
    frames.server(event("session.created", session=session))
    if session_update:
        frames.client({"type": "session.update"})
        frames.server(event("session.updated", session=session))
    previous: str | None = None
    for number, turn in enumerate(turns):
        asks = ("conversation.item.create", "response.create") if turn.asks is None else turn.asks
        for ask in asks:
            pattern = _pattern(ask, "type")
            frames.client(pattern)
            if pattern.get("type") == "conversation.item.create":
                item = {
                    "type": "message",
                    "role": "user",
                    "content": [],
                    **dict(pattern.get("item") or {}),
                }
                item.update(id=f"item_{number:02d}askbuilt", object="realtime.item")
                item["status"] = "completed"
                frames.server(
                    event("conversation.item.added", previous_item_id=previous, item=item)
                )
                previous = item["id"]
        _openai_answer(frames, event, turn, number, cadence, usage)
    frames.close()
    query = "&" if "?" in url else "?"
    return _session(f"{url}{query}model={model}", (), frames, at)


def _openai_answer(
    frames: _Frames,
    event: Any,
    turn: RealtimeTurn,
    number: int,
    cadence: Cadence,
    usage: Mapping[str, int] | None,
) -> None:
    """One response: its events, its content on the cadence from the client's last frame."""
    response_id = f"resp_{number:02d}builtbytoolnexus"
    deltas = split_text(turn.text)
    said = split_text(turn.transcript)
    arguments = [pieces(call.arguments_json, 3) for call in turn.tool_calls]
    count = len(deltas) + len(turn.audio) + len(said) + sum(map(len, arguments))
    times = _content_times(turn, cadence, frames.now, count)
    modalities = ["audio"] if turn.audio or turn.transcript else ["text"]
    base = {"id": response_id, "object": "realtime.response", "output_modalities": modalities}
    frames.server(
        event("response.created", response={**base, "status": "in_progress", "output": []})
    )
    output: list[dict[str, Any]] = []

    def where(item: Mapping[str, Any], **more: Any) -> dict[str, Any]:
        return {
            "response_id": response_id,
            "item_id": item["id"],
            "output_index": len(output),
            **more,
        }

    def message(kind: str, text: str, parts: Sequence[Any]) -> None:
        item = {
            "id": f"item_{number:02d}{len(output)}built",
            "object": "realtime.item",
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        frames.server(
            event(
                "response.output_item.added",
                response_id=response_id,
                output_index=len(output),
                item=item,
            )
        )
        audio = kind == "audio"
        empty = {"type": "audio", "transcript": ""} if audio else {"type": "text", "text": ""}
        frames.server(
            event("response.content_part.added", **where(item, content_index=0), part=empty)
        )
        for part in parts:
            frames.server(
                event(part[0], **where(item, content_index=0), delta=part[1]), next(times)
            )
        if audio:
            frames.server(event("response.output_audio.done", **where(item, content_index=0)))
            frames.server(
                event(
                    "response.output_audio_transcript.done",
                    **where(item, content_index=0),
                    transcript=text,
                )
            )
            full = {"type": "audio", "transcript": text}
            content = {"type": "output_audio", "transcript": text}
        else:
            frames.server(
                event("response.output_text.done", **where(item, content_index=0), text=text)
            )
            full = {"type": "text", "text": text}
            content = {"type": "output_text", "text": text}
        frames.server(
            event("response.content_part.done", **where(item, content_index=0), part=full)
        )
        done = {**item, "status": "completed", "content": [content]}
        frames.server(
            event(
                "response.output_item.done",
                response_id=response_id,
                output_index=len(output),
                item=done,
            )
        )
        output.append(done)

    if turn.text:
        message("text", turn.text, [("response.output_text.delta", d) for d in deltas])
    if turn.audio or turn.transcript:
        chunks = [base64.b64encode(bytes(chunk)).decode() for chunk in turn.audio]
        parts: list[tuple[str, str]] = []
        for chunk, text in itertools.zip_longest(chunks, said):
            if chunk is not None:
                parts.append(("response.output_audio.delta", chunk))
            if text is not None:
                parts.append(("response.output_audio_transcript.delta", text))
        message("audio", turn.transcript, parts)
    for index, (call, args) in enumerate(zip(turn.tool_calls, arguments, strict=True)):
        item = {
            "id": f"item_{number:02d}{len(output)}built",
            "object": "realtime.item",
            "type": "function_call",
            "status": "in_progress",
            "call_id": call.call_id("call_", index),
            "name": call.name,
            "arguments": "",
        }
        frames.server(
            event(
                "response.output_item.added",
                response_id=response_id,
                output_index=len(output),
                item=item,
            )
        )
        for piece in args:
            frames.server(
                event(
                    "response.function_call_arguments.delta",
                    **where(item),
                    call_id=item["call_id"],
                    delta=piece,
                ),
                next(times),
            )
        frames.server(
            event(
                "response.function_call_arguments.done",
                **where(item),
                call_id=item["call_id"],
                name=call.name,
                arguments=call.arguments_json,
            )
        )
        done = {**item, "status": "completed", "arguments": call.arguments_json}
        frames.server(
            event(
                "response.output_item.done",
                response_id=response_id,
                output_index=len(output),
                item=done,
            )
        )
        output.append(done)
    prompt, completion = usage_numbers(usage, max(count, 1))
    spent = {
        "total_tokens": prompt + completion,
        "input_tokens": prompt,
        "output_tokens": completion,
    }
    final = {**base, "status": "completed", "output": output, "usage": spent}
    frames.server(event("response.done", response=final))


# -- Gemini Live ------------------------------------------------------------------------------


def gemini_live(
    turns: Iterable[RealtimeTurn],
    *,
    model: str | None = None,
    usage: Mapping[str, int] | None = None,
    cadence: Cadence = DEFAULT_CADENCE,
    url: str = GEMINI_LIVE_URL,
) -> Interaction:
    """A Gemini Live session (``BidiGenerateContent``, the field names of ai.google.dev/api/live)
    as google-genai's ``client.aio.live.connect`` opens it: its ``setup`` answered with
    ``setupComplete``, then each turn, asked for by default with a ``client_content`` (a
    ``tool_response`` after a turn of tool calls, as the SDK spells them), answered as
    ``serverContent.modelTurn.parts`` (a text part per word, an ``inlineData`` audio part
    per chunk, ``outputTranscription`` for the transcript) ending in ``generationComplete``
    and ``turnComplete`` with ``usageMetadata``, or as one ``toolCall``. ``model`` pins the
    setup's model (``"gemini-live-2.5-flash"`` matches the SDK's ``models/...``); None lets
    any setup through."""
    frames = _Frames()
    at = round(cadence.headers * 1000, 3)
    frames.now = at
    setup = {} if model is None else {"model": f"models/{model.removeprefix('models/')}"}
    frames.client({"setup": setup})
    frames.server({"setupComplete": {}})
    called = False
    for turn in turns:
        usual = ("tool_response",) if called else ("client_content",)
        for ask in usual if turn.asks is None else turn.asks:
            frames.client(_pattern(ask, None))
        called = bool(turn.tool_calls)
        _gemini_answer(frames, turn, cadence, usage)
    frames.close()
    return _session(url, (), frames, at)


def _gemini_answer(
    frames: _Frames, turn: RealtimeTurn, cadence: Cadence, usage: Mapping[str, int] | None
) -> None:
    deltas = split_text(turn.text)
    said = split_text(turn.transcript)
    count = len(deltas) + len(turn.audio) + len(said) + (1 if turn.tool_calls else 0)
    times = _content_times(turn, cadence, frames.now, count)

    def content(**fields: Any) -> dict[str, Any]:
        return {"serverContent": fields}

    for delta in deltas:
        frames.server(content(modelTurn={"role": "model", "parts": [{"text": delta}]}), next(times))
    chunks = [base64.b64encode(bytes(chunk)).decode() for chunk in turn.audio]
    for chunk, text in itertools.zip_longest(chunks, said):
        if chunk is not None:
            blob = {"inlineData": {"mimeType": _AUDIO_MIME, "data": chunk}}
            frames.server(content(modelTurn={"role": "model", "parts": [blob]}), next(times))
        if text is not None:
            frames.server(content(outputTranscription={"text": text}), next(times))
    if turn.tool_calls:
        calls = [
            {"id": call.call_id("call_", index), "name": call.name, "args": call.arguments_value}
            for index, call in enumerate(turn.tool_calls)
        ]
        frames.server({"toolCall": {"functionCalls": calls}}, next(times))
        return
    prompt, completion = usage_numbers(usage, max(count, 1))
    frames.server(content(generationComplete=True))
    spent = {
        "promptTokenCount": prompt,
        "responseTokenCount": completion,
        "totalTokenCount": prompt + completion,
    }
    frames.server({**content(turnComplete=True), "usageMetadata": spent})
