"""Every file the loader accepts replays, or fails with a typed error that names it (issue 14,
items 5 and 6).

``test_fuzz_loader.py`` proves the loader refuses damage with a typed error. This fuzzer goes
on where it stops: every mutant the loader ACCEPTS is replayed, twice.

- Through the seam, sync and async: a ``CassetteSession`` with the default matching rules is
  built, and each interaction's own recorded request is sent to it, as a stream and as a whole
  body in turn; every stream is read to its end.
- Through an HTTP client: an ``httpx.Client`` on ``session.http_transport()`` (the http
  bridge), with a matcher that takes the interactions in order, so every response is played
  whatever its request holds; every body is read to its end.

A case passes when it loads and replays, or when the loader, ``CassetteSession()`` or the
replay raises a ``CassetteFormatError`` whose ``.path`` is the file and whose message names the
file and (past loading) the interaction. A recorded transport error, a recorded cut stream
(``ReplayError``) and a miss are the behaviour the file describes, and pass too. Anything else
escaping is a failure.

Mutants come from the committed cassettes and the synthetic one holding every body kind:
hostile values (NaN, Infinity, bytes as a value or a key, non-ASCII and control text, bad URL
ports and IPv6 literals, infinite and huge times, integers at the msgpack edges, nesting from
900 to 5,000 levels) put at random nodes and at each value slot of every interaction, plus bit
flips and byte edits. Sizes are in ``CLASSES``; ``python3 .ci/dev.py fuzz`` multiplies them.
"""

import asyncio
import contextlib
import math
import random
import warnings
from collections import Counter
from pathlib import Path

import httpx
import msgpack
import pytest

from pytest_toolnexus import CassetteSession, load_cassette
from pytest_toolnexus._cli.main import main as cli_main
from pytest_toolnexus._seam.depth import MAX_DEPTH
from pytest_toolnexus._seam.errors import (
    CassetteError,
    CassetteFormatError,
    CassetteMissError,
    ReplayError,
    TransportError,
)
from pytest_toolnexus._seam.transport import AsyncByteStream, ByteStream, TransportRequest
from pytest_toolnexus._store.cassette import BytesBody, JsonBody, TextBody
from tests.support.fuzzing import report, scaled
from tests.test_fuzz_loader import SEEDS, node_paths, with_replaced

MARKER = "@@HOSTILE@@"


def nest_bytes(depth: int) -> bytes:
    """msgpack bytes of a value nested ``depth`` levels (lists and maps in turn), which
    ``msgpack.packb`` refuses to build past its own limit."""
    return b"".join(b"\x91" if level % 2 else b"\x81\xa1k" for level in range(depth)) + b"\x01"


class Deep:
    def __init__(self, depth: int) -> None:
        self.depth = depth

    def __repr__(self) -> str:
        return f"<nested {self.depth} deep>"


HOSTILE = [
    math.nan,
    math.inf,
    -math.inf,
    1e300,
    1e12 + 1,
    2**64 - 1,
    -(2**63),
    -1,
    0,
    True,
    None,
    b"bytes",
    b"\xff\xfe",
    {b"key": 1},
    {"k": b"v"},
    [b"x", math.nan],
    {"k": {"k": math.inf}},
    "caf\u00e9",
    "\u65e5\u672c\u8a9e",
    "\U0001f642",
    "line\r\nx-injected: 1",
    "nul\x00",
    "",
    "/",
    "https://h.invalid:99999/",
    "https://h.invalid:-1/",
    "https://[::1/",
    "http://[zz]:80/",
    "ftp://h.invalid/",
    "//no-scheme",
    "https://h.invalid/%zz?a=%ff",
    "GE T",
    [],
    {},
    [["x-a", "caf\u00e9"]],
    [["\u00e9", "v"]],
    [["x-a", "b"], ["x-a", b"c"]],
    {"kind": "json", "value": math.nan},
    {"kind": "json", "value": {b"k": 1}},
    {"kind": "sse", "events": [{"t": math.inf, "data": 1}]},
    {"kind": "sse", "events": [{"t": 1, "data": b"x"}]},
    {"kind": "sse", "events": [{"t": 1, "data": math.nan}]},
    {"kind": "ndjson", "lines": [{"t": 1, "value": b"x"}]},
    {"kind": "chunks", "chunks": [{"t": 1e300, "data": b"x"}]},
    Deep(900),
    Deep(990),
    Deep(1000),
    Deep(1100),
    Deep(5000),
]


def pack_with(doc: object, path: tuple, value: object) -> bytes:
    """``doc`` packed with ``value`` at ``path`` (deep values spliced in as raw bytes)."""
    if isinstance(value, Deep):
        packed = msgpack.packb(with_replaced(doc, path, MARKER), use_bin_type=True)
        return packed.replace(msgpack.packb(MARKER), nest_bytes(value.depth))
    return msgpack.packb(with_replaced(doc, path, value), use_bin_type=True)


