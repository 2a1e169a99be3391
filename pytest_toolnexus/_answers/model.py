"""An in-process model behind the seam: a Python function plays the model (ADR 0019).

The transport answers OpenAI chat-completions requests. It hands the function the request's
OpenAI-shaped ``messages`` (and ``tools``), and turns what it returns into exactly what the
OpenAI API would send: a ``chat.completion``, or a stream of chunks released on a cadence.
With the virtual clock the cadence costs no wall time.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import anyio

from pytest_toolnexus._providers import OPENAI_CHAT, provider_of
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import (
    AsyncByteStream,
    ByteStream,
    TransportRequest,
    TransportResponse,
)

from .build import (
    CREATED,
    DEFAULT_CADENCE,
    Cadence,
    ToolCall,
    chat_chunk,
    split_text,
    tool_call_deltas,
)

__all__ = ["ModelReply", "ModelTransport", "ModelTurn", "Turn"]

Piece: TypeAlias = str | ToolCall
ModelReply: TypeAlias = str | ToolCall | Mapping[str, Any] | Iterable[Piece]
"""What the model function returns: text, a tool call, an OpenAI ``message`` mapping, or an
iterable (a generator streams lazily) of text deltas and tool calls."""

_SSE: Final = Headers([("content-type", "text/event-stream; charset=utf-8")])
_JSON: Final = Headers([("content-type", "application/json")])


@dataclass(frozen=True, slots=True)
class Turn:
    """What the model is asked: the OpenAI-shaped ``messages`` and ``tools``, and the whole
    request body."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    body: dict[str, Any]


ModelTurn = Turn
"""The name the package exports :class:`Turn` under (``pytest_toolnexus.ModelTurn``)."""


def _pieces_of(reply: ModelReply) -> Iterator[Piece]:
    if isinstance(reply, str):
        yield from split_text(reply)
    elif isinstance(reply, ToolCall):
        yield reply
    elif isinstance(reply, Mapping):
        content = reply.get("content")
        if isinstance(content, str):
            yield from split_text(content)
        for call in reply.get("tool_calls") or []:
            function = call.get("function", {})
            yield ToolCall(
                function.get("name", ""), function.get("arguments", "{}"), call.get("id")
            )
    else:
        for piece in reply:
            if not isinstance(piece, str | ToolCall):
                raise TypeError(
                    f"a model function yielded {type(piece).__name__}; yield text or ToolCall"
                )
            yield piece


def _problem(status: int, message: str) -> TransportResponse:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return TransportResponse(status, _JSON, body)


class _Conversation:
    """One request's translation: OpenAI request in, OpenAI chunks and completion out."""

    def __init__(self, request: TransportRequest, model: str, count: int) -> None:
        body = request.body if isinstance(request.body, dict) else {}
        self.body = body
        self.stream = bool(body.get("stream"))
        self.with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.base = {
            "id": f"chatcmpl-inprocess{count:04d}",
            "created": CREATED,
            "model": str(body.get("model") or model),
        }
        self.text = ""
        self.calls: list[ToolCall] = []
        self.deltas = 0

    def turn(self) -> Turn:
        messages = self.body.get("messages")
        tools = self.body.get("tools")
        return Turn(
            list(messages) if isinstance(messages, list) else [],
            list(tools) if isinstance(tools, list) else [],
            self.body,
        )

    def chunks_for(self, piece: Piece) -> list[bytes]:
        self.deltas += 1
        if isinstance(piece, str):
            self.text += piece
            deltas = [{"content": piece}]
        else:
            self.calls.append(piece)
            deltas = tool_call_deltas(piece, len(self.calls) - 1, [piece.arguments_json])
        return [_sse(chat_chunk(self.base, d, None, self.with_usage)) for d in deltas]

    def opening(self) -> bytes:
        delta = {"role": "assistant", "content": "", "refusal": None}
        return _sse(chat_chunk(self.base, delta, None, self.with_usage))

    def closing(self) -> bytes:
        reason = "tool_calls" if self.calls else "stop"
        parts = [_sse(chat_chunk(self.base, {}, reason, self.with_usage))]
        if self.with_usage:
            usage = self.usage()
            parts.append(
                _sse(
                    {**self.base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
                )
            )
        parts.append(b"data: [DONE]\n\n")
        return b"".join(parts)

    def usage(self) -> dict[str, int]:
        prompt = len(json.dumps(self.body.get("messages", []))) // 4 + 1
        return {
            "prompt_tokens": prompt,
            "completion_tokens": self.deltas,
            "total_tokens": prompt + self.deltas,
        }

    def completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.text or None,
            "refusal": None,
        }
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": c.call_id("call_", i),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments_json},
                }
                for i, c in enumerate(self.calls)
            ]
        reason = "tool_calls" if self.calls else "stop"
        return {
            **self.base,
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": reason}
            ],
            "usage": self.usage(),
        }


