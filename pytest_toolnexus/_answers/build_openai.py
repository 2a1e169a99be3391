"""Built OpenAI answers: chat completions (streamed chunks or one message) and Responses (its
typed event stream or one response object)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_toolnexus._seam.transport import JSONValue
from pytest_toolnexus._store.cassette import (
    Interaction,
    JsonBody,
    SseBody,
)

from .build_base import (
    CREATED,
    DEFAULT_CADENCE,
    JSON_HEADERS,
    OPENAI_CHAT_URL,
    OPENAI_RESPONSES_URL,
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
    "chat_chunk",
    "openai_chat",
    "openai_responses",
    "tool_call_deltas",
]


# -- OpenAI chat completions --------------------------------------------------------------------


def chat_chunk(
    base: Mapping[str, Any], delta: dict[str, Any], finish: str | None, with_usage: bool
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` carrying ``delta``; ``base`` holds id, created, model."""
    doc = {
        **base,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if with_usage:
        doc["usage"] = None
    return doc


def tool_call_deltas(call: ToolCall, index: int, parts: Sequence[str]) -> list[dict[str, Any]]:
    """The chunk deltas of one streamed tool call: its head, then the argument pieces."""
    head = {
        "index": index,
        "id": call.call_id("call_", index),
        "type": "function",
        "function": {"name": call.name, "arguments": ""},
    }
    pieces = [{"tool_calls": [{"index": index, "function": {"arguments": p}}]} for p in parts]
    return [{"tool_calls": [head]}, *pieces]


def openai_chat(
    text: str = "",
    *,
    tool_calls: Iterable[ToolCall] = (),
    stream: bool = True,
    model: str = "gpt-4o-mini",
    usage: Mapping[str, int] | None = None,
    include_usage: bool = True,
    finish_reason: str | None = None,
    cadence: Cadence = DEFAULT_CADENCE,
    url: str = OPENAI_CHAT_URL,
    request_body: JSONValue | None = None,
    completion_id: str = "chatcmpl-builtbytoolnexus",
) -> Interaction:
    """An OpenAI chat completion: a ``chat.completion`` JSON, or its SSE stream of
    ``chat.completion.chunk`` deltas, tool-call deltas, a usage chunk and ``[DONE]``."""
    calls = list(tool_calls)
    deltas = split_text(text)
    argument_parts = [pieces(call.arguments_json, 3) for call in calls]
    prompt, completion = usage_numbers(usage, len(deltas) + sum(map(len, argument_parts)))
    usage_doc = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    reason = finish_reason or ("tool_calls" if calls else "stop")
    base = {"id": completion_id, "created": CREATED, "model": model}
    if not stream:
        message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": call.call_id("call_", i),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
                for i, call in enumerate(calls)
            ]
        doc = {
            **base,
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": reason}
            ],
            "usage": usage_doc,
        }
        end = cadence.times(1)[0]
        return Interaction(
            built_request("POST", url, request_body),
            built_response(200, JSON_HEADERS, JsonBody(doc), cadence, end),
        )

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return chat_chunk(base, delta, finish, include_usage)

    contents: list[dict[str, Any]] = [{"content": d} for d in deltas]
    for index, (call, parts) in enumerate(zip(calls, argument_parts, strict=True)):
        contents.extend(tool_call_deltas(call, index, parts))
    times = cadence.times(max(len(contents), 1))
    start = round(cadence.headers * 1000, 3)
    events = [sse_event(start, chunk({"role": "assistant", "content": "", "refusal": None}))]
    events += [sse_event(t, chunk(delta)) for t, delta in zip(times, contents, strict=False)]
    last = times[-1] if contents else start
    events.append(sse_event(last, chunk({}, reason)))
    if include_usage:
        events.append(
            sse_event(
                last, {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage_doc}
            )
        )
    events.append({"t": last, "text": "[DONE]"})
    return Interaction(
        built_request("POST", url, request_body),
        built_response(200, SSE_HEADERS, SseBody(events), cadence, last),
    )


# -- OpenAI Responses ---------------------------------------------------------------------------


