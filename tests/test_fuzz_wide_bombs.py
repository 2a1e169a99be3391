"""Fuzzing cassettes that are huge in width rather than in depth (issue 23, wide bombs): very
wide maps and lists, very many events, lines, chunks, headers and interactions, huge strings,
and nesting at the interpreter's limit, in every place a cassette holds them.

Each case is a well-formed cassette built at a random size. It is loaded, replayed through the
sync and async seam and an httpx client (``Replayer`` of ``test_fuzz_replay.py``), and checked
(``check``: validation, the secret scan, the provider views). A case passes when each step
succeeds or raises a typed error naming the file (``CassetteFormatError``, or a
``RecursionError`` turned into one), and when its work stays linear: the function calls the
load, the sync replay and the check make, counted by ``cProfile`` (the same on any machine,
loaded or not), are at most ``WORK_BASE`` + ``WORK_PER_BYTE`` a byte of the file. A step that
re-walks the document per element, or copies a growing string per piece, blows that budget
long before it would blow a time limit.

Counts (random classes times ``TOOLNEXUS_FUZZ_SCALE``): 6 wide (2,000 to 20,000 keys or items),
5 many (500 to 3,000 pieces; 60 to 375 interactions), 4 huge (1 to 4 MB); nesting at the limit
is systematic (12 depths: the package's ``MAX_DEPTH`` of 500 and 3 either side, and 900 to
1,100 where interpreters' own limits lie, x 6 places). The linear-work budget, not the sizes,
is what shows a bigger bomb costs no more than its size.
"""

import cProfile
import io
import math
import random
from collections import Counter
from pathlib import Path

import msgpack
import pytest

from pytest_toolnexus import (
    Cassette,
    Headers,
    Interaction,
    RecordedError,
    RecordedRequest,
    RecordedResponse,
)
from pytest_toolnexus._cli.check import check
from pytest_toolnexus._seam.depth import MAX_DEPTH
from pytest_toolnexus._store.cassette import ChunksBody, JsonBody, NdjsonBody, SseBody
from tests.support.fuzzing import report, scaled
from tests.test_fuzz_replay import MARKER, Replayer, nest_bytes

WORK_BASE = 50_000
WORK_PER_BYTE = 40
URL = "https://api.example.invalid/v1/x"
JSON = Headers([("content-type", "application/json")])
SSE = Headers([("content-type", "text/event-stream")])
NDJSON = Headers([("content-type", "application/x-ndjson")])
BYTES = Headers([("content-type", "application/octet-stream")])


def _size(rng, low, high):
    """A size drawn evenly on a log scale between ``low`` and ``high``."""
    return int(math.exp(rng.uniform(math.log(low), math.log(high))))


def _one(response_body=None, *, request=None, headers=JSON, url=URL, error=None, meta=None):
    interaction = Interaction(
        RecordedRequest("POST", url, JSON, JsonBody({"q": 1} if request is None else request)),
        RecordedResponse(
            200,
            headers,
            JsonBody({"ok": True}) if response_body is None else response_body,
            1.0,
            2.0,
            error,
        ),
    )
    return Cassette(Path("bomb.msgpack"), [interaction], meta or {}).to_bytes()


WIDE = {
    "a response map": lambda n: _one(JsonBody({f"k{i}": i for i in range(n)})),
    "a response list": lambda n: _one(JsonBody(list(range(n)))),
    "a request map": lambda n: _one(request={f"k{i}": "v" for i in range(n)}),
    "a request list": lambda n: _one(request=[{"i": i} for i in range(n)]),
    "an SSE event's data": lambda n: _one(
        SseBody([{"t": 1.0, "data": {f"k{i}": i for i in range(n)}}]), headers=SSE
    ),
    "an NDJSON line": lambda n: _one(
        NdjsonBody([{"t": 1.0, "value": list(range(n))}]), headers=NDJSON
    ),
    "meta": lambda n: _one(meta={f"k{i}": i for i in range(n)}),
    "response headers": lambda n: _one(
        headers=Headers(
            [("content-type", "application/json"), *((f"x-h{i}", "v") for i in range(n))]
        )
    ),
    "query parameters": lambda n: _one(url=URL + "?" + "&".join(f"p{i}={i}" for i in range(n))),
}

