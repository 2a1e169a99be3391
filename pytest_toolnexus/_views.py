"""Provider views: one shape for what a model answered, whichever provider answered it.

A view reads a recorded (or built) interaction of the OpenAI chat-completions or Responses
API, Anthropic Messages, Gemini (SSE and JSON-array streams, or one JSON answer), Ollama
``/api/chat`` (NDJSON or JSON) or Amazon Bedrock's Converse API (``converse``, or
``converse-stream`` as AWS event stream frames), streamed or not, and gives the text, the
tool calls with their ``arguments`` as a JSON string, the finish reason, the usage, the
model, and the text deltas with the time each arrived. The shape and the finish-reason
mapping follow ADR 0011: a turn with any tool call finishes with ``tool_calls``; otherwise
the provider's reason maps onto ``stop``, ``length`` or ``content_filter``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal
from urllib.parse import unquote, urlsplit

from ._cassette import EventStreamBody, Interaction, JsonBody, NdjsonBody, SseBody, TextBody

__all__ = ["Provider", "ProviderView", "ToolCallView", "Usage", "ViewError", "provider_of", "view"]

Provider = Literal["openai", "openai-responses", "anthropic", "gemini", "ollama", "bedrock"]

_BEDROCK_PATH: Final = re.compile(r"/model/([^/]+)/(?:converse|converse-stream)$")
_BEDROCK_REASONS: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "content_filtered": "content_filter",
    "guardrail_intervened": "content_filter",
}

_ANTHROPIC_REASONS: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    "tool_use": "tool_calls",
}
_GEMINI_REASONS: Final = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}


class ViewError(ValueError):
    """The interaction is not an answer this view understands, or its body is malformed."""


@dataclass(frozen=True, slots=True)
class ToolCallView:
    """One tool call: ``arguments`` is the JSON string, as the OpenAI wire carries it."""

    id: str
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
    was not streamed)."""

    provider: Provider
    text: str
    tool_calls: tuple[ToolCallView, ...]
    finish_reason: str | None
    usage: Usage
    model: str | None
    deltas: tuple[tuple[float, str], ...] = ()
    raw_finish_reason: str | None = None
    streamed: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)


def provider_of(url: str) -> Provider | None:
    """The provider whose API a URL belongs to, from its path; None when none matches."""
    path = urlsplit(url).path  # neither the query nor a fragment (``...#stream``) counts
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/responses"):
        return "openai-responses"
    if path.endswith("/messages"):
        return "anthropic"
    if ":generateContent" in path or ":streamGenerateContent" in path:
        return "gemini"
    if path.endswith("/api/chat"):
        return "ollama"
    if _BEDROCK_PATH.search(path):
        return "bedrock"
    return None


def view(interaction: Interaction) -> ProviderView:
    """The provider view of one interaction. Raises :class:`ViewError` when it has no
    successful answer of a known provider, or the answer does not parse."""
    response = interaction.response
    if response is None:
        raise ViewError("the interaction ended in a transport error, with no answer to read")
    if not 200 <= response.status < 300:
        raise ViewError(f"the answer is an HTTP {response.status}, not a model's answer")
    provider = provider_of(interaction.request.url)
    if provider is None:
        raise ViewError(f"no provider view reads {interaction.request.url}")
    try:
        answer = _READERS[provider](_pieces(response.body))
        if provider == "bedrock" and answer.model is None:
            # Bedrock names the model in the URL, not in the answer.
            found = _BEDROCK_PATH.search(urlsplit(interaction.request.url).path)
            answer = replace(answer, model=unquote(found.group(1)) if found else None)
        return answer
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        if isinstance(exc, ViewError):
            raise
        raise ViewError(
            f"the {provider} answer does not parse: {type(exc).__name__}: {exc}"
        ) from exc


