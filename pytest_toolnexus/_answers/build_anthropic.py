"""Built Anthropic Messages answers: the typed event stream, or one message."""

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
    ANTHROPIC_URL,
    DEFAULT_CADENCE,
    JSON_HEADERS,
    SSE_HEADERS,
    Cadence,
    ToolCall,
    built_request,
    built_response,
    pieces,
    split_text,
    sse_event,
    usage_numbers,
)

__all__ = [
    "anthropic_messages",
]


# -- Anthropic Messages -------------------------------------------------------------------------


def anthropic_messages(
    text: str = "",
    *,
    tool_calls: Iterable[ToolCall] = (),
    stream: bool = True,
    model: str = "claude-sonnet-4-6",
    usage: Mapping[str, int] | None = None,
    stop_reason: str | None = None,
    ping: bool = True,
    cadence: Cadence = DEFAULT_CADENCE,
    url: str = ANTHROPIC_URL,
    request_body: JSONValue | None = None,
    message_id: str = "msg_builtbytoolnexus",
) -> Interaction:
    """An Anthropic Messages answer: the ``message`` JSON, or its stream of ``message_start``,
    ``content_block_*`` (text and ``tool_use`` with ``input_json_delta``), ``ping``,
    ``message_delta`` and ``message_stop``."""
    calls = list(tool_calls)
    deltas = split_text(text)
    argument_parts = [pieces(call.arguments_json, 3) for call in calls]
    prompt, completion = usage_numbers(usage, len(deltas) + sum(map(len, argument_parts)))
    reason = stop_reason or ("tool_use" if calls else "end_turn")
    blocks: list[dict[str, Any]] = []
    if text:
        blocks.append({"type": "text", "text": text})
    blocks += [
        {
            "type": "tool_use",
            "id": call.call_id("toolu_", i),
            "name": call.name,
            "input": call.arguments_value,
        }
        for i, call in enumerate(calls)
    ]
    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": reason,
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": completion},
    }
    if not stream:
        end = cadence.times(1)[0]
        return Interaction(
            built_request("POST", url, request_body),
            built_response(200, JSON_HEADERS, JsonBody(message), cadence, end),
        )
    plan: list[tuple[str, dict[str, Any], bool]] = []
    start_message = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": prompt, "output_tokens": 1},
    }
    plan.append(("message_start", {"type": "message_start", "message": start_message}, False))
    index = 0
    if text:
        plan.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
                False,
            )
        )
        if ping:
            plan.append(("ping", {"type": "ping"}, False))
        plan += [
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": d},
                },
                True,
            )
            for d in deltas
        ]
        plan.append(("content_block_stop", {"type": "content_block_stop", "index": index}, False))
        index += 1
    for number, (call, parts) in enumerate(zip(calls, argument_parts, strict=True)):
        block = {
            "type": "tool_use",
            "id": call.call_id("toolu_", number),
            "name": call.name,
            "input": {},
        }
        plan.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
                False,
            )
        )
        plan += [
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": p},
                },
                True,
            )
            for p in parts
        ]
        plan.append(("content_block_stop", {"type": "content_block_stop", "index": index}, False))
        index += 1
    plan.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": {"output_tokens": completion},
            },
            False,
        )
    )
    plan.append(("message_stop", {"type": "message_stop"}, False))
    content_count = sum(1 for *_, is_content in plan if is_content)
    times = iter(cadence.times(max(content_count, 1)))
    now = round(cadence.headers * 1000, 3)
    events = []
    for name, data, is_content in plan:
        if is_content:
            now = next(times)
        events.append(sse_event(now, data, name))
    return Interaction(
        built_request("POST", url, request_body),
        built_response(200, SSE_HEADERS, SseBody(events), cadence, now),
    )