def request_body(body: object) -> object:
    if isinstance(body, JsonBody):
        return body.value
    if isinstance(body, TextBody):
        return body.text.encode("utf-8", "surrogatepass")
    if isinstance(body, BytesBody):
        return body.data
    return None


def drain(response: object) -> None:
    body = getattr(response, "body", None)
    if isinstance(body, ByteStream):
        for _ in body:
            pass


class Replayer:
    """Loads and replays one mutant at a time, and keeps the outcomes and the failures."""

    def __init__(self, folder: Path, name: str) -> None:
        self.path = folder / f"{name}.msgpack"
        self.outcomes: Counter[str] = Counter()
        self.failures: list[str] = []

    def _typed(self, exc: CassetteError, label: str, stage: str, need_interaction: bool) -> str:
        where = str(self.path)
        if exc.path != where or where not in str(exc):
            self.failures.append(f"{label}: {stage}: the error does not name the file: {exc}")
        elif not isinstance(exc, CassetteFormatError | CassetteError):
            self.failures.append(f"{label}: {stage}: {type(exc).__name__}: {exc}")
        elif need_interaction and "interaction" not in str(exc):
            self.failures.append(f"{label}: {stage}: the error names no interaction: {exc}")
        return f"refused at {stage}"

    def __call__(self, data: bytes, label: str) -> str:
        self.path.write_bytes(data)
        try:
            outcome = self._run(label)
        except BaseException as exc:  # what this fuzzer exists to find
            self.failures.append(f"{label}: {type(exc).__name__} escaped: {exc!r:.300}")
            outcome = "failed"
        self.outcomes[outcome] += 1
        return outcome

    def _run(self, label: str) -> str:
        try:
            cassette = load_cassette(self.path)
        except CassetteError as exc:
            return self._typed(exc, label, "load", need_interaction=False)
        outcome = "replayed"
        passes = {
            "the seam replay": lambda: self._through_seam(cassette.interactions),
            "the async seam replay": lambda: asyncio.run(self._through_async(cassette)),
            "the client replay": lambda: self._through_client(len(cassette.interactions)),
        }
        # Each pass runs on its own session, whatever the others did: a pass may only refuse
        # with the typed error.
        for stage, run in passes.items():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    run()
            except CassetteError as exc:
                refused = self._typed(exc, label, stage, need_interaction=True)
                outcome = refused if outcome == "replayed" else outcome
        return outcome

    def _session(self, **options: object) -> CassetteSession:
        return CassetteSession(self.path, wire_check=False, on_unused="ignore", **options)

    def _through_seam(self, interactions: list) -> None:
        with self._session() as session:
            transport = session.transport
            for number, interaction in enumerate(interactions):
                recorded = interaction.request
                request = TransportRequest(
                    method=recorded.method,
                    url=recorded.url,
                    headers=recorded.headers,
                    body=request_body(recorded.body),  # type: ignore[arg-type]
                    stream=number % 2 == 0,
                )
                # A recorded error or cut stream is what the file holds; a miss, a request the
                # damaged file no longer answers.
                with contextlib.suppress(TransportError, ReplayError, CassetteMissError):
                    drain(transport(request))

    async def _through_async(self, cassette: object) -> None:
        async with self._session() as session:
            transport = session.async_transport
            for number, interaction in enumerate(cassette.interactions):  # type: ignore[attr-defined]
                recorded = interaction.request
                request = TransportRequest(
                    method=recorded.method,
                    url=recorded.url,
                    headers=recorded.headers,
                    body=request_body(recorded.body),  # type: ignore[arg-type]
                    stream=number % 2 == 1,
                )
                with contextlib.suppress(TransportError, ReplayError, CassetteMissError):
                    response = await transport(request)
                    if isinstance(response.body, AsyncByteStream):
                        async for _ in response.body:
                            pass

    def _through_client(self, count: int) -> None:
        session = self._session(matcher=lambda live, recorded: True)
        with session, httpx.Client(transport=session.http_transport()) as client:
            for number in range(count):
                with (
                    contextlib.suppress(httpx.HTTPError, ReplayError, CassetteMissError),
                    client.stream("POST", f"http://fuzz.invalid/{number}") as answer,
                ):
                    answer.read()


@pytest.fixture
def folder(tmp_path):
    return tmp_path


def seed_docs() -> dict[str, object]:
    return {name: msgpack.unpackb(data, raw=False) for name, data in SEEDS.items()}


def finish(replay: Replayer, kind: str) -> None:
    report("load and replay", kind, replay.outcomes, len(replay.failures))
    assert not replay.failures, (
        f"{len(replay.failures)} of {sum(replay.outcomes.values())} cases failed:\n"
        + "\n".join(replay.failures[:15])
    )


