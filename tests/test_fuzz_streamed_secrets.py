"""Fuzzing the streamed-secret scan (issue 23, row 2, at random): a key split across SSE events
and NDJSON lines at random places must be refused at the write and by ``check``.

Each case draws a fresh fake key of one of the families the scan knows, puts it in a sentence,
cuts the sentence into 2 to 40 pieces at random places (a piece may be empty, or hold the whole
key), and frames the pieces as one provider's stream: OpenAI chat content deltas and tool-call
arguments, Responses text deltas, Anthropic text and ``input_json_delta`` pieces, Gemini parts,
an SSE stream of plain text, Ollama NDJSON lines and plain NDJSON text lines. The wire bytes
are then cut into random network chunks, so an event or a line is split too. A recording
session records the stream from a live transport and must refuse the write with
``SecretFoundError``, naming no part of the key and writing no file. The same stream recorded
with the key in ``allow_secrets`` is written, and ``check`` over that file must fail it.

A control class frames ordinary sentences the same way: they are written and ``check`` passes
them, so the joined reading finds keys, not noise.

Counts (per class, times ``TOOLNEXUS_FUZZ_SCALE``): 80 SSE cases, 40 NDJSON cases, 40 controls.
Every key is built at run time and fake.
"""

import io
import itertools
import json
import random
import string
from collections import Counter
from pathlib import Path

import pytest

from pytest_toolnexus import (
    ByteStream,
    CassetteSession,
    Headers,
    SecretFoundError,
    TransportRequest,
    TransportResponse,
)
from pytest_toolnexus._cli.check import check
from tests.support.fuzzing import report, scaled

ALNUM = string.ascii_letters + string.digits
SSE = Headers([("content-type", "text/event-stream")])
NDJSON = Headers([("content-type", "application/x-ndjson")])


def _draw(rng, alphabet, n):
    return "".join(rng.choice(alphabet) for _ in range(n))


def _aws(rng):
    while True:
        value = _draw(rng, ALNUM + "/+", 40)
        if (
            any(c.isupper() for c in value)
            and any(c.islower() for c in value)
            and any(c.isdigit() for c in value)
        ):
            return value


KEYS = {
    "sk-proj-": lambda r: "sk-proj-" + _draw(r, ALNUM + "_-", 48),
    "sk-ant-": lambda r: "sk-ant-api03-" + _draw(r, ALNUM + "_-", 80),
    "AIza": lambda r: "AIza" + _draw(r, ALNUM + "_-", 35),
    "ghp_": lambda r: "ghp_" + _draw(r, ALNUM, 36),
    "github_pat_": lambda r: "github_pat_" + _draw(r, ALNUM, 22) + "_" + _draw(r, ALNUM, 59),
    "xoxb-": lambda r: (
        f"xoxb-{_draw(r, string.digits, 12)}-{_draw(r, string.digits, 13)}-"
        + _draw(r, string.ascii_lowercase + string.digits, 24)
    ),
    "glpat-": lambda r: "glpat-" + _draw(r, ALNUM + "_-", 20),
    "sk_live_": lambda r: "sk_live_" + _draw(r, ALNUM, 24),
    "npm_": lambda r: "npm_" + _draw(r, ALNUM, 36),
    "aws secret key": _aws,
    "JWT": lambda r: (
        "eyJ"
        + _draw(r, ALNUM, 20)
        + ".eyJ"
        + _draw(r, ALNUM, 30)
        + "."
        + _draw(r, ALNUM + "_-", 43)
    ),
}

WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "models")


def _cut(rng, text):
    """``text`` cut into 2 to 40 pieces at random places (a piece may be empty)."""
    count = rng.randint(2, min(40, len(text)))
    cuts = sorted(rng.randint(0, len(text)) for _ in range(count - 1))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def _sse(events):
    return "".join(f"{e}\n\n" for e in events)


def _data(payload, event=None):
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload)}"


def _chat(pieces):
    return _sse(
        [
            _data({"id": "chatcmpl-9", "choices": [{"index": 0, "delta": {"content": p}}]})
            for p in pieces
        ]
        + ["data: [DONE]"]
    )


def _chat_tool(pieces):
    call = {"index": 0, "function": {"arguments": None}}
    events = []
    for p in pieces:
        call["function"]["arguments"] = p
        events.append(_data({"id": "chatcmpl-9", "choices": [{"delta": {"tool_calls": [call]}}]}))
    return _sse([*events, "data: [DONE]"])


def _responses(pieces):
    kind = "response.output_text.delta"
    return _sse([_data({"type": kind, "delta": p}, event=kind) for p in pieces])


def _anthropic(pieces, delta="text_delta", field="text"):
    kind = "content_block_delta"
    return _sse(
        [
            _data({"type": kind, "index": 0, "delta": {"type": delta, field: p}}, event=kind)
            for p in pieces
        ]
    )


def _gemini(pieces):
    return _sse(
        [
            _data({"candidates": [{"content": {"parts": [{"text": p}], "role": "model"}}]})
            for p in pieces
        ]
    )


def _plain_sse(pieces):
    # a piece that reads as JSON (a token of digits) is stored parsed, and joined as its text
    return _sse([f"data: {p}" for p in pieces])


def _ollama(pieces):
    lines = [
        json.dumps({"message": {"role": "assistant", "content": p}, "done": False}) for p in pieces
    ]
    return "".join(f"{line}\n" for line in [*lines, '{"done":true}'])


def _ndjson_text(pieces):
    return "".join(f"{p}\n" for p in pieces)