def _pieces(body: object) -> Iterator[tuple[float | None, str | None, Any]]:
    """``(t in seconds or None, event name, payload)`` for every piece of a body."""
    if isinstance(body, SseBody):
        for event in body.events:
            if "data" in event:
                payload = event["data"]
            elif "text" in event:
                text = event["text"]
                if text.strip() == "[DONE]":
                    continue
                payload = _maybe_json(text)
            else:
                continue
            yield float(event.get("t", 0.0)) / 1000, event.get("event"), payload
    elif isinstance(body, NdjsonBody):
        for line in body.lines:
            payload = line["value"] if "value" in line else _maybe_json(line.get("text", ""))
            yield float(line.get("t", 0.0)) / 1000, None, payload
    elif isinstance(body, EventStreamBody):
        for frame in body.frames:
            headers = {name: value for name, _, value in frame.get("headers", [])}
            name = headers.get(":event-type")
            if headers.get(":message-type") in ("exception", "error"):
                name = f"exception:{headers.get(':exception-type', headers.get(':error-code'))}"
            payload = frame["payload"] if "payload" in frame else _maybe_json(frame.get("text", ""))
            yield float(frame.get("t", 0.0)) / 1000, name, payload
    elif isinstance(body, JsonBody):
        value = body.value
        # Gemini streams without alt=sse as one JSON array of responses, each element with
        # its arrival time when it came element by element.
        if isinstance(value, list):
            times = body.times or [None] * len(value)
            for t, item in zip(times, value, strict=True):
                yield None if t is None else t / 1000, None, item
        else:
            yield None, None, value
    elif isinstance(body, TextBody):
        yield None, None, _maybe_json(body.text)
    else:
        raise ViewError(f"a {type(body).__name__} holds no model answer")


def _maybe_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(input_tokens: object, output_tokens: object, total: object = None) -> Usage:
    first, second = _int(input_tokens), _int(output_tokens)
    whole = _int(total)
    if whole is None and first is not None and second is not None:
        whole = first + second
    return Usage(first, second, whole)


def _json_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


@dataclass
class _Answer:
    """What a reader has gathered so far; :meth:`done` turns it into the view."""

    provider: Provider
    text: list[str] = field(default_factory=list)
    deltas: list[tuple[float, str]] = field(default_factory=list)
    calls: list[ToolCallView] = field(default_factory=list)
    raw: str | None = None
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    streamed: bool = False

    def say(self, t: float | None, piece: str) -> None:
        """Text that arrived at ``t`` (None: not streamed)."""
        self.text.append(piece)
        if t is not None:
            self.deltas.append((t, piece))

    def call(self, call_id: object, name: object, arguments: object) -> None:
        """A tool call; ``arguments`` as a JSON string or a parsed value."""
        number = len(self.calls)
        self.calls.append(
            ToolCallView(str(call_id or f"call_{number}"), str(name or ""), _json_text(arguments))
        )

    def done(self, reasons: Mapping[str, str], text: str | None = None) -> ProviderView:
        finish = "tool_calls" if self.calls else None
        if finish is None and self.raw is not None:
            finish = reasons.get(self.raw, self.raw)
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
        )


Pieces = Iterator[tuple[float | None, str | None, Any]]


def _maps(pieces: Pieces) -> Iterator[tuple[float | None, str | None, Mapping[str, Any]]]:
    for t, name, doc in pieces:
        if isinstance(doc, Mapping):
            yield t, name, doc


