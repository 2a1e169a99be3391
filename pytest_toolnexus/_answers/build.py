"""Building cassettes nobody recorded: provider streams and answers with a chosen cadence.

Each function returns one :class:`Interaction` shaped exactly like what the provider sends, so
the official SDK parses it. The request side matches any body at the provider's URL (the
client's options are not the builder's to guess); pass ``request_body=`` to pin it.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pytest_toolnexus._providers import ANTHROPIC, GEMINI, OLLAMA, OPENAI_CHAT, OPENAI_RESPONSES
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import JSONValue
from pytest_toolnexus._session.faults import error_body
from pytest_toolnexus._store.cassette import (
    AnyBody,
    Body,
    Cassette,
    Interaction,
    JsonBody,
    NdjsonBody,
    RecordedRequest,
    RecordedResponse,
    SseBody,
    TextBody,
)

__all__ = [
    "ANTHROPIC_URL",
    "GEMINI_BASE",
    "OLLAMA_URL",
    "OPENAI_CHAT_URL",
    "OPENAI_RESPONSES_URL",
    "Cadence",
    "ToolCall",
    "anthropic_messages",
    "build_cassette",
    "error",
    "gemini",
    "ollama_chat",
    "openai_chat",
    "openai_responses",
    "split_text",
]

OPENAI_CHAT_URL: Final = OPENAI_CHAT.url
OPENAI_RESPONSES_URL: Final = OPENAI_RESPONSES.url
ANTHROPIC_URL: Final = ANTHROPIC.url
GEMINI_BASE: Final = GEMINI.url
OLLAMA_URL: Final = OLLAMA.url
CREATED: Final = 1_767_225_600  # 2026-01-01T00:00:00Z, so built cassettes are stable
_WORDS: Final = re.compile(r"\s*\S+\s*|\s+")
_SSE: Final = (("content-type", "text/event-stream; charset=utf-8"),)
_JSON: Final = (("content-type", "application/json"),)


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


def _pieces(text: str, parts: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(parts, 1)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _request(method: str, url: str, body: JSONValue | None) -> RecordedRequest:
    stored: Body = AnyBody() if body is None else JsonBody(body)
    return RecordedRequest(method, url, Headers(_JSON), stored)


def _response(
    status: int, headers: Sequence[tuple[str, str]], body: Body, cadence: Cadence, end: float
) -> RecordedResponse:
    t_headers = round(cadence.headers * 1000, 3)
    return RecordedResponse(status, Headers(list(headers)), body, t_headers, max(end, t_headers))


def _event(t: float, data: JSONValue, name: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"t": t}
    if name is not None:
        doc["event"] = name
    doc["data"] = data
    return doc


def _usage_numbers(usage: Mapping[str, int] | None, deltas: int) -> tuple[int, int]:
    usage = usage or {}
    return int(usage.get("input", 12)), int(usage.get("output", max(deltas, 1)))


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
    argument_parts = [_pieces(call.arguments_json, 3) for call in calls]
    prompt, completion = _usage_numbers(usage, len(deltas) + sum(map(len, argument_parts)))
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
            _request("POST", url, request_body),
            _response(200, _JSON, JsonBody(doc), cadence, end),
        )

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return chat_chunk(base, delta, finish, include_usage)

    contents: list[dict[str, Any]] = [{"content": d} for d in deltas]
    for index, (call, parts) in enumerate(zip(calls, argument_parts, strict=True)):
        contents.extend(tool_call_deltas(call, index, parts))
    times = cadence.times(max(len(contents), 1))
    start = round(cadence.headers * 1000, 3)
    events = [_event(start, chunk({"role": "assistant", "content": "", "refusal": None}))]
    events += [_event(t, chunk(delta)) for t, delta in zip(times, contents, strict=False)]
    last = times[-1] if contents else start
    events.append(_event(last, chunk({}, reason)))
    if include_usage:
        events.append(
            _event(
                last, {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage_doc}
            )
        )
    events.append({"t": last, "text": "[DONE]"})
    return Interaction(
        _request("POST", url, request_body),
        _response(200, _SSE, SseBody(events), cadence, last),
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
    argument_parts = [_pieces(call.arguments_json, 3) for call in calls]
    prompt, completion = _usage_numbers(usage, len(deltas) + sum(map(len, argument_parts)))
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
            _request("POST", url, request_body),
            _response(200, _JSON, JsonBody(response("completed", items_done, True)), cadence, end),
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
        events.append(_event(now, {"type": kind, "sequence_number": sequence, **fields}, kind))
    return Interaction(
        _request("POST", url, request_body),
        _response(200, _SSE, SseBody(events), cadence, now),
    )


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
    argument_parts = [_pieces(call.arguments_json, 3) for call in calls]
    prompt, completion = _usage_numbers(usage, len(deltas) + sum(map(len, argument_parts)))
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
            _request("POST", url, request_body),
            _response(200, _JSON, JsonBody(message), cadence, end),
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
        events.append(_event(now, data, name))
    return Interaction(
        _request("POST", url, request_body),
        _response(200, _SSE, SseBody(events), cadence, now),
    )


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
    prompt, completion = _usage_numbers(usage, len(deltas) + len(calls))
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
            _request("POST", f"{base_url}/{model}:generateContent", request_body),
            _response(200, _JSON, JsonBody(response(parts, True)), cadence, end),
        )
    chunks: list[list[dict[str, Any]]] = [[{"text": d}] for d in deltas]
    chunks += [[part] for part in call_parts]
    if not chunks:
        chunks = [[{"text": ""}]]
    times = cadence.times(len(chunks))
    events = [
        _event(t, response(parts, i == len(chunks) - 1))
        for i, (t, parts) in enumerate(zip(times, chunks, strict=True))
    ]
    return Interaction(
        _request("POST", f"{base_url}/{model}:streamGenerateContent?alt=sse", request_body),
        _response(200, _SSE, SseBody(events), cadence, times[-1]),
    )


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
    prompt, completion = _usage_numbers(usage, len(deltas) + len(calls))
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
            _request("POST", url, request_body),
            _response(200, _JSON, JsonBody({**final, "message": message}), cadence, end),
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
        _request("POST", url, request_body),
        _response(
            200,
            (("content-type", OLLAMA.stream_type),),
            NdjsonBody(lines),
            cadence,
            times[-1],
        ),
    )


# -- errors and files ---------------------------------------------------------------------------


def error(
    status: int,
    *,
    url: str = OPENAI_CHAT_URL,
    method: str = "POST",
    retry_after: str | float | None = None,
    html: bool = False,
    message: str | None = None,
    cadence: Cadence = DEFAULT_CADENCE,
    request_body: JSONValue | None = None,
) -> Interaction:
    """An error answer in the provider's own shape (the provider layer's ``error_body`` of the
    dialect ``url`` speaks), or an HTML page."""
    headers: list[tuple[str, str]] = [("content-type", "text/html" if html else "application/json")]
    if retry_after is not None:
        headers.append(("retry-after", str(retry_after)))
    body: Body
    if html:
        body = TextBody(f"<html><body><h1>{status}</h1><p>{message or 'error'}</p></body></html>")
    else:
        body = JsonBody(error_body(status, url, message))
    end = round(cadence.headers * 1000, 3)
    return Interaction(
        _request(method, url, request_body), _response(status, headers, body, cadence, end)
    )


def build_cassette(
    path: str | Path,
    interactions: Iterable[Interaction],
    meta: Mapping[str, Any] | None = None,
    *,
    allow_secrets: Iterable[str] = (),
) -> Cassette:
    """Write ``interactions`` as a cassette at ``path`` (marked as built, not recorded).

    The write is :meth:`Cassette.save`'s: the file is redacted and scanned like a recording,
    and a secret-shaped value raises :class:`SecretFoundError` unless ``allow_secrets`` lists
    it as a known fake."""
    cassette = Cassette(
        Path(path),
        list(interactions),
        {"source": "built with pytest_toolnexus.build, not recorded", **(meta or {})},
    )
    cassette.save(allow_secrets=allow_secrets)
    return cassette
