"""Fuzzing the cassette loader with damaged and hostile bytes (DESIGN §3).

Seeds are the committed cassettes under cassettes/examples/ and synthetic cassettes holding
every body kind. Each case is written to a file and read with ``load_cassette``. It must either
load AND pass ``validate()`` (a flipped bit can leave a valid file), or raise
``CassetteFormatError`` / ``CassetteVersionError`` whose ``.path`` and message name the file.
Nothing else may escape (no KeyError, TypeError, RecursionError, MemoryError), no case may cost
more work than its size allows, and huge declared lengths must not allocate what they claim. A
cassette that loads is also put through the secret scan, which ``pytest-toolnexus check`` runs
next. Each case is also read one interaction at a time, as ``check`` reads it
(``read_streamed``): it must refuse what the loader refuses, naming the file, and read the same
``meta`` and interactions from what the loader loads.

Work is counted, not timed: the function calls (Python and built-in, as ``cProfile`` counts
them) that loading, validating and scanning one case makes. The count is the same on any
machine, loaded or not, and a loader that loops, backtracks or re-walks a document per node on
hostile input blows the linear budget (``WORK_BASE`` + ``WORK_PER_BYTE`` calls a byte) long
before it would blow a time limit.

Case counts (asserted below): truncations 2,048 (every offset of the synthetic seed, 80 random
offsets of each committed one); bit flips 1,000; insertions/deletions 600; structural mutations
900; wrong-type documents 46; huge declared lengths 26; extension types 8; deep nesting 35;
foreign documents 14: 4,677 cases, plus the 6 seeds. ``python3 .ci/dev.py fuzz`` multiplies the
random classes (truncations of the committed seeds, flips, edits, structural mutations).
"""

import cProfile
import gzip
import math
import os
import pickle
import random
import tempfile
import tracemalloc
from pathlib import Path

import msgpack
import pytest

from pytest_toolnexus import (
    Cassette,
    CassetteFormatError,
    CassetteVersionError,
    Headers,
    Interaction,
    RecordedError,
    RecordedRequest,
    RecordedResponse,
    load_cassette,
)
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._seam.errors import CassetteError
from pytest_toolnexus._store.cassette import (
    FORMAT,
    AnyBody,
    BytesBody,
    ChunksBody,
    JsonBody,
    NdjsonBody,
    SseBody,
    TextBody,
    check_bodies,
)
from pytest_toolnexus._store.streamed import read_streamed
from tests.support.fuzzing import report, scaled

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = sorted((ROOT / "cassettes" / "examples").rglob("*.msgpack"))
# The most work one case may cost, in function calls. The seeds and every case here cost at most
# ~6 calls a byte (documents nested 900 deep, parsed and validated level by level) plus a few
# hundred for the loader's fixed steps; the budget leaves room for the loader to change.
WORK_BASE = 2_000
WORK_PER_BYTE = 12
HUGE_PEAK_BYTES = 64 * 2**20


def synthetic_cassette() -> bytes:
    """A small cassette holding every body kind, a transport error and a cut stream."""
    json_headers = Headers([("content-type", "application/json")])
    url = "https://api.example.invalid/v1/x"
    interactions = [
        Interaction(
            RecordedRequest("POST", url, json_headers, JsonBody({"model": "m", "n": [1, 2.5]})),
            RecordedResponse(200, json_headers, JsonBody({"ok": True}), 1.0, 2.0),
        ),
        Interaction(
            RecordedRequest("POST", url, json_headers, AnyBody()),
            RecordedResponse(
                200,
                Headers([("content-type", "text/event-stream")]),
                SseBody(
                    [
                        {"t": 1.0, "event": "a", "id": "1", "retry": 10, "data": {"d": "x"}},
                        {"t": 2.0, "text": "plain", "comments": ["keep-alive"]},
                    ],
                    tail="data: cut",
                ),
                0.5,
                3.0,
                RecordedError("ReadError", "reset", 3.0),
            ),
        ),
        Interaction(
            RecordedRequest("GET", url),
            RecordedResponse(
                200,
                Headers([("content-type", "application/x-ndjson")]),
                NdjsonBody([{"t": 1.0, "value": {"a": 1}}, {"t": 2.0, "text": "nope"}], "{"),
                0.1,
                2.0,
                complete=False,
            ),
        ),
        Interaction(
            RecordedRequest("GET", url),
            RecordedResponse(200, Headers(), ChunksBody([{"t": 0.0, "data": b"\x00\x01"}])),
        ),
        Interaction(RecordedRequest("GET", url), RecordedResponse(502, Headers(), TextBody("x"))),
        Interaction(RecordedRequest("PUT", url, body=BytesBody(b"\xff")), RecordedResponse(204)),
        Interaction(RecordedRequest("GET", url), error=RecordedError("ConnectError", "no", 0.5)),
    ]
    return Cassette(Path("synthetic.msgpack"), interactions, {"k": "v"}).to_bytes()


