"""What every provider's builder shares: the cadence of a built stream, a tool call, and the
request, response and event records the builders fill."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pytest_toolnexus._providers import ANTHROPIC, GEMINI, OLLAMA, OPENAI_CHAT, OPENAI_RESPONSES
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import JSONValue
from pytest_toolnexus._store.cassette import (
    AnyBody,
    Body,
    JsonBody,
    RecordedRequest,
    RecordedResponse,
)

__all__ = [
    "ANTHROPIC_URL",
    "CREATED",
    "DEFAULT_CADENCE",
    "GEMINI_BASE",
    "JSON_HEADERS",
    "OLLAMA_URL",
    "OPENAI_CHAT_URL",
    "OPENAI_RESPONSES_URL",
    "SSE_HEADERS",
    "Cadence",
    "ToolCall",
    "built_request",
    "built_response",
    "pieces",
    "split_text",
    "sse_event",
    "usage_numbers",
]

OPENAI_CHAT_URL: Final = OPENAI_CHAT.url
OPENAI_RESPONSES_URL: Final = OPENAI_RESPONSES.url
ANTHROPIC_URL: Final = ANTHROPIC.url
GEMINI_BASE: Final = GEMINI.url
OLLAMA_URL: Final = OLLAMA.url
CREATED: Final = 1_767_225_600  # 2026-01-01T00:00:00Z, so built cassettes are stable
_WORDS: Final = re.compile(r"\s*\S+\s*|\s+")
SSE_HEADERS: Final = (("content-type", "text/event-stream; charset=utf-8"),)
JSON_HEADERS: Final = (("content-type", "application/json"),)


@dataclass(frozen=True, slots=True)
class Cadence:
    """When events arrive, in seconds: the headers at ``headers``, the first content event
    ``ttft`` after the request was sent, then one every ``gap`` give or take ``jitter``
    (uniform, from ``seed``, so the same cadence always gives the same times)."""

    ttft: float = 0.2
    gap: float = 0.05
    jitter: float = 0.0
    seed: int = 0
    headers: float = 0.05

    def times(self, count: int) -> list[float]:
        """Arrival times in ms for ``count`` content events, never decreasing."""
        rng = random.Random(self.seed)
        times: list[float] = []
        t = self.ttft * 1000
        for index in range(count):
            if index:
                t += self.gap * 1000
            wobble = rng.uniform(-self.jitter, self.jitter) * 1000 if self.jitter else 0.0
            at = max(t + wobble, times[-1] if times else self.headers * 1000)
            times.append(round(at, 3))
        return times


DEFAULT_CADENCE: Final = Cadence()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model makes: ``arguments`` is the JSON string (ADR 0011), or a mapping
    that is encoded to one."""

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), separators=(",", ":"))

    @property
    def arguments_value(self) -> dict[str, Any]:
        value = json.loads(self.arguments_json) if self.arguments_json else {}
        if not isinstance(value, dict):
            raise ValueError(f"tool call {self.name!r}: arguments must be a JSON object")
        return value

    def call_id(self, prefix: str, index: int) -> str:
        return self.id or f"{prefix}{index:02d}builtbytoolnexus"


def split_text(text: str) -> list[str]:
    """Text cut into word-sized deltas that join back to exactly ``text``."""
    return _WORDS.findall(text) if text else []


def pieces(text: str, parts: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(parts, 1)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def built_request(method: str, url: str, body: JSONValue | None) -> RecordedRequest:
    stored: Body = AnyBody() if body is None else JsonBody(body)
    return RecordedRequest(method, url, Headers(JSON_HEADERS), stored)


def built_response(
    status: int, headers: Sequence[tuple[str, str]], body: Body, cadence: Cadence, end: float
) -> RecordedResponse:
    t_headers = round(cadence.headers * 1000, 3)
    return RecordedResponse(status, Headers(list(headers)), body, t_headers, max(end, t_headers))


def sse_event(t: float, data: JSONValue, name: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"t": t}
    if name is not None:
        doc["event"] = name
    doc["data"] = data
    return doc


def usage_numbers(usage: Mapping[str, int] | None, deltas: int) -> tuple[int, int]:
    usage = usage or {}
    return int(usage.get("input", 12)), int(usage.get("output", max(deltas, 1)))