def test_hostile_values_at_random_nodes_replay_or_fail_typed(folder):
    replay = Replayer(folder, "random")
    rng = random.Random(14)
    docs = seed_docs()
    names = list(docs)
    for index in range(scaled(500)):
        name = names[index % len(names)]
        doc = docs[name]
        paths = list(node_paths(doc))
        path = paths[rng.randrange(1, len(paths))]
        value = HOSTILE[rng.randrange(len(HOSTILE))]
        replay(pack_with(doc, path, value), f"{name} {path} = {value!r:.60}")
    assert replay.outcomes["replayed"] > 0
    assert replay.outcomes["refused at load"] > 0
    assert replay.outcomes["refused at the seam replay"] > 0
    finish(replay, "hostile values at random nodes")


def value_slots(doc: object) -> list[tuple]:
    """Every path inside an interaction: each value a replay reads."""
    return [p for p in node_paths(doc) if len(p) >= 2 and p[0] == "interactions"]


def test_every_slot_of_every_interaction_takes_every_hostile_value(folder):
    """Systematic: the synthetic seed, each slot, each hostile value (a sample of the pairs in
    the suite, all of them in the manual run)."""
    replay = Replayer(folder, "slots")
    doc = msgpack.unpackb(SEEDS["synthetic"], raw=False)
    pairs = [(path, value) for path in value_slots(doc) for value in HOSTILE]
    rng = random.Random(6)
    chosen = pairs if scaled(1) > 1 else rng.sample(pairs, min(len(pairs), 700))
    for path, value in chosen:
        replay(pack_with(doc, path, value), f"synthetic {path} = {value!r:.60}")
    assert replay.outcomes["replayed"] > 0
    finish(replay, "every slot, every hostile value")


def test_bit_flips_and_byte_edits_replay_or_fail_typed(folder):
    replay = Replayer(folder, "flips")
    rng = random.Random(9)
    names = list(SEEDS)
    for index in range(scaled(400)):
        name = names[index % len(names)]
        data = bytearray(SEEDS[name])
        position = rng.randrange(len(data))
        if index % 3 == 0:
            data[position] ^= 1 << rng.randrange(8)
        elif index % 3 == 1:
            data[position:position] = bytes(rng.randrange(256) for _ in range(1 + index % 3))
        else:
            del data[position : position + 1 + index % 3]
        replay(bytes(data), f"{name} edit #{index}")
    assert replay.outcomes["replayed"] > 0
    finish(replay, "bit flips and byte edits")


def test_deep_nesting_in_every_place_fails_typed_not_with_recursion_error(folder):
    """Item 5: a list nested 900 to 5,000 deep where a scalar (a status, a time, a method,
    a header) or a body is expected."""
    replay = Replayer(folder, "deep")
    doc = msgpack.unpackb(SEEDS["synthetic"], raw=False)
    slots = value_slots(doc)
    rng = random.Random(5)
    depths = (900, 990, 1000, 1100, 5000)
    chosen = slots if scaled(1) > 1 else rng.sample(slots, min(len(slots), 60))
    for path in chosen:
        for depth in depths:
            replay(pack_with(doc, path, Deep(depth)), f"{path} nested {depth} deep")
    assert replay.outcomes["refused at load"] > 0
    finish(replay, "deep nesting in every place")


def test_the_named_defects_of_issue_14_are_refused_naming_the_interaction(folder):
    """The six kinds of crash the issue lists, in the first interaction of a file, and a
    recording start (``meta.clock_epoch``) no clock can start at."""
    replay = Replayer(folder, "named")
    doc = msgpack.unpackb(SEEDS["synthetic"], raw=False)
    doc["meta"]["clock_epoch"] = 1_700_000_000.0
    cases = {
        "NaN in a response JSON body": (("interactions", 0, "response", "body", "value"), math.nan),
        "bytes as a JSON value": (("interactions", 0, "response", "body", "value"), {"k": b"v"}),
        "bytes as a JSON key": (("interactions", 0, "request", "body", "value"), {b"k": 1}),
        "a header no wire carries": (("interactions", 0, "response", "headers"), [["x", "a\r\nb"]]),
        "a bad port": (("interactions", 0, "request", "url"), "https://h.invalid:99999/"),
        "an IPv6 literal": (("interactions", 0, "request", "url"), "https://[::1/"),
        # Past MAX_DEPTH (500): refused on every Python, not only where the C encoder meets
        # the recursion limit (3.11; 3.12 and 3.13 encode 995 levels).
        "nesting past 990": (("interactions", 0, "response", "body", "value"), Deep(995)),
        "t: inf": (("interactions", 0, "response", "t_end"), math.inf),
        # Found by the manual run (20x): the virtual clock's start, out of any date's range.
        "clock_epoch: NaN": (("meta", "clock_epoch"), math.nan),
        "clock_epoch: 1e300": (("meta", "clock_epoch"), 1e300),
        "clock_epoch: -inf": (("meta", "clock_epoch"), -math.inf),
    }
    for label, (path, value) in cases.items():
        outcome = replay(pack_with(doc, path, value), label)
        assert outcome.startswith("refused"), (label, outcome)
    # A header value that is not ASCII is no defect since item 1: it replays as its bytes.
    path = ("interactions", 0, "response", "headers")
    outcome = replay(pack_with(doc, path, [["x", "caf\u00e9"]]), "a non-ASCII header")
    assert outcome == "replayed", outcome
    finish(replay, "the named defects")