# shape -> (how the pieces are framed, the media type, whether the text is JSON arguments)
SSE_SHAPES = {
    "OpenAI chat deltas": (_chat, SSE, False),
    "OpenAI tool-call arguments": (_chat_tool, SSE, True),
    "Responses text deltas": (_responses, SSE, False),
    "Anthropic text deltas": (_anthropic, SSE, False),
    "Anthropic input_json_delta": (
        lambda p: _anthropic(p, "input_json_delta", "partial_json"),
        SSE,
        True,
    ),
    "Gemini parts": (_gemini, SSE, False),
    "plain SSE text": (_plain_sse, SSE, False),
}
NDJSON_SHAPES = {
    "Ollama lines": (_ollama, NDJSON, False),
    "plain NDJSON text": (_ndjson_text, NDJSON, False),
}


def _chunks(rng, wire):
    """The wire bytes cut into 1 to 12 network chunks at random places."""
    data = wire.encode()
    cuts = sorted(rng.randint(0, len(data)) for _ in range(rng.randint(0, 11)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def _record(path, headers, chunks, allow=()):
    def live(sent):
        return TransportResponse(200, headers, ByteStream(list(chunks)))

    session = CassetteSession(path, record="all", timing="instant", live=live, allow_secrets=allow)
    response = session.transport(
        TransportRequest(
            "POST", "https://api.example.invalid/v1/stream", body={"q": 1}, stream=True
        )
    )
    assert isinstance(response.body, ByteStream)
    assert b"".join(response.body) == b"".join(chunks)  # the client read the stream untouched
    return session


def _check(path):
    out = io.StringIO()
    code = check([path], [], out, io.StringIO())
    return code, out.getvalue()


class Fuzz:
    def __init__(self, folder: Path):
        self.folder = folder
        self.outcomes: Counter[str] = Counter()
        self.failures: list[str] = []
        self.number = 0

    def secret(self, rng, shapes):
        self.number += 1
        family = rng.choice(list(KEYS))
        key = KEYS[family](rng)
        shape = rng.choice(list(shapes))
        frame, headers, arguments = shapes[shape]
        text = json.dumps({"token": key}) if arguments else f"here it is: {key} - keep it safe"
        pieces = _cut(rng, text)
        chunks = _chunks(rng, frame(pieces))
        label = f"#{self.number} {family} in {shape}, {len(pieces)} pieces, {len(chunks)} chunks"
        path = self.folder / f"s{self.number}.msgpack"
        try:
            session = _record(path, headers, chunks)
            with pytest.raises(SecretFoundError) as refused:
                session.close()
            message = f"{refused.value}\n{refused.value!r}"
            if key in message or path.exists():
                self.failures.append(f"{label}: the key is printed, or the file written")
            joined = "spread across" in message
            self.outcomes[
                "refused at the write, joined" if joined else "refused at the write, one piece"
            ] += 1
            kept = self.folder / f"k{self.number}.msgpack"
            _record(kept, headers, chunks, allow=[key]).close()
            code, out = _check(kept)
            if code != 1 or "secret(s)" not in out or key in out:
                self.failures.append(f"{label}: check said exit {code}: {out[:300]}")
            self.outcomes[f"check exit {code}"] += 1
        except BaseException as exc:  # pytest.raises failing is a failure of the case too
            self.failures.append(f"{label}: {type(exc).__name__}: {exc!s:.300}")

    def clean(self, rng, shapes):
        self.number += 1
        shape = rng.choice(list(shapes))
        frame, headers, arguments = shapes[shape]
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40)))
        text = json.dumps({"answer": words}) if arguments else words
        pieces = _cut(rng, text)
        chunks = _chunks(rng, frame(pieces))
        label = f"#{self.number} clean {shape}, {len(pieces)} pieces"
        path = self.folder / f"c{self.number}.msgpack"
        try:
            _record(path, headers, chunks).close()
            code, out = _check(path)
            if code != 0:
                self.failures.append(f"{label}: check said exit {code}: {out[:300]}")
            self.outcomes["written"] += 1
            self.outcomes[f"check exit {code}"] += 1
        except BaseException as exc:
            self.failures.append(f"{label}: {type(exc).__name__}: {exc!s:.300}")

    def finish(self, kind):
        report("streamed secrets", kind, self.outcomes, len(self.failures))
        assert not self.failures, f"{len(self.failures)} failed:\n" + "\n".join(self.failures[:10])


def test_a_key_split_across_sse_events_at_random_places_is_refused(tmp_path):
    fuzz = Fuzz(tmp_path)
    rng = random.Random(231)
    for _ in range(scaled(80)):
        fuzz.secret(rng, SSE_SHAPES)
    assert fuzz.outcomes["refused at the write, joined"] > 0
    fuzz.finish("keys split across SSE events")


def test_a_key_split_across_ndjson_lines_at_random_places_is_refused(tmp_path):
    fuzz = Fuzz(tmp_path)
    rng = random.Random(232)
    for _ in range(scaled(40)):
        fuzz.secret(rng, NDJSON_SHAPES)
    assert fuzz.outcomes["refused at the write, joined"] > 0
    fuzz.finish("keys split across NDJSON lines")


def test_ordinary_text_split_the_same_ways_is_written_and_passes_check(tmp_path):
    fuzz = Fuzz(tmp_path)
    rng = random.Random(233)
    for _ in range(scaled(40)):
        fuzz.clean(rng, {**SSE_SHAPES, **NDJSON_SHAPES})
    fuzz.finish("the same streams without a key")
