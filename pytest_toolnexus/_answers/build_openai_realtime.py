"""A built OpenAI Realtime session (the GA event names of ``openai.types.realtime``), as the
openai SDK's ``client.realtime.connect(model=...)`` opens it."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from pytest_toolnexus._providers import OPENAI_REALTIME
from pytest_toolnexus._store.cassette import Interaction

from .build_base import DEFAULT_CADENCE, Cadence, ToolCall, pieces, split_text, usage_numbers
from .build_realtime import Frames, RealtimeTurn, pattern, spoken

__all__ = ["OPENAI_REALTIME_URL", "openai_realtime"]

OPENAI_REALTIME_URL: Final = OPENAI_REALTIME.url
_ASKS: Final = ("conversation.item.create", "response.create")
_DELTAS: Final = {
    "audio": "response.output_audio.delta",
    "transcript": "response.output_audio_transcript.delta",
}

Event = Callable[..., dict[str, Any]]


def openai_realtime(
    turns: Iterable[RealtimeTurn],
    *,
    model: str = "gpt-realtime",
    session_update: bool = False,
    usage: Mapping[str, int] | None = None,
    cadence: Cadence = DEFAULT_CADENCE,
    url: str = OPENAI_REALTIME_URL,
) -> Interaction:
    """An OpenAI Realtime session at ``url?model=...``: ``session.created`` on connect; with
    ``session_update``, a ``session.update`` the server answers with ``session.updated``;
    then each turn, asked for by default with a ``conversation.item.create`` (answered with
    ``conversation.item.added``) and a ``response.create``, answered from
    ``response.created`` to ``response.done``."""
    frames = Frames(cadence)
    ids = itertools.count(1)

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
        for ask in _ASKS if turn.asks is None else turn.asks:
            asked = pattern(ask, "type")
            frames.client(asked)
            if asked.get("type") == "conversation.item.create":
                item = {
                    "type": "message",
                    "role": "user",
                    "content": [],
                    **(asked.get("item") or {}),
                }
                item.update(id=f"item_{number:02d}askbuilt", object="realtime.item")
                item["status"] = "completed"
                added = event("conversation.item.added", previous_item_id=previous, item=item)
                frames.server(added)
                previous = item["id"]
        _Response(frames, event, turn, number).answer(usage)
    query = "&" if "?" in url else "?"
    return frames.session(f"{url}{query}model={model}")


class _Response:
    """One response being built: its output items, each announced, filled on the cadence
    from the client's last frame and closed, then ``response.done``."""

    def __init__(self, frames: Frames, event: Event, turn: RealtimeTurn, number: int) -> None:
        self.frames = frames
        self.event = event
        self.turn = turn
        self.number = number
        self.id = f"resp_{number:02d}builtbytoolnexus"
        self.output: list[dict[str, Any]] = []
        self.times: Iterator[float] = iter(())

    def send(self, kind: str, at: float | None = None, **fields: Any) -> None:
        self.frames.server(self.event(kind, response_id=self.id, **fields), at)

    def where(self, item: Mapping[str, Any], **more: Any) -> dict[str, Any]:
        return {"item_id": item["id"], "output_index": len(self.output), **more}

    def item(self, **fields: Any) -> dict[str, Any]:
        item = {
            "id": f"item_{self.number:02d}{len(self.output)}built",
            "object": "realtime.item",
            "status": "in_progress",
            **fields,
        }
        self.send("response.output_item.added", output_index=len(self.output), item=item)
        return item

    def finish(self, item: Mapping[str, Any], **fields: Any) -> None:
        done = {**item, "status": "completed", **fields}
        self.send("response.output_item.done", output_index=len(self.output), item=done)
        self.output.append(done)

    def message(self, audio: bool, text: str, deltas: Sequence[tuple[str, str]]) -> None:
        item = self.item(type="message", role="assistant", content=[])
        part = self.where(item, content_index=0)
        empty = {"type": "audio", "transcript": ""} if audio else {"type": "text", "text": ""}
        self.send("response.content_part.added", **part, part=empty)
        for kind, delta in deltas:
            self.send(kind, next(self.times), **part, delta=delta)
        if audio:
            self.send("response.output_audio.done", **part)
            self.send("response.output_audio_transcript.done", **part, transcript=text)
            full = {"type": "audio", "transcript": text}
            content = {"type": "output_audio", "transcript": text}
        else:
            self.send("response.output_text.done", **part, text=text)
            full = {"type": "text", "text": text}
            content = {"type": "output_text", "text": text}
        self.send("response.content_part.done", **part, part=full)
        self.finish(item, content=[content])

    def call(self, call: ToolCall, index: int, arguments: Sequence[str]) -> None:
        call_id = call.call_id("call_", index)
        item = self.item(type="function_call", call_id=call_id, name=call.name, arguments="")
        where = self.where(item, call_id=call_id)
        for piece in arguments:
            self.send(
                "response.function_call_arguments.delta", next(self.times), **where, delta=piece
            )
        whole = call.arguments_json
        self.send("response.function_call_arguments.done", **where, name=call.name, arguments=whole)
        self.finish(item, arguments=whole)

    def answer(self, usage: Mapping[str, int] | None) -> None:
        turn = self.turn
        deltas = split_text(turn.text)
        sound = [(_DELTAS[kind], piece) for kind, piece in spoken(turn)]
        arguments = [pieces(call.arguments_json, 3) for call in turn.tool_calls]
        count = len(deltas) + len(sound) + sum(map(len, arguments))
        self.times = self.frames.times(turn, count)
        modalities = ["audio"] if turn.audio or turn.transcript else ["text"]
        base = {"id": self.id, "object": "realtime.response", "output_modalities": modalities}
        created = {**base, "status": "in_progress", "output": []}
        self.frames.server(self.event("response.created", response=created))
        if turn.text:
            self.message(False, turn.text, [("response.output_text.delta", d) for d in deltas])
        if sound:
            self.message(True, turn.transcript, sound)
        for index, (call, parts) in enumerate(zip(turn.tool_calls, arguments, strict=True)):
            self.call(call, index, parts)
        prompt, completion = usage_numbers(usage, max(count, 1))
        spent = {
            "total_tokens": prompt + completion,
            "input_tokens": prompt,
            "output_tokens": completion,
        }
        final = {**base, "status": "completed", "output": self.output, "usage": spent}
        self.frames.server(self.event("response.done", response=final))