MANY = {
    "SSE events": lambda n: _one(
        SseBody([{"t": float(i), "data": {"d": i}} for i in range(n)]), headers=SSE
    ),
    "SSE comments": lambda n: _one(
        SseBody([{"t": 1.0, "comments": ["keep-alive"] * n, "text": "x"}]), headers=SSE
    ),
    "NDJSON lines": lambda n: _one(
        NdjsonBody([{"t": float(i), "value": {"d": i}} for i in range(n)]), headers=NDJSON
    ),
    "byte chunks": lambda n: _one(
        ChunksBody([{"t": float(i), "data": b"ab"} for i in range(n)]), headers=BYTES
    ),
    # an interaction is a hundred times the bytes of an event: n // 8 of them
    "interactions": lambda n: Cassette(
        Path("bomb.msgpack"),
        [
            Interaction(
                RecordedRequest("POST", f"{URL}/{i % 7}", JSON, JsonBody({"i": i})),
                RecordedResponse(200, JSON, JsonBody({"i": i}), 1.0, 2.0),
            )
            for i in range(n // 8)
        ],
        {},
    ).to_bytes(),
}

HUGE = {
    "a URL": lambda n: _one(url=f"{URL}/{'a' * n}"),
    "a header value": lambda n: _one(headers=Headers([("x-big", "v " * (n // 2))])),
    "a response string": lambda n: _one(JsonBody({"s": "word " * (n // 5)})),
    "a request string": lambda n: _one(request={"prompt": "word " * (n // 5)}),
    "SSE text": lambda n: _one(SseBody([{"t": 1.0, "text": "x y " * (n // 4)}]), headers=SSE),
    "an NDJSON text line": lambda n: _one(
        NdjsonBody([{"t": 1.0, "text": "x y " * (n // 4)}]), headers=NDJSON
    ),
    "a byte chunk": lambda n: _one(
        ChunksBody([{"t": 1.0, "data": b"\x00x" * (n // 2)}]), headers=BYTES
    ),
    "meta": lambda n: _one(meta={"note": "m " * (n // 2)}),
    "an error message": lambda n: _one(error=RecordedError("ReadError", "e " * (n // 2), 2.0)),
}


class Bombs:
    def __init__(self, folder: Path):
        self.replay = Replayer(folder, "bomb")
        self.outcomes: Counter[str] = Counter()
        self.failures: list[str] = []
        self.heaviest = 0.0

    def __call__(self, data: bytes, label: str) -> None:
        profile = cProfile.Profile()
        profile.enable()
        try:
            outcome = self.replay(data, label)
            out = io.StringIO()
            code = check([self.replay.path], [], out, io.StringIO())
        finally:
            profile.disable()
        calls = sum(entry.callcount for entry in profile.getstats())
        self.heaviest = max(self.heaviest, calls / len(data))
        budget = WORK_BASE + WORK_PER_BYTE * len(data)
        if calls > budget:
            self.failures.append(
                f"{label}: {calls} function calls for {len(data)} bytes, over the budget of "
                f"{budget}: the work is not linear in the input"
            )
        if code not in (0, 1) or str(self.replay.path) not in out.getvalue():
            self.failures.append(f"{label}: check exit {code}: {out.getvalue()[:300]}")
        self.outcomes[outcome] += 1
        self.outcomes[f"check exit {code}"] += 1

    def finish(self, kind: str) -> None:
        failures = self.failures + self.replay.failures
        report("wide bombs", kind, self.outcomes, len(failures))
        assert not failures, f"{len(failures)} failed:\n" + "\n".join(failures[:10])


@pytest.mark.parametrize(
    ("kind", "places", "low", "high", "cases", "seed"),
    [
        ("wide maps and lists", WIDE, 2_000, 20_000, 6, 1),
        ("many events, lines, chunks and interactions", MANY, 500, 3_000, 5, 2),
        ("huge strings", HUGE, 1_000_000, 4_000_000, 4, 3),
    ],
    ids=["wide", "many", "huge"],
)
def test_wide_bombs_replay_or_fail_typed_in_linear_work(
    tmp_path, kind, places, low, high, cases, seed
):
    bombs = Bombs(tmp_path)
    rng = random.Random(seed)
    names = list(places)
    for number in range(scaled(cases)):
        place = names[number % len(names)] if number < len(names) else rng.choice(names)
        size = _size(rng, low, high)
        bombs(places[place](size), f"{place} x {size}")
    assert bombs.outcomes["replayed"] > 0
    bombs.finish(kind)


# the package's limit and either side of it, then where interpreters' own limits lie
DEPTHS = (*range(MAX_DEPTH - 3, MAX_DEPTH + 4), 900, 990, 1000, 1024, 1100)
NESTED = {
    "a response body": lambda: _one(JsonBody(MARKER)),
    "a request body": lambda: _one(request=MARKER),
    "an SSE event's data": lambda: _one(SseBody([{"t": 1.0, "data": MARKER}]), headers=SSE),
    "an NDJSON line": lambda: _one(NdjsonBody([{"t": 1.0, "value": MARKER}]), headers=NDJSON),
    "meta": lambda: _one(meta={"deep": MARKER}),
    "one of many events": lambda: _one(
        SseBody(
            [*({"t": float(i), "data": {"d": i}} for i in range(50)), {"t": 60.0, "data": MARKER}]
        ),
        headers=SSE,
    ),
}


def test_nesting_at_the_limit_replays_or_fails_typed(tmp_path):
    bombs = Bombs(tmp_path)
    for place, make in NESTED.items():
        template = make()
        for depth in DEPTHS:
            data = template.replace(msgpack.packb(MARKER), nest_bytes(depth))
            bombs(data, f"{place} nested {depth} deep")
    assert bombs.outcomes["replayed"] > 0
    assert bombs.outcomes["refused at load"] > 0
    bombs.finish("nesting at the limit")