DEEP_PLACES = {
    "a JSON answer": ("interactions", 0, "response", "body", "value"),
    "an SSE event's data": ("interactions", 1, "response", "body", "events", 0, "data"),
    "an NDJSON line": ("interactions", 2, "response", "body", "lines", 0, "value"),
    "a recorded request's JSON body": ("interactions", 0, "request", "body", "value"),
}


def _at_depth(frames, call):
    """``call()`` run ``frames`` frames deeper than here, as code under test runs it."""
    return call() if frames <= 0 else _at_depth(frames - 1, call)


def _replay_every_interaction(path: Path) -> None:
    interactions = load_cassette(path).interactions
    with CassetteSession(path, wire_check=False, on_unused="ignore") as session:
        for interaction in interactions:
            recorded = interaction.request
            request = TransportRequest(
                recorded.method,
                recorded.url,
                recorded.headers,
                request_body(recorded.body),  # type: ignore[arg-type]
                stream=True,
            )
            with contextlib.suppress(TransportError, ReplayError):  # as the seed recorded
                drain(session.transport(request))


@pytest.mark.parametrize("place", DEEP_PLACES.values(), ids=DEEP_PLACES.keys())
def test_a_value_nested_to_max_depth_replays_and_one_level_deeper_is_refused_naming_it(
    folder, place
):
    """The depth a cassette holds is the product's own, the same on 3.11, 3.12 and 3.13, and
    from 200 frames deep in the caller's stack: no answer depends on where the interpreter's
    recursion limit falls (3.12 gave C code a limit of its own, so 995 levels replayed there
    and were refused on 3.11)."""
    doc = msgpack.unpackb(SEEDS["synthetic"], raw=False)
    path = folder / "deep.msgpack"

    path.write_bytes(pack_with(doc, place, Deep(MAX_DEPTH)))
    load_cassette(path, validate=True)  # what `check` asks
    _at_depth(200, lambda: _replay_every_interaction(path))

    path.write_bytes(pack_with(doc, place, Deep(MAX_DEPTH + 1)))
    with pytest.raises(CassetteFormatError) as checked:
        load_cassette(path, validate=True)
    with pytest.raises(CassetteFormatError) as replayed:
        _at_depth(200, lambda: _replay_every_interaction(path))
    for error in (checked.value, replayed.value):
        assert str(path) in str(error)
        assert f"interaction {place[1]}" in str(error)
        assert "nested deeper than 500 levels" in str(error), error


def test_check_and_show_report_deep_nesting_anywhere_without_a_traceback(tmp_path, capsys):
    """Item 5, as `check` and `show` meet it: a list nested 1,000 and 5,000 deep in each place
    of a cassette gives a line naming the file and exit code 1 (or a rendering, for a place
    that may hold any value), never a traceback."""
    doc = msgpack.unpackb(SEEDS["synthetic"], raw=False)
    slots = [("meta", "k"), *value_slots(doc)]
    rng = random.Random(7)
    chosen = slots if scaled(1) > 1 else rng.sample(slots, min(len(slots), 25))
    outcomes: Counter[str] = Counter()
    failures = []
    for number, path in enumerate(chosen):
        for depth in (1000, 5000):
            target = tmp_path / f"deep{number}-{depth}.msgpack"
            target.write_bytes(pack_with(doc, path, Deep(depth)))
            for command in ("check", "show"):
                try:
                    code = cli_main([command, str(target)])
                except BaseException as exc:  # the bug: a traceback
                    failures.append(f"{command} {path} {depth}: {type(exc).__name__} escaped")
                    continue
                out = capsys.readouterr().out
                if code not in (0, 1) or (command == "check" and str(target) not in out):
                    failures.append(f"{command} {path} {depth}: exit {code}: {out[:200]}")
                outcomes[f"{command} exit {code}"] += 1
    report("check and show", "deep nesting anywhere", outcomes, len(failures))
    assert not failures, "\n".join(failures[:15])
    assert outcomes["check exit 1"] > 0
