"""The recorded traffic the benchmarks replay, written as both a toolnexus and a vcrpy cassette.

Both cassettes hold the same interactions. Each is written by its own library's code: the
toolnexus one from the public cassette types (what its recorder produces: request headers as
sent, the body parsed, the wire-only ``content-length`` dropped from responses), the vcrpy one
with vcrpy's own request type, the response dict its httpx stub records, and its filesystem
persister and YAML serializer.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from vcr.persisters.filesystem import FilesystemPersister
from vcr.request import Request as VcrRequest
from vcr.serializers import yamlserializer
from vcr.stubs.httpx_stubs import _serialize_response

from pytest_toolnexus import Cassette, Headers, Interaction, RecordedRequest, RecordedResponse
from pytest_toolnexus._store.cassette import JsonBody, SseBody, sse_event_doc
from pytest_toolnexus._store.streams import SseParser

CHAT_URL = "https://api.openai.com/v1/chat/completions"
MODEL = "gpt-4o-mini"

_WORDS = (  # noqa: SIM905 (a word list reads better as text)
    "alpha bravo cache delta echo fjord gamma harbor index jitter kernel lambda matrix "
    "nexus orbit packet quorum replay signal tensor update vector window xenon yield "
    "zenith async buffer cursor daemon entropy ferry gradient hash iterate journal "
    "ledger mutex"
).split()


@dataclass(frozen=True)
class Pair:
    """One request body and the JSON answer it got."""

    request: dict[str, Any]
    response: dict[str, Any]


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def chat_pairs(count: int, seed: int = 7) -> list[Pair]:
    """``count`` chat-completion exchanges, every request body distinct."""
    rng = random.Random(seed)
    pairs = []
    for i in range(count):
        question = f"Question {i}: {_sentence(rng, 14)}?"
        answer = f"Answer {i}: {_sentence(rng, 40)}."
        request = {
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "You are a concise assistant for a test suite."},
                {"role": "user", "content": question},
            ],
            "temperature": 0.2,
            "max_tokens": 256,
        }
        response = {
            "id": f"chatcmpl-{rng.getrandbits(96):024x}",
            "object": "chat.completion",
            "created": 1732000000 + i,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": 31 + i % 7,
                "completion_tokens": 52 + i % 11,
                "total_tokens": 83 + i % 7 + i % 11,
            },
            "service_tier": "default",
            "system_fingerprint": "fp_0ba0d124f1",
        }
        pairs.append(Pair(request, response))
    return pairs


def _response_headers(i: int) -> list[tuple[str, str]]:
    return [
        ("date", "Tue, 19 Nov 2024 07:06:40 GMT"),
        ("content-type", "application/json"),
        ("x-request-id", f"req_{i:032x}"),
        ("openai-processing-ms", str(300 + i % 500)),
    ]


def http_request(client: httpx.Client, pair: Pair) -> httpx.Request:
    """The request an httpx client sends for ``pair`` (its real headers and body bytes)."""
    return client.build_request("POST", CHAT_URL, json=pair.request)


def http_response(i: int, pair: Pair) -> httpx.Response:
    return httpx.Response(200, headers=_response_headers(i), json=pair.response)


def write_toolnexus(path: Path, pairs: list[Pair]) -> None:
    interactions = []
    with httpx.Client() as client:
        for i, pair in enumerate(pairs):
            sent = http_request(client, pair)
            request = RecordedRequest(
                "POST", CHAT_URL, Headers(sent.headers.multi_items()), JsonBody(pair.request)
            )
            t_headers = 250.0 + (i * 37) % 400
            response = RecordedResponse(
                200,
                Headers(_response_headers(i)),
                JsonBody(pair.response),
                t_headers=t_headers,
                t_end=t_headers + 1.5,
            )
            interactions.append(Interaction(request, response))
    Cassette(path, interactions, {"clock_epoch": 1732000000.0}).save()


def write_vcrpy(path: Path, pairs: list[Pair]) -> None:
    requests, responses = [], []
    with httpx.Client() as client:
        for i, pair in enumerate(pairs):
            sent = http_request(client, pair)
            requests.append(VcrRequest("POST", CHAT_URL, sent.read(), sent.headers))
            answer = http_response(i, pair)
            responses.append(_serialize_response(answer, answer.read()))
    FilesystemPersister.save_cassette(
        path, {"requests": requests, "responses": responses}, serializer=yamlserializer
    )


# ---------------------------------------------------------------------------------------------
# A long OpenAI chat stream (~5 MB, ~17,000 events)

STREAM_REQUEST = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "Write a very long story."}],
    "stream": True,
}


def big_stream(events: int = 17_000, target_bytes: int = 5_000_000) -> tuple[bytes, list[float]]:
    """The wire bytes of an OpenAI chat stream and each event's arrival in ms.

    Every chunk carries the ``obfuscation`` padding OpenAI adds to stream events; its length is
    chosen so the whole stream is close to ``target_bytes``.
    """
    rng = random.Random(11)
    head = {
        "id": "chatcmpl-AX9vQbRkT3mZ8pL2nC4dE6fG7hJ1",
        "object": "chat.completion.chunk",
        "created": 1732000000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_0ba0d124f1",
    }

    def line(delta: dict[str, Any], finish: str | None, padding: str) -> bytes:
        event = {
            **head,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            "obfuscation": padding,
        }
        return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"

    bare = len(line({"content": " " + _WORDS[0]}, None, ""))
    pad = max(0, target_bytes // events - bare - 4)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    chunks = []
    times = []
    for i in range(events):
        delta: dict[str, Any] = {"content": " " + rng.choice(_WORDS)}
        if i == 0:
            delta = {"role": "assistant", "content": "", "refusal": None}
        finish = "stop" if i == events - 1 else None
        padding = "".join(rng.choice(alphabet) for _ in range(pad + rng.randrange(8)))
        chunks.append(line(delta, finish, padding))
        times.append(round(310.0 + i * 3.5, 3))
    chunks.append(b"data: [DONE]\n\n")
    times.append(times[-1])
    return b"".join(chunks), times


def sse_response_headers() -> list[tuple[str, str]]:
    return [
        ("date", "Tue, 19 Nov 2024 07:06:40 GMT"),
        ("content-type", "text/event-stream; charset=utf-8"),
        ("x-request-id", "req_5f2a9c0d1e3b4a6f8c7d9e0a1b2c3d4e"),
    ]


def write_toolnexus_stream(path: Path, wire: bytes, times: list[float]) -> int:
    """Store the stream as the recorder does: parsed into events, each with its ``t``.

    Returns the number of events stored.
    """
    parser = SseParser()
    events = parser.feed(wire)
    assert not parser.finish(), "the stream ends with a complete event"
    docs = [sse_event_doc(t, event) for t, event in zip(times, events, strict=True)]
    with httpx.Client() as client:
        sent = client.build_request("POST", CHAT_URL, json=STREAM_REQUEST)
    request = RecordedRequest(
        "POST", CHAT_URL, Headers(sent.headers.multi_items()), JsonBody(STREAM_REQUEST)
    )
    response = RecordedResponse(
        200,
        Headers(sse_response_headers()),
        SseBody(docs),
        t_headers=290.0,
        t_end=times[-1] + 0.5,
    )
    Cassette(path, [Interaction(request, response)], {}).save()
    return len(docs)


def write_vcrpy_stream(path: Path, wire: bytes) -> None:
    """vcrpy's httpx stub joins the stream and stores the whole body as one string."""
    with httpx.Client() as client:
        sent = client.build_request("POST", CHAT_URL, json=STREAM_REQUEST)
    answer = httpx.Response(200, headers=sse_response_headers(), content=wire)
    FilesystemPersister.save_cassette(
        path,
        {
            "requests": [VcrRequest("POST", CHAT_URL, sent.read(), sent.headers)],
            "responses": [_serialize_response(answer, answer.read())],
        },
        serializer=yamlserializer,
    )