SYNTHETIC = synthetic_cassette()
SEEDS = {path.name: path.read_bytes() for path in COMMITTED} | {"synthetic": SYNTHETIC}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder for the case files: in memory (/dev/shm) where there is one, it is faster."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        made = Path(tempfile.mkdtemp(prefix="toolnexus-fuzz-", dir=shm))
        yield made
        for child in made.iterdir():
            child.unlink()
        made.rmdir()
    else:
        yield tmp_path_factory.mktemp("fuzz")


def read_as_check_does(path, label):
    """The meta and interactions of ``path`` read one at a time (``read_streamed``, what
    ``check`` reads with), each decoded and its stream checked; or the CassetteError raised."""
    try:
        streamed = read_streamed(path)
        try:
            read = []
            for number, interaction in enumerate(streamed):
                interaction.request  # noqa: B018
                interaction.response  # noqa: B018
                interaction.error  # noqa: B018
                check_bodies(interaction, str(path), number)
                read.append(interaction)
        finally:
            streamed.close()
    except CassetteError as exc:
        return exc
    except BaseException as exc:
        pytest.fail(f"{label}: {type(exc).__name__} escaped the streamed reader: {exc!r:.300}")
    return streamed.meta, read


class Fuzzer:
    def __init__(self, folder: Path, name: str):
        self.path = folder / f"{name}.msgpack"
        self.outcomes = {"loaded": 0, "refused": 0}
        self._profile = cProfile.Profile()

    @property
    def cases(self) -> int:
        return sum(self.outcomes.values())

    def __call__(self, data: bytes, label: str) -> str:
        self.path.write_bytes(data)
        self._profile.enable()
        try:
            cassette = load_cassette(self.path)
            cassette.validate()
            SecretScanner(environ={}).scan(cassette.interactions)
        except CassetteError as exc:
            refused: CassetteError | None = exc
        except BaseException as exc:  # anything else is the bug this test exists to find
            pytest.fail(f"{label}: {type(exc).__name__} escaped the loader: {exc!r:.300}")
        else:
            refused = None
        finally:
            self._profile.disable()
        calls = sum(entry.callcount for entry in self._profile.getstats())
        self._profile.clear()
        streamed = read_as_check_does(self.path, label)
        if refused is not None:
            assert isinstance(refused, CassetteFormatError | CassetteVersionError), label
            assert refused.path == str(self.path), label
            assert str(self.path) in str(refused), label
            assert isinstance(streamed, CassetteFormatError | CassetteVersionError), label
            assert streamed.path == str(self.path), label
        else:
            assert not isinstance(streamed, BaseException), f"{label}: {streamed}"
            meta, interactions = streamed
            assert meta == cassette.meta, label
            assert (
                Cassette(self.path, interactions).to_bytes()
                == Cassette(self.path, cassette.interactions).to_bytes()
            ), label
        outcome = "loaded" if refused is None else "refused"
        budget = WORK_BASE + WORK_PER_BYTE * len(data)
        assert calls <= budget, (
            f"{label}: {outcome} after {calls} function calls, over the budget of {budget} "
            f"for {len(data)} bytes: the work is not linear in the input"
        )
        self.outcomes[outcome] += 1
        return outcome

    def report(self, kind: str) -> None:
        """Add this class's figures to the manual run's table (a failure stops the test)."""
        report("load", kind, self.outcomes, 0)


def test_the_seeds_are_valid_cassettes(folder):
    assert len(COMMITTED) >= 5
    fuzz = Fuzzer(folder, "seeds")
    for name, data in SEEDS.items():
        assert fuzz(data, name) == "loaded"
    assert fuzz.outcomes == {"loaded": len(SEEDS), "refused": 0}


def test_truncations(folder):
    fuzz = Fuzzer(folder, "truncations")
    rng = random.Random(1)
    # Every offset of the synthetic seed, and 80 random offsets of each committed one.
    for cut in range(len(SYNTHETIC)):
        assert fuzz(SYNTHETIC[:cut], f"synthetic[:{cut}]") == "refused"
    for name, data in SEEDS.items():
        if name == "synthetic":
            continue
        for cut in sorted(rng.sample(range(len(data)), min(len(data), scaled(80)))):
            assert fuzz(data[:cut], f"{name}[:{cut}]") == "refused"
    assert fuzz.cases >= len(SYNTHETIC) + 80 * len(COMMITTED)
    assert fuzz.cases >= 2000
    fuzz.report("truncations")


