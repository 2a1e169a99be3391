"""Built Gemini answers: ``generateContent`` and its SSE stream."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_toolnexus._seam.transport import JSONValue
from pytest_toolnexus._store.cassette import (
    Interaction,
    JsonBody,
    SseBody,
)

from .build_base import (
    DEFAULT_CADENCE,
    GEMINI_BASE,
    JSON_HEADERS,
    SSE_HEADERS,
    Cadence,
    ToolCall,
    built_request,
    built_response,
    split_text,
    sse_event,
    usage_numbers,
)

__all__ = [
    "gemini",
]


# -- Gemini -------------------------------------------------------------------------------------


def gemini(
    text: str = "",
    *,
    tool_calls: Iterable[ToolCall] = (),
    stream: bool = True,
    model: str = "gemini-2.5-flash",
    usage: Mapping[str, int] | None = None,
    cadence: Cadence = DEFAULT_CADENCE,
    base_url: str = GEMINI_BASE,
    request_body: JSONValue | None = None,
) -> Interaction:
    """A Gemini ``generateContent`` answer, or ``streamGenerateContent?alt=sse``: one
    ``GenerateContentResponse`` per event, the last with ``finishReason``."""
    calls = list(tool_calls)
    deltas = split_text(text)
    prompt, completion = usage_numbers(usage, len(deltas) + len(calls))
    usage_doc = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": completion,
        "totalTokenCount": prompt + completion,
    }
    call_parts = [
        {"functionCall": {"name": call.name, "args": call.arguments_value}} for call in calls
    ]

    def response(parts: list[dict[str, Any]], final: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if final:
            candidate["finishReason"] = "STOP"
        doc: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
        doc["usageMetadata"] = usage_doc if final else {"promptTokenCount": prompt}
        return doc

    if not stream:
        parts = ([{"text": text}] if text else []) + call_parts
        end = cadence.times(1)[0]
        return Interaction(
            built_request("POST", f"{base_url}/{model}:generateContent", request_body),
            built_response(200, JSON_HEADERS, JsonBody(response(parts, True)), cadence, end),
        )
    chunks: list[list[dict[str, Any]]] = [[{"text": d}] for d in deltas]
    chunks += [[part] for part in call_parts]
    if not chunks:
        chunks = [[{"text": ""}]]
    times = cadence.times(len(chunks))
    events = [
        sse_event(t, response(parts, i == len(chunks) - 1))
        for i, (t, parts) in enumerate(zip(times, chunks, strict=True))
    ]
    return Interaction(
        built_request("POST", f"{base_url}/{model}:streamGenerateContent?alt=sse", request_body),
        built_response(200, SSE_HEADERS, SseBody(events), cadence, times[-1]),
    )