def _openai(pieces: Pieces) -> ProviderView:
    answer = _Answer("openai")
    streamed_calls: dict[int, dict[str, str]] = {}
    for t, _, doc in _maps(pieces):
        if doc.get("error"):
            raise ViewError(f"the stream carries an error: {doc['error']}")
        answer.model = doc.get("model", answer.model)
        if doc.get("usage"):
            u = doc["usage"]
            answer.usage = _usage(
                u.get("prompt_tokens"), u.get("completion_tokens"), u.get("total_tokens")
            )
        for choice in doc.get("choices") or []:
            answer.raw = choice.get("finish_reason") or answer.raw
            if "delta" not in choice:
                message = choice.get("message") or {}
                answer.say(None, message.get("content") or "")
                for call in message.get("tool_calls") or []:
                    function = call.get("function") or {}
                    answer.call(call.get("id"), function.get("name"), function.get("arguments", ""))
                continue
            answer.streamed = True
            delta = choice["delta"] or {}
            if delta.get("content"):
                answer.say(t, delta["content"])
            for call in delta.get("tool_calls") or []:
                empty = {"id": "", "name": "", "args": ""}
                slot = streamed_calls.setdefault(call.get("index", 0), empty)
                function = call.get("function") or {}
                slot["id"] = call.get("id") or slot["id"]
                slot["name"] = function.get("name") or slot["name"]
                slot["args"] += function.get("arguments") or ""
    for _, slot in sorted(streamed_calls.items()):
        answer.call(slot["id"], slot["name"], slot["args"])
    return answer.done({})


