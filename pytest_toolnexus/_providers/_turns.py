"""What the realtime readers share: a WebSocket session read as turns, each one answer.

A realtime session (OpenAI Realtime, Gemini Live) holds many answers on one connection. Each
*turn* (an OpenAI ``response``, a Gemini model turn) is read into its own
:class:`ProviderView`, with ``extra["asked_at"]`` the time of the client frame that preceded
it (what the answer's timing counts from) and ``extra["audio"]`` its audio chunks, decoded,
with their times. The session's view joins them: all the text and its deltas, every tool
call, the usage summed, and the last turn's finish reason; ``extra["turns"]`` holds the
turns' own views. Times are seconds from the moment the handshake was sent.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._answer import Answer, Name, ProviderView, ToolCallView, Usage, ViewError, shown

__all__ = ["Session", "Turn", "either"]


def either(doc: Mapping[str, Any], camel: str, snake: str) -> Any:
    """A field the wire may spell in camelCase (as the API sends it) or snake_case."""
    value = doc.get(camel)
    return doc.get(snake) if value is None else value


def _decoded(data: object) -> bytes:
    if not isinstance(data, str):
        raise ViewError(f"an audio delta holds {shown(data)}, not base64 text")
    return base64.b64decode(data, validate=True)


@dataclass
class Turn:
    """One answer of the session being read: what :class:`Answer` gathers, plus when it was
    asked for, its audio, and the tool calls still being streamed (by item id)."""

    answer: Answer
    asked_at: float | None
    audio: list[tuple[float, bytes]] = field(default_factory=list)
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)

    def hear(self, t: float | None, data: object) -> None:
        """A base64 audio chunk that arrived at ``t``."""
        self.answer.streamed = True
        self.audio.append((t or 0.0, _decoded(data)))

    def calling(self, key: str, **fields: Any) -> dict[str, Any]:
        """The tool call streamed under ``key`` (its item id), with ``fields`` set."""
        call = self.pending.setdefault(key, {"arguments": []})
        call.update({k: v for k, v in fields.items() if v is not None})
        return call

    def view(self, reasons: Mapping[str, str]) -> ProviderView:
        for call in self.pending.values():
            whole = call.get("whole")
            arguments = whole if isinstance(whole, str) else "".join(call["arguments"])
            self.answer.call(call.get("call_id"), call.get("name"), arguments)
        self.pending.clear()
        done = self.answer.done(reasons)
        extra: dict[str, Any] = {**done.extra, "asked_at": self.asked_at}
        if self.audio:
            extra["audio"] = tuple(self.audio)
        return dataclasses.replace(done, streamed=True, extra=extra)


def _total(counts: list[int | None]) -> int | None:
    given = [count for count in counts if count is not None]
    return sum(given) if given else None


class Session:
    """A realtime session being read: its turns in the order they opened, the turn each
    open key (a response id) names, the model, an error the session reported, and the time
    of the client's last frame."""

    def __init__(self, provider: Name) -> None:
        self.provider = provider
        self.turns: list[Turn] = []
        self._open: dict[str | None, Turn] = {}
        self.model: str | None = None
        self.error: str | None = None
        self.asked_at: float | None = None

    def fail(self, problem: str) -> None:
        if self.error is None:
            self.error = problem

    def turn(self, key: str | None = None) -> Turn:
        """The open turn ``key`` names (None: the one opened last), opened now when there
        is none."""
        found = self._open.get(key)
        if found is None and key is not None and None in self._open and len(self._open) == 1:
            found = self._open.pop(None)  # a turn opened without its key learns it
            self._open[key] = found
        if found is None and key is None and self._open:
            found = next(reversed(self._open.values()))
        if found is None:
            found = Turn(Answer(self.provider), self.asked_at)
            found.answer.model = self.model
            self.turns.append(found)
            self._open[key] = found
        return found

    def end(self, key: str | None = None) -> Turn | None:
        """Close the turn ``key`` names (None: the one opened last); the turn, or None."""
        turn = self._open.get(key)
        if turn is None and key is None and self._open:
            key = next(reversed(self._open))
            turn = self._open[key]
        if turn is not None:
            del self._open[key]
        return turn

    def view(self, reasons: Mapping[str, str]) -> ProviderView:
        """The whole session's view; a session with no turn at all reads as an empty answer."""
        for turn in self.turns:
            turn.answer.model = turn.answer.model or self.model
        turns = tuple(turn.view(reasons) for turn in self.turns)
        last = turns[-1] if turns else None
        calls: tuple[ToolCallView, ...] = tuple(c for v in turns for c in v.tool_calls)
        extra: dict[str, Any] = {"turns": turns}
        audio = tuple(chunk for v in turns for chunk in v.extra.get("audio", ()))
        if audio:
            extra["audio"] = audio
        reasoning = "".join(v.extra.get("reasoning", "") for v in turns)
        if reasoning:
            extra["reasoning"] = reasoning
        errors = [v.error for v in turns if v.error is not None]
        return ProviderView(
            self.provider,
            "".join(v.text for v in turns),
            calls,
            None if last is None else last.finish_reason,
            Usage(
                _total([v.usage.input_tokens for v in turns]),
                _total([v.usage.output_tokens for v in turns]),
                _total([v.usage.total_tokens for v in turns]),
            ),
            self.model,
            tuple(d for v in turns for d in v.deltas),
            None if last is None else last.raw_finish_reason,
            True,
            extra,
            self.error if self.error is not None else (errors[0] if errors else None),
        )