def openai_responses(
    text: str = "",
    *,
    tool_calls: Iterable[ToolCall] = (),
    stream: bool = True,
    model: str = "gpt-4o-mini",
    usage: Mapping[str, int] | None = None,
    cadence: Cadence = DEFAULT_CADENCE,
    url: str = OPENAI_RESPONSES_URL,
    request_body: JSONValue | None = None,
    response_id: str = "resp_builtbytoolnexus",
) -> Interaction:
    """An OpenAI Responses API answer: the ``response`` JSON, or its event stream from
    ``response.created`` to ``response.completed``."""
    calls = list(tool_calls)
    deltas = split_text(text)
    argument_parts = [pieces(call.arguments_json, 3) for call in calls]
    prompt, completion = usage_numbers(usage, len(deltas) + sum(map(len, argument_parts)))
    usage_doc = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }

    def text_part(value: str) -> dict[str, Any]:
        return {"type": "output_text", "annotations": [], "logprobs": [], "text": value}

    message_id = f"msg_{response_id}"
    items_done: list[dict[str, Any]] = []
    if text or not calls:
        items_done.append(
            {
                "id": message_id,
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [text_part(text)],
            }
        )
    for index, call in enumerate(calls):
        items_done.append(
            {
                "id": f"fc_{index:02d}{response_id}",
                "type": "function_call",
                "status": "completed",
                "call_id": call.call_id("call_", index),
                "name": call.name,
                "arguments": call.arguments_json,
            }
        )

    def response(status: str, output: list[dict[str, Any]], final: bool) -> dict[str, Any]:
        return {
            "id": response_id,
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "model": model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "temperature": 1.0,
            "top_p": 1.0,
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "usage": usage_doc if final else None,
            "metadata": {},
        }

    if not stream:
        end = cadence.times(1)[0]
        return Interaction(
            built_request("POST", url, request_body),
            built_response(
                200, JSON_HEADERS, JsonBody(response("completed", items_done, True)), cadence, end
            ),
        )

    plan: list[tuple[str, dict[str, Any], bool]] = []  # (type, fields, is_content)
    plan.append(("response.created", {"response": response("in_progress", [], False)}, False))
    plan.append(("response.in_progress", {"response": response("in_progress", [], False)}, False))
    for output_index, done in enumerate(items_done):
        where = {"item_id": done["id"], "output_index": output_index}
        if done["type"] == "message":
            added = {**done, "status": "in_progress", "content": []}
            plan.append(
                ("response.output_item.added", {"output_index": output_index, "item": added}, False)
            )
            part_where = {**where, "content_index": 0}
            plan.append(
                ("response.content_part.added", {**part_where, "part": text_part("")}, False)
            )
            plan += [
                ("response.output_text.delta", {**part_where, "delta": d, "logprobs": []}, True)
                for d in deltas
            ]
            plan.append(
                ("response.output_text.done", {**part_where, "text": text, "logprobs": []}, False)
            )
            plan.append(
                ("response.content_part.done", {**part_where, "part": text_part(text)}, False)
            )
        else:
            added = {**done, "status": "in_progress", "arguments": ""}
            plan.append(
                ("response.output_item.added", {"output_index": output_index, "item": added}, False)
            )
            parts = argument_parts[output_index - (1 if text or not calls else 0)]
            plan += [
                ("response.function_call_arguments.delta", {**where, "delta": p}, True)
                for p in parts
            ]
            plan.append(
                (
                    "response.function_call_arguments.done",
                    {**where, "name": done["name"], "arguments": done["arguments"]},
                    False,
                )
            )
        plan.append(
            ("response.output_item.done", {"output_index": output_index, "item": done}, False)
        )
    plan.append(
        ("response.completed", {"response": response("completed", items_done, True)}, False)
    )
    content_count = sum(1 for *_, is_content in plan if is_content)
    times = iter(cadence.times(max(content_count, 1)))
    now = round(cadence.headers * 1000, 3)
    events = []
    for sequence, (kind, fields, is_content) in enumerate(plan):
        if is_content:
            now = next(times)
        events.append(sse_event(now, {"type": kind, "sequence_number": sequence, **fields}, kind))
    return Interaction(
        built_request("POST", url, request_body),
        built_response(200, SSE_HEADERS, SseBody(events), cadence, now),
    )