def test_bit_flips(folder):
    fuzz = Fuzzer(folder, "flips")
    rng = random.Random(2)
    names = list(SEEDS)
    for index in range(scaled(1000)):
        name = names[index % len(names)]
        data = bytearray(SEEDS[name])
        for _ in range(1 + index % 3):  # one, two or three flipped bits
            position = rng.randrange(len(data))
            data[position] ^= 1 << rng.randrange(8)
        fuzz(bytes(data), f"{name} flip #{index}")
    assert fuzz.cases == scaled(1000)
    # Flips in string payloads leave valid files; flips in structure must be refused.
    assert fuzz.outcomes["loaded"] > 0
    assert fuzz.outcomes["refused"] > 0
    fuzz.report("bit flips")


def test_byte_insertions_and_deletions(folder):
    fuzz = Fuzzer(folder, "edits")
    rng = random.Random(3)
    names = list(SEEDS)
    for index in range(scaled(600)):
        name = names[index % len(names)]
        data = bytearray(SEEDS[name])
        position = rng.randrange(len(data))
        if index % 2:
            data[position:position] = bytes(rng.randrange(256) for _ in range(1 + index % 4))
        else:
            del data[position : position + 1 + index % 4]
        fuzz(bytes(data), f"{name} edit #{index}")
    assert fuzz.cases == scaled(600)
    assert fuzz.outcomes["refused"] > 0
    fuzz.report("insertions and deletions")


WRONG_VALUES = [
    None,
    True,
    False,
    0,
    -1,
    2**64 - 1,
    -(2**63),
    1.5,
    -0.0,
    math.nan,
    math.inf,
    "",
    "x",
    "json",
    b"",
    b"\x00\xff",
    [],
    [None],
    [["a"]],
    [["a", 1]],
    [["a", "b", "c"]],
    {},
    {"kind": "sse"},
    {"kind": "sse", "events": [1]},
    {"kind": "json"},
    {"kind": "bytes", "data": "str"},
    {"t": -1},
    {"t": math.nan, "data": b"x"},
    {"data": {b"bin-key": 1}},
    {1: "int key"},
    msgpack.ExtType(7, b"ext"),
]