def _sse(doc: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(doc, separators=(',', ':'))}\n\n".encode()


def _check(request: TransportRequest) -> TransportResponse | None:
    if provider_of(request.method, request.url, request.headers) is not OPENAI_CHAT:
        return _problem(
            404,
            f"the in-process model answers POST .../chat/completions, not "
            f"{request.method} {request.url}",
        )
    if not isinstance(request.body, dict) or not isinstance(request.body.get("messages"), list):
        return _problem(400, "the request body must be a JSON object with a messages list")
    return None


class ModelTransport:
    """A seam transport, sync and async (a :class:`~pytest_toolnexus.DualTransport`), whose
    answers come from ``model(turn)``.

    ``model`` receives a :class:`Turn` and returns a :data:`ModelReply`. Calling the transport
    serves sync code, ``await transport.acall(request)`` async code, and ``HTTPBridge(transport)``
    both. From async code ``model`` may also be a coroutine function or an async generator
    function. A streaming request gets chunks on ``cadence`` (``time.sleep`` between them from
    sync code, ``anyio.sleep`` from async code, so the virtual clock applies).
    """

    def __init__(
        self,
        model: Callable[[Turn], Any],
        *,
        cadence: Cadence = DEFAULT_CADENCE,
        name: str = "in-process-model",
    ) -> None:
        self._model = model
        self._cadence = cadence
        self._name = name
        self._count = 0
        self._asynchronous = inspect.iscoroutinefunction(model) or inspect.isasyncgenfunction(model)
        self.turns: list[Turn] = []

    def _turn(self, request: TransportRequest) -> tuple[_Conversation, Turn]:
        self._count += 1
        talk = _Conversation(request, self._name, self._count)
        turn = talk.turn()
        self.turns.append(turn)
        return talk, turn

    def __call__(self, request: TransportRequest) -> TransportResponse:
        if self._asynchronous:
            raise TypeError(
                f"this ModelTransport's model is an async function, and sync code sent "
                f"{request.method} {request.url}; send from async code (an async client, or "
                "await transport.acall(request)), or give a plain function"
            )
        problem = _check(request)
        if problem is not None:
            return problem
        talk, turn = self._turn(request)
        reply = self._model(turn)
        if not talk.stream:
            for piece in _pieces_of(reply):
                talk.chunks_for(piece)
            time.sleep(self._cadence.ttft)
            return TransportResponse(200, _JSON, talk.completion())
        return TransportResponse(200, _SSE, ByteStream(self._stream(talk, reply)))

    async def acall(self, request: TransportRequest) -> TransportResponse:
        problem = _check(request)
        if problem is not None:
            return problem
        talk, turn = self._turn(request)
        reply = self._model(turn)
        if inspect.isawaitable(reply):
            reply = await reply
        if not talk.stream:
            async for piece in _apieces_of(reply):
                talk.chunks_for(piece)
            await anyio.sleep(self._cadence.ttft)
            return TransportResponse(200, _JSON, talk.completion())
        return TransportResponse(200, _SSE, AsyncByteStream(self._astream(talk, reply)))

    def _stream(self, talk: _Conversation, reply: ModelReply) -> Iterator[bytes]:
        times = self._cadence
        time.sleep(times.headers)
        yield talk.opening()
        waited = times.headers
        for number, piece in enumerate(_pieces_of(reply)):
            due = times.times(number + 1)[-1] / 1000
            time.sleep(max(due - waited, 0.0))
            waited = max(due, waited)
            yield b"".join(talk.chunks_for(piece))
        yield talk.closing()

    async def _astream(self, talk: _Conversation, reply: Any) -> AsyncIterator[bytes]:
        times = self._cadence
        await anyio.sleep(times.headers)
        yield talk.opening()
        waited = times.headers
        number = 0
        async for piece in _apieces_of(reply):
            due = times.times(number + 1)[-1] / 1000
            await anyio.sleep(max(due - waited, 0.0))
            waited = max(due, waited)
            number += 1
            yield b"".join(talk.chunks_for(piece))
        yield talk.closing()


async def _apieces_of(reply: Any) -> AsyncIterator[Piece]:
    if hasattr(reply, "__aiter__"):
        async for piece in reply:
            if not isinstance(piece, str | ToolCall):
                raise TypeError(
                    f"a model function yielded {type(piece).__name__}; yield text or ToolCall"
                )
            yield piece
    else:
        for piece in _pieces_of(reply):
            yield piece
