"""Built Ollama answers: ``/api/chat`` as NDJSON lines, or one message."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_toolnexus._providers import OLLAMA
from pytest_toolnexus._seam.transport import JSONValue
from pytest_toolnexus._store.cassette import (
    Interaction,
    JsonBody,
    NdjsonBody,
)

from .build_base import (
    DEFAULT_CADENCE,
    JSON_HEADERS,
    OLLAMA_URL,
    Cadence,
    ToolCall,
    built_request,
    built_response,
    split_text,
    usage_numbers,
)

__all__ = [
    "ollama_chat",
]


# -- Ollama -------------------------------------------------------------------------------------


def ollama_chat(
    text: str = "",
    *,
    tool_calls: Iterable[ToolCall] = (),
    stream: bool = True,
    model: str = "llama3.2",
    usage: Mapping[str, int] | None = None,
    cadence: Cadence = DEFAULT_CADENCE,
    url: str = OLLAMA_URL,
    request_body: JSONValue | None = None,
) -> Interaction:
    """An Ollama ``/api/chat`` answer: one JSON object, or NDJSON lines ending ``done: true``."""
    calls = list(tool_calls)
    deltas = split_text(text)
    prompt, completion = usage_numbers(usage, len(deltas) + len(calls))
    created = "2026-01-01T00:00:00Z"
    tool_docs = [
        {"function": {"name": call.name, "arguments": call.arguments_value}} for call in calls
    ]
    final = {
        "model": model,
        "created_at": created,
        "done": True,
        "done_reason": "stop",
        "total_duration": 1_000_000_000,
        "load_duration": 1_000_000,
        "prompt_eval_count": prompt,
        "prompt_eval_duration": 10_000_000,
        "eval_count": completion,
        "eval_duration": 900_000_000,
    }
    if not stream:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_docs:
            message["tool_calls"] = tool_docs
        end = cadence.times(1)[0]
        return Interaction(
            built_request("POST", url, request_body),
            built_response(
                200, JSON_HEADERS, JsonBody({**final, "message": message}), cadence, end
            ),
        )
    lines_out: list[dict[str, Any]] = [
        {
            "model": model,
            "created_at": created,
            "message": {"role": "assistant", "content": d},
            "done": False,
        }
        for d in deltas
    ]
    if tool_docs:
        lines_out.append(
            {
                "model": model,
                "created_at": created,
                "message": {"role": "assistant", "content": "", "tool_calls": tool_docs},
                "done": False,
            }
        )
    times = cadence.times(len(lines_out) + 1)
    lines_out.append({**final, "message": {"role": "assistant", "content": ""}})
    lines = [{"t": t, "value": v} for t, v in zip(times, lines_out, strict=True)]
    return Interaction(
        built_request("POST", url, request_body),
        built_response(
            200,
            (("content-type", OLLAMA.stream_type),),
            NdjsonBody(lines),
            cadence,
            times[-1],
        ),
    )