def node_paths(doc, path=()):
    yield path
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from node_paths(value, (*path, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from node_paths(value, (*path, index))


def with_replaced(doc, path, value):
    if not path:
        return value
    head, *rest = path
    if isinstance(doc, dict):
        return {k: with_replaced(v, rest, value) if k == head else v for k, v in doc.items()}
    return [with_replaced(v, rest, value) if i == head else v for i, v in enumerate(doc)]


def without(doc, path):
    head, *rest = path
    if not rest:
        if isinstance(doc, dict):
            return {k: v for k, v in doc.items() if k != head}
        return [v for i, v in enumerate(doc) if i != head]
    if isinstance(doc, dict):
        return {k: without(v, rest) if k == head else v for k, v in doc.items()}
    return [without(v, rest) if i == head else v for i, v in enumerate(doc)]


def pack(doc) -> bytes:
    return msgpack.packb(doc, use_bin_type=True, strict_types=False)


def test_structural_mutations(folder):
    """A node anywhere in a real document is replaced by a value of a wrong type, or removed."""
    fuzz = Fuzzer(folder, "structure")
    rng = random.Random(4)
    docs = {name: msgpack.unpackb(data, raw=False) for name, data in SEEDS.items()}
    names = list(docs)
    for index in range(scaled(900)):
        name = names[index % len(names)]
        doc = docs[name]
        paths = list(node_paths(doc))
        path = paths[rng.randrange(len(paths))]
        if path and index % 5 == 0:
            mutated = without(doc, path)
            label = f"{name} without {path}"
        else:
            value = WRONG_VALUES[rng.randrange(len(WRONG_VALUES))]
            mutated = with_replaced(doc, path, value)
            label = f"{name} {path} = {value!r}"
        fuzz(pack(mutated), label)
    assert fuzz.cases == scaled(900)
    assert fuzz.outcomes["refused"] > 300
    assert fuzz.outcomes["loaded"] > 50  # some paths accept any value (meta, JSON bodies)
    fuzz.report("structural mutations")


def document(**changes):
    doc = {"format": FORMAT, "version": 1, "meta": {}, "interactions": []}
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not ...}


GOOD_REQUEST = {
    "method": "GET",
    "url": "https://x.invalid/",
    "headers": [],
    "body": {"kind": "empty"},
}


def one(interaction=None, **response):
    reply = {"status": 200, "headers": [], "body": {"kind": "empty"}} | response
    return document(interactions=[interaction or {"request": GOOD_REQUEST, "response": reply}])


def sse(*events):
    return one(body={"kind": "sse", "events": list(events)})


WRONG_DOCUMENTS = {
    "a list": [1, 2, 3],
    "an int": 7,
    "a string": "pytest-toolnexus-cassette",
    "nil": None,
    "a float": 1.5,
    "binary": b"\x00" * 8,
    "an empty map": {},
    "no format": document(format=...),
    "format as bytes": document(format=FORMAT.encode()),
    "version as text": document(version="1"),
    "version as float": document(version=1.0),
    "version as bool": document(version=True),
    "version 0": document(version=0),
    "version -1": document(version=-1),
    "version missing": document(version=...),
    "meta as list": document(meta=[]),
    "interactions as map": document(interactions={}),
    "interactions missing": document(interactions=...),
    "interaction as list": document(interactions=[[1]]),
    "interaction empty": document(interactions=[{}]),
    "request missing": one({"response": {"status": 200}}),
    "response and error": one({"request": GOOD_REQUEST, "response": {}, "error": {}}),
    "method as int": one({"request": GOOD_REQUEST | {"method": 1}, "response": {"status": 1}}),
    "url as bytes": one({"request": GOOD_REQUEST | {"url": b"x"}, "error": {"kind": "E"}}),
    "headers as map": one({"request": GOOD_REQUEST | {"headers": {"a": "b"}}, "error": {}}),
    "header triple": one(headers=[["a", "b", "c"]]),
    "header value int": one(headers=[["a", 1]]),
    "status as text": one(status="200"),
    "status as bool": one(status=True),
    "status 99": one(status=99),
    "status 600": one(status=600),
    "complete as text": one(complete="yes"),
    "t_headers negative": one(t_headers=-5),
    "t_end nan": one(t_end=math.nan),
    "error kind int": one(error={"kind": 5, "message": "m"}),
    "unknown body kind": one(body={"kind": "zip"}),
    "json body no value": one(body={"kind": "json"}),
    "bytes body with text": one(body={"kind": "bytes", "data": "text"}),
    "events as map": one(body={"kind": "sse", "events": {}}),
    "event not a map": sse(1),
    "event time text": sse({"t": "soon", "data": 1}),
    "event name int": sse({"t": 1, "event": 5}),
    "event retry bool": sse({"t": 1, "retry": True, "data": 1}),
    "comments not strings": sse({"t": 1, "comments": [1]}),
    "data with binary keys": sse({"t": 1, "data": {b"k": 1}}),
    "chunk data text": one(body={"kind": "chunks", "chunks": [{"t": 0, "data": "x"}]}),
}


def test_wrong_type_documents(folder):
    fuzz = Fuzzer(folder, "wrong")
    for label, doc in WRONG_DOCUMENTS.items():
        assert fuzz(pack(doc), label) == "refused", label
    assert fuzz.cases == len(WRONG_DOCUMENTS) == 46
    fuzz.report("wrong-type documents")


HUGE_HEADS = {
    "str32": b"\xdb",
    "bin32": b"\xc6",
    "array32": b"\xdd",
    "map32": b"\xdf",
    "ext32": b"\xc9",
    "str16": b"\xda",
}


def huge_cases():
    head_of_map = b"\x84"  # fixmap of 4: format, version, meta, interactions
    body = pack(document(interactions=...))[1:]
    for name, head in HUGE_HEADS.items():
        for claimed in (2**31, 2**32 - 1):
            size = (min(claimed, 2**16 - 1)).to_bytes(2, "big") if name == "str16" else None
            length = size or claimed.to_bytes(4, "big")
            ext = b"\x05" if name == "ext32" else b""
            value = head + length + ext + b"abc"
            yield f"top-level {name} claiming {claimed}", value
            yield (
                f"interactions as {name} claiming {claimed}",
                head_of_map + body + pack("interactions") + value,
            )


def test_huge_declared_lengths_allocate_nothing(folder):
    fuzz = Fuzzer(folder, "huge")
    cases = list(huge_cases())
    # And a real cassette whose interactions array claims two billion entries.
    real = bytearray(SYNTHETIC)
    at = real.index(pack("interactions")) + len(pack("interactions"))
    assert real[at] & 0xF0 == 0x90  # a fixarray
    cases.append(("synthetic with array32 of 2**31", bytes(real[:at]) + b"\xdd\x80\x00\x00\x00"))
    cases.append(
        (
            "synthetic with array32 2**31 + body",
            bytes(real[:at]) + b"\xdd\x80\x00\x00\x00" + bytes(real[at + 1 :]),
        )
    )
    tracemalloc.start()
    try:
        for label, data in cases:
            tracemalloc.reset_peak()
            assert fuzz(data, label) == "refused", label
            _, peak = tracemalloc.get_traced_memory()
            assert peak < HUGE_PEAK_BYTES, f"{label}: peak {peak} bytes"
    finally:
        tracemalloc.stop()
    assert fuzz.cases == 26
    fuzz.report("huge declared lengths")


def test_extension_types_are_refused(folder):
    fuzz = Fuzzer(folder, "ext")
    cases = {
        "ext at top level": msgpack.ExtType(1, b"x"),
        "ext as meta value": document(meta={"k": msgpack.ExtType(2, b"")}),
        "ext in a JSON body": one(body={"kind": "json", "value": [msgpack.ExtType(3, b"ab")]}),
        "ext as status": one(status=msgpack.ExtType(4, b"\x00")),
        "timestamp at top level": msgpack.Timestamp(1, 0),
        "timestamp as meta value": document(meta={"at": msgpack.Timestamp(1700000000, 5)}),
        "timestamp 96-bit in a request body": one(
            body={"kind": "json", "value": msgpack.Timestamp(2**40, 1)}
        ),
    }
    raw = {
        # ext codes below 0 are reserved; msgpack.ExtType cannot even build one.
        "reserved ext code -5": pack(document(meta={"k": MARKER})).replace(
            pack(MARKER), b"\xd4\xfbz"
        ),
    }
    for label, doc in cases.items():
        assert fuzz(pack(doc), label) == "refused", label
    for label, data in raw.items():
        assert fuzz(data, label) == "refused", label
    assert fuzz.cases == 8
    fuzz.report("extension types")


MARKER = "@@DEEP@@"


def deep_cases():
    places = {
        "top level": MARKER,
        "meta value": document(meta={"k": MARKER}),
        "request body": one(
            {
                "request": GOOD_REQUEST | {"body": {"kind": "json", "value": MARKER}},
                "response": {"status": 200},
            }
        ),
        "sse data": sse({"t": 1, "data": MARKER}),
        "ndjson value": one(body={"kind": "ndjson", "lines": [{"t": 1, "value": MARKER}]}),
        "header list": one(headers=MARKER),
        "interactions": document(interactions=MARKER),
    }
    for place, doc in places.items():
        packed = pack(doc)
        for depth in (100, 900, 1100, 5000, 100_000):
            kind = b"\x91" if depth % 2 == 0 else b"\x81\xa1k"
            nest = kind * depth + b"\xc0"
            yield f"{place} nested {depth} deep", packed.replace(pack(MARKER), nest)


def test_deeply_nested_documents(folder):
    fuzz = Fuzzer(folder, "deep")
    for label, data in deep_cases():
        fuzz(data, label)
    assert fuzz.cases == 35
    assert fuzz.outcomes["refused"] > 0
    fuzz.report("deep nesting")


def test_foreign_documents_are_refused(folder):
    fuzz = Fuzzer(folder, "foreign")
    vcr_like = {"interactions": [{"request": {"uri": "https://x"}, "response": {}}], "version": 1}
    cases = {
        "vcr-shaped msgpack": pack(vcr_like),
        "another tool's format": pack(document(format="vcrpy-cassette")),
        "format key as bytes": msgpack.packb({b"format": FORMAT.encode(), b"version": 1}),
        "json text": b'{"format": "pytest-toolnexus-cassette", "version": 1}',
        "yaml text": b"interactions:\n- request:\n    uri: https://x\nversion: 1\n",
        "gzip of a cassette": gzip.compress(SYNTHETIC),
        "pickle": pickle.dumps({"format": FORMAT, "version": 1}),
        "png header": b"\x89PNG\r\n\x1a\n" + b"\x00" * 16,
        "two documents": SYNTHETIC + SYNTHETIC,
        "trailing byte": SYNTHETIC + b"\x00",
        "empty": b"",
        "one nil": b"\xc0",
        "never-used byte": b"\xc1",
        "newer version": pack(document(version=2, interactions=[{"future": True}])),
    }
    for label, data in cases.items():
        assert fuzz(data, label) == "refused", label
    assert fuzz.cases == 14
    fuzz.report("foreign documents")
    with pytest.raises(CassetteVersionError, match="uses format version 2"):
        load_cassette(fuzz.path)
