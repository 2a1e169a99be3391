"""The one shape every dialect's reader gives, and what readers share while they gather it.

The shape and the finish-reason mapping follow ADR 0011: a turn with any tool call the client
must run finishes with ``tool_calls``; otherwise the provider's reason maps onto ``stop``,
``length`` or ``content_filter``. Tools the provider runs itself (web search, code execution,
MCP servers) are not the client's to run: they are in ``extra["server_tool_calls"]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Answer",
    "Name",
    "Piece",
    "ProviderView",
    "ToolCallView",
    "Usage",
    "ViewError",
    "cut",
    "json_text",
    "mappings",
    "shown",
    "usage",
]


Name = Literal[
    "openai",
    "openai-responses",
    "anthropic",
    "gemini",
    "ollama",
    "bedrock",
    "openai-realtime",
    "gemini-live",
]

Piece = tuple[float | None, str | None, Any]
"""One piece of an answer: ``(seconds since the request was sent or None, event name or None,
payload)``. The payload is the parsed JSON of an SSE event, an NDJSON line, an event stream
frame or a whole body, or its text when it is not JSON (``"[DONE]"``). A WebSocket session's
pieces are its frames, both ways: the name is the sender (``"client"`` or ``"server"``) and
the time is from the moment the handshake was sent."""


class ViewError(ValueError):
    """The interaction is not an answer this view understands, or its body is malformed."""


@dataclass(frozen=True, slots=True)
class ToolCallView:
    """One tool call: ``arguments`` is the JSON string, as the OpenAI wire carries it. ``id``
    is the provider's own, or None when it sent none (Gemini often does not)."""

    id: str | None
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts; ``None`` where the provider did not say (absent is not zero)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ProviderView:
    """What the model answered, in one shape. ``deltas`` are ``(seconds, text)`` pairs: when
    each piece of text arrived, from the moment the request was sent (empty for an answer that
    was not streamed). ``error`` is what the answer itself reports as an error inside a 2xx (an
    error event in a stream, a failed response), or None: the text and calls before it are
    still read."""

    provider: Name
    text: str
    tool_calls: tuple[ToolCallView, ...]
    finish_reason: str | None
    usage: Usage
    model: str | None
    deltas: tuple[tuple[float, str], ...] = ()
    raw_finish_reason: str | None = None
    streamed: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None


def cut(text: str, limit: int) -> str:
    """``text`` whole when it fits in ``limit`` characters; else its start and ``...``, so that
    a message never ends mid-value as if that were the whole value."""
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` for a message, cut with :func:`cut`."""
    return cut(repr(value), limit)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage(input_tokens: object, output_tokens: object, total: object = None) -> Usage:
    """A :class:`Usage` from whatever the wire sent; the total is summed when absent."""
    first, second = _int(input_tokens), _int(output_tokens)
    whole = _int(total)
    if whole is None and first is not None and second is not None:
        whole = first + second
    return Usage(first, second, whole)


def json_text(value: object) -> str:
    """Arguments as a JSON string: kept when the wire sent a string, encoded otherwise."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def text_of(value: object) -> str:
    """A text field's value, or empty when the wire sent something that is not a string."""
    return value if isinstance(value, str) else ""


def mappings(
    pieces: Iterable[Piece],
) -> Iterator[tuple[float | None, str | None, Mapping[str, Any]]]:
    """The pieces whose payload is a JSON object (the others are markers or noise)."""
    for t, name, doc in pieces:
        if isinstance(doc, Mapping):
            yield t, name, doc


def items(value: object) -> list[Mapping[str, Any]]:
    """The JSON objects of a list field (absent or null reads as empty). Raises
    :class:`ViewError` for anything else: a client could not read it either."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ViewError(f"a list field holds {type(value).__name__} {shown(value)}")
    for item in value:
        if not isinstance(item, Mapping):
            raise ViewError(f"a list field holds {type(item).__name__} {shown(item)}, not objects")
    return value


def obj(value: object) -> Mapping[str, Any]:
    """A JSON object field (absent or null reads as empty). Raises :class:`ViewError` for
    anything else."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ViewError(f"an object field holds {type(value).__name__} {shown(value)}")
    return value


@dataclass
class Answer:
    """What a reader has gathered so far; :meth:`done` turns it into the view."""

    provider: Name
    text: list[str] = field(default_factory=list)
    deltas: list[tuple[float, str]] = field(default_factory=list)
    calls: list[ToolCallView] = field(default_factory=list)
    server_calls: list[ToolCallView] = field(default_factory=list)
    server_results: list[tuple[str | None, str]] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    redacted_reasoning: int = 0
    raw: str | None = None
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    streamed: bool = False
    error: str | None = None

    def fail(self, problem: str) -> None:
        """An error the answer reports inside a 2xx; the first one is the view's ``error``."""
        if self.error is None:
            self.error = problem

    def say(self, t: float | None, piece: object) -> None:
        """Text that arrived at ``t`` (None: not streamed)."""
        if piece is None:
            piece = ""
        if not isinstance(piece, str):
            raise ViewError(
                f"a text field holds {type(piece).__name__} {shown(piece)}, not a string"
            )
        self.text.append(piece)
        if t is not None:
            self.deltas.append((t, piece))

    def call(self, call_id: object, name: object, arguments: object) -> None:
        """A tool call the client runs; ``arguments`` as a JSON string or a parsed value."""
        self.calls.append(_tool_call(call_id, name, arguments))

    def server_call(self, call_id: object, name: object, arguments: object) -> None:
        """A tool call the provider runs itself (web search, code execution, an MCP server)."""
        self.server_calls.append(_tool_call(call_id, name, arguments))

    def server_result(self, call_id: object, kind: object) -> None:
        """A result block of a server tool: the call it answers and its block type."""
        self.server_results.append((call_id if isinstance(call_id, str) else None, str(kind)))

    def think(self, piece: object) -> None:
        """Reasoning text the provider shows (Anthropic thinking, a Responses summary)."""
        self.reasoning.append(text_of(piece))

    def done(self, reasons: Mapping[str, str], text: str | None = None) -> ProviderView:
        finish = "tool_calls" if self.calls else None
        if finish is None and self.raw is not None:
            finish = reasons.get(self.raw, self.raw)
        extra: dict[str, Any] = {}
        if self.server_calls:
            extra["server_tool_calls"] = tuple(self.server_calls)
        if self.server_results:
            extra["server_tool_results"] = tuple(self.server_results)
        if any(self.reasoning):
            extra["reasoning"] = "".join(self.reasoning)
        if self.redacted_reasoning:
            extra["redacted_reasoning"] = self.redacted_reasoning
        return ProviderView(
            self.provider,
            "".join(self.text) if text is None else text,
            tuple(self.calls),
            finish,
            self.usage,
            self.model,
            tuple(self.deltas),
            self.raw,
            self.streamed,
            extra,
            self.error,
        )


def _tool_call(call_id: object, name: object, arguments: object) -> ToolCallView:
    return ToolCallView(
        call_id if isinstance(call_id, str) and call_id else None,
        name if isinstance(name, str) else "",
        json_text(arguments),
    )


def raw_reason(value: object) -> str | None:
    """A finish reason as the wire sent it, when it is a string."""
    return value if isinstance(value, str) and value else None