_RESPONSES_REASONS: Final = {
    "completed": "stop",
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


def _responses(pieces: Pieces) -> ProviderView:
    answer = _Answer("openai-responses")
    final: Mapping[str, Any] | None = None
    for t, _, doc in _maps(pieces):
        kind = doc.get("type")
        if kind == "response.output_text.delta":
            answer.streamed = True
            answer.say(t, doc.get("delta", ""))
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            answer.streamed = True
            final = doc.get("response")
        elif kind == "error":
            raise ViewError(f"the stream carries an error: {doc.get('message')}")
        elif doc.get("object") == "response":
            final = doc
    if final is None:
        raise ViewError("the Responses answer has no final response object")
    whole: list[str] = []
    for item in final.get("output") or []:
        if item.get("type") == "function_call":
            answer.call(item.get("call_id"), item.get("name"), item.get("arguments", ""))
        elif item.get("type") == "message":
            whole += [
                part.get("text", "")
                for part in item.get("content") or []
                if part.get("type") == "output_text"
            ]
    status = final.get("status")
    details = final.get("incomplete_details") or {}
    answer.raw = details.get("reason") if status == "incomplete" else status
    u = final.get("usage") or {}
    answer.usage = _usage(u.get("input_tokens"), u.get("output_tokens"), u.get("total_tokens"))
    answer.model = final.get("model")
    return answer.done(_RESPONSES_REASONS, "".join(whole) or "".join(answer.text))


def _anthropic(pieces: Pieces) -> ProviderView:
    answer = _Answer("anthropic")
    blocks: dict[int, dict[str, Any]] = {}
    input_tokens: object = None
    output_tokens: object = None
    for t, name, doc in _maps(pieces):
        kind = doc.get("type", name)
        if kind == "error":
            raise ViewError(f"the stream carries an error: {doc.get('error')}")
        if kind == "message":
            answer.model = doc.get("model")
            answer.raw = doc.get("stop_reason")
            usage = doc.get("usage") or {}
            input_tokens, output_tokens = usage.get("input_tokens"), usage.get("output_tokens")
            for index, block in enumerate(doc.get("content") or []):
                if block.get("type") == "text":
                    answer.say(None, block.get("text", ""))
                elif block.get("type") == "tool_use":
                    blocks[index] = {**block, "args": block.get("input", {})}
            continue
        answer.streamed = True
        if kind == "message_start":
            message = doc.get("message") or {}
            answer.model = message.get("model")
            input_tokens = (message.get("usage") or {}).get("input_tokens")
        elif kind == "content_block_start":
            block = doc.get("content_block") or {}
            if block.get("type") == "tool_use":
                blocks[doc.get("index", 0)] = {**block, "args": ""}
        elif kind == "content_block_delta":
            delta = doc.get("delta") or {}
            if delta.get("type") == "text_delta":
                answer.say(t, delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                blocks[doc.get("index", 0)]["args"] += delta.get("partial_json", "")
        elif kind == "message_delta":
            answer.raw = (doc.get("delta") or {}).get("stop_reason") or answer.raw
            output_tokens = (doc.get("usage") or {}).get("output_tokens", output_tokens)
    for _, block in sorted(blocks.items()):
        answer.call(block.get("id"), block.get("name"), block["args"] or "{}")
    answer.usage = _usage(input_tokens, output_tokens)
    return answer.done(_ANTHROPIC_REASONS)


def _gemini(pieces: Pieces) -> ProviderView:
    answer = _Answer("gemini")
    count = 0
    for t, _, doc in _maps(pieces):
        if doc.get("error"):
            raise ViewError(f"the answer carries an error: {doc['error']}")
        count += 1
        answer.model = doc.get("modelVersion", answer.model)
        metadata = doc.get("usageMetadata") or {}
        if "candidatesTokenCount" in metadata or "totalTokenCount" in metadata:
            answer.usage = _usage(
                metadata.get("promptTokenCount"),
                metadata.get("candidatesTokenCount"),
                metadata.get("totalTokenCount"),
            )
        for candidate in (doc.get("candidates") or [])[:1]:
            answer.raw = candidate.get("finishReason") or answer.raw
            for part in (candidate.get("content") or {}).get("parts") or []:
                if "text" in part and not part.get("thought"):
                    answer.say(t, part["text"])
                if "functionCall" in part:
                    call = part["functionCall"]
                    answer.call(call.get("id"), call.get("name"), call.get("args", {}))
    answer.streamed = count > 1 or bool(answer.deltas)
    return answer.done(_GEMINI_REASONS)


def _ollama(pieces: Pieces) -> ProviderView:
    answer = _Answer("ollama")
    lines = 0
    for t, _, doc in _maps(pieces):
        if doc.get("error"):
            raise ViewError(f"the answer carries an error: {doc['error']}")
        lines += 1
        answer.model = doc.get("model", answer.model)
        message = doc.get("message") or {}
        if message.get("content"):
            answer.say(t, message["content"])
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            answer.call(call.get("id"), function.get("name"), function.get("arguments", {}))
        if doc.get("done"):
            answer.raw = doc.get("done_reason") or "stop"
            answer.usage = _usage(doc.get("prompt_eval_count"), doc.get("eval_count"))
    answer.streamed = lines > 1
    return answer.done({})


def _bedrock(pieces: Pieces) -> ProviderView:
    answer = _Answer("bedrock")
    blocks: dict[int, dict[str, Any]] = {}
    for t, name, doc in _maps(pieces):
        if name is not None and name.startswith("exception:"):
            raise ViewError(f"the stream carries an error: {name[10:]}: {doc.get('message')}")
        if name is None:  # converse: one JSON answer
            message = (doc.get("output") or {}).get("message") or {}
            for block in message.get("content") or []:
                if "text" in block:
                    answer.say(None, block["text"])
                elif "toolUse" in block:
                    use = block["toolUse"]
                    answer.call(use.get("toolUseId"), use.get("name"), use.get("input", {}))
            answer.raw = doc.get("stopReason")
        else:
            answer.streamed = True
        if name == "contentBlockStart":
            use = (doc.get("start") or {}).get("toolUse")
            if use:
                blocks[doc.get("contentBlockIndex", 0)] = {**use, "args": ""}
        elif name == "contentBlockDelta":
            delta = doc.get("delta") or {}
            if "text" in delta:
                answer.say(t, delta["text"])
            elif "toolUse" in delta:
                blocks[doc.get("contentBlockIndex", 0)]["args"] += delta["toolUse"].get("input", "")
        elif name == "messageStop":
            answer.raw = doc.get("stopReason")
        usage = doc.get("usage") if name in (None, "metadata") else None
        if usage:
            answer.usage = _usage(
                usage.get("inputTokens"), usage.get("outputTokens"), usage.get("totalTokens")
            )
    for _, block in sorted(blocks.items()):
        answer.call(block.get("toolUseId"), block.get("name"), block["args"] or "{}")
    return answer.done(_BEDROCK_REASONS)


_READERS: Final = {
    "openai": _openai,
    "openai-responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "ollama": _ollama,
    "bedrock": _bedrock,
}
