"""Round trip, as a property: record -> save -> load -> replay gives the client the same thing.

Hypothesis generates JSON bodies (unicode including astral characters, deep nesting, integers
inside and beyond msgpack's 64-bit range, floats including -0.0 and large exponents) and SSE
streams (multi-line ``data:``, comments, CRLF and CR line ends, a UTF-8 character split across
two chunks, events without data, ``id`` and ``retry`` fields, an unterminated tail). Each is
the "live" answer of a transport wrapped in ``RecordingTransport``; the interaction is saved,
loaded again and replayed by a replay-only ``CassetteSession``.

What must hold: the replayed SSE bytes parse (with the library's ``SseParser``) to the same
events as the original bytes, and a JSON body read by the client is the original value. The
one deliberate normalisation is JSON re-encoding: a JSON payload is stored as its value and
replayed compactly, so its text may differ (spacing, escapes, ``1E2`` vs ``100.0``) while its
value is equal; docs/security.md describes it. Example counts: 300 SSE streams, 300 JSON
bodies, 40 deeply nested bodies.
"""

import itertools
import json
import math
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_toolnexus import (
    ByteStream,
    Cassette,
    CassetteFormatError,
    CassetteSession,
    Headers,
    TransportRequest,
    TransportResponse,
    load_cassette,
)
from pytest_toolnexus._session.record import RecordingTransport
from pytest_toolnexus._store.cassette import JsonBody, SseBody, TextBody
from pytest_toolnexus._store.streams import SseParser, parse_json_text
from tests.support.fuzzing import counted, report_examples, scaled
from tests.support.observers import Kept

URL = "https://api.example.invalid/v1/stream"
SSE = Headers([("content-type", "text/event-stream; charset=utf-8")])
JSON = Headers([("content-type", "application/json")])
PROPERTY = settings(
    max_examples=scaled(300),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


@pytest.fixture(scope="module", autouse=True)
def _examples_report():
    yield
    report_examples("round-trip property")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        made = Path(tempfile.mkdtemp(prefix="toolnexus-prop-", dir=shm))
        yield made
        for child in made.iterdir():
            child.unlink()
        made.rmdir()
    else:
        yield tmp_path_factory.mktemp("prop")


def round_trip(folder: Path, headers: Headers, chunks: list[bytes], *, whole=False):
    """Record ``chunks`` as the live answer, save, load, replay; returns (stored body, bytes)."""
    recorded = []

    def live(request):
        if whole:
            return TransportResponse(200, headers, b"".join(chunks))
        return TransportResponse(200, headers, ByteStream(list(chunks)))

    recorder = RecordingTransport(live, Kept(recorded))
    request = TransportRequest("POST", URL, body={"stream": True}, stream=not whole)
    response = recorder(request)
    if isinstance(response.body, ByteStream):
        seen = b"".join(response.body)
        assert seen == b"".join(chunks)  # recording never changes what the client reads
    (interaction,) = recorded
    path = folder / "round.msgpack"
    # The format itself, as it is: the default save masks account keys ("organization" in a
    # generated event), which tests/test_store_safety.py covers.
    Cassette(path, recorded, {}).save(unsafe_verbatim=True)
    loaded = load_cassette(path, validate=True)
    # What was loaded is what was saved (times are stored to the microsecond).
    assert [i.to_doc() for i in loaded.interactions] == [interaction.to_doc()]
    replay_session = CassetteSession(path, timing="instant")
    replay = replay_session.transport
    answer = replay(TransportRequest("POST", URL, body={"stream": True}, stream=True))
    replayed = b"".join(answer.body)
    replay_session.close()
    return loaded.interactions[0].response.body, replayed


# -- SSE ----------------------------------------------------------------------------------------

ASTRAL = ["😀", "𝄞", "𠀀", "🧪", "é", "€"]
# Text that fits on one SSE line: no CR, LF or NUL, no lone surrogates (see docs/security.md).
line_text = st.text(
    alphabet=st.one_of(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"),
        st.sampled_from(ASTRAL),
    ),
    max_size=12,
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([-0.0, 1e308, -1.7976931348623157e308, 5e-324, 1e-300, 2.5e22]),
    line_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(line_text, inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def sse_event(draw):
    lines = []
    lines += [":" + c for c in draw(st.lists(line_text, max_size=2))]
    if draw(st.booleans()):
        lines.append("event:" + draw(st.sampled_from(["", " "])) + draw(line_text))
    if draw(st.integers(0, 3)) == 0:
        lines.append("id: " + draw(line_text))
    if draw(st.integers(0, 3)) == 0:
        retry = draw(st.one_of(st.integers(0, 10**9).map(str), line_text))
        lines.append("retry: " + retry)
    shape = draw(st.sampled_from(["json", "pretty-json", "text", "none"]))
    if shape == "json":
        lines.append("data: " + json.dumps(draw(json_values), ensure_ascii=draw(st.booleans())))
    elif shape == "pretty-json":  # a JSON payload over several data: lines
        text = json.dumps(draw(json_values), indent=1, ensure_ascii=False)
        lines += ["data:" + part for part in text.split("\n")]
    elif shape == "text":
        lines += ["data: " + part for part in draw(st.lists(line_text, min_size=1, max_size=3))]
    if not lines:
        lines.append("data")  # a field name alone: data is ""
    return lines


@st.composite
def sse_streams(draw):
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    events = draw(st.lists(sse_event(), min_size=1, max_size=6))
    text = "".join(newline.join(lines) + newline + newline for lines in events)
    if draw(st.booleans()):
        text = "\ufeff" + text
    tail = draw(st.sampled_from(["", "", "data: cut off mid-ev", ": just a comment"]))
    data = (text + tail).encode()
    # Chunk boundaries anywhere, so multi-byte characters and CRLF pairs get split.
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=8))))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def parse(chunks):
    parser = SseParser()
    events = [e for chunk in chunks for e in parser.feed(chunk)]
    return events, parser.finish()


def payload(data):
    """An event's data as the client reads it: a JSON value where it is JSON, else the text."""
    if data is None:
        return ("none",)
    ok, value = parse_json_text(data)
    return ("json", canonical(value)) if ok else ("text", data)


def canonical(value):
    """A form in which equal JSON values are equal, telling -0.0 from 0.0 and 1 from 1.0."""
    return json.dumps(value, ensure_ascii=False, allow_nan=True)


def shape(events):
    return [(e.event, payload(e.data), e.id, e.retry, e.comments) for e in events]


def assert_same_events(original_chunks, replayed):
    events, tail = parse(original_chunks)
    again, again_tail = parse([replayed])
    assert shape(again) == shape(events)
    # An unterminated last event is not an event (the spec drops it); its text is kept.
    assert bool(again_tail) == bool(tail)
    if tail:
        ended, _ = parse([*original_chunks, b"\n\n"])
        ended_again, _ = parse([replayed, b"\n\n"])
        assert shape(ended_again) == shape(ended)


@PROPERTY
@given(chunks=sse_streams())
@example(chunks=[b"data: caf", "é 😀".encode()[:3], "é 😀".encode()[3:] + b"\n\n"])
@example(chunks=[b'data: {"a": 1}\r', b"\n\r\nid: 7\r\nretry: 30\r\n\r\n"])
@example(chunks=[b": keep-alive\n\nevent: ping\n\n", b"data\n\n"])
@example(chunks=[b'data: null\n\nid: \ndata: {"organization": []}\n\n'])  # an account key
@counted("SSE streams")
def test_sse_streams_replay_to_the_same_events(folder, chunks):
    stored, replayed = round_trip(folder, SSE, chunks)

    assert isinstance(stored, SseBody)
    assert_same_events(chunks, replayed)


def test_a_utf8_character_split_across_chunks_survives(folder):
    text = "data: 🧪 émigré 𝄞\n\n".encode()
    cut = text.index("🧪".encode()) + 2  # inside the four bytes of the emoji
    chunks = [text[:cut], text[cut:]]
    with pytest.raises(UnicodeDecodeError):
        chunks[0].decode()

    stored, replayed = round_trip(folder, SSE, chunks)

    assert [e["text"] for e in stored.events] == ["🧪 émigré 𝄞"]
    assert replayed == text


# -- JSON bodies --------------------------------------------------------------------------------


@st.composite
def json_bodies(draw):
    value = draw(json_values)
    ensure_ascii = draw(st.booleans())
    indent = draw(st.sampled_from([None, None, 2]))
    text = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent)
    data = text.encode()
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=4))))
    bounds = [0, *cuts, len(data)]
    return value, [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def assert_same_value(value, replayed):
    seen = json.loads(replayed.decode())
    assert canonical(seen) == canonical(value)


@PROPERTY
@given(body=json_bodies(), whole=st.booleans())
@example(
    body=(
        {"n": 2**64 - 1, "m": -(2**63)},
        [b'{"n": 18446744073709551615, "m": -9223372036854775808}'],
    ),
    whole=True,
)
@example(body=({"n": 2**64, "z": -0.0}, [b'{"n": 18446744073709551616, "z": -0.0}']), whole=False)
@example(body=({"e": 1e308, "t": 5e-324}, [b'{"e": 1e+308, "t": 5e-324}']), whole=True)
@example(body=("😀𝄞", [b'"\\ud83d\\ude00\\ud834\\udd1e"']), whole=True)
@counted("JSON bodies")
def test_json_bodies_replay_to_the_same_value(folder, body, whole):
    value, chunks = body

    stored, replayed = round_trip(folder, JSON, chunks, whole=whole)

    assert_same_value(value, replayed)
    beyond_msgpack = any(isinstance(v, int) and not -(2**63) <= v < 2**64 for v in leaves(value))
    # A value msgpack can hold is stored as a value; one it cannot is kept as its text.
    assert isinstance(stored, TextBody if beyond_msgpack else JsonBody)
    if isinstance(stored, TextBody):
        assert replayed == b"".join(chunks)


def leaves(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
    else:
        yield value


@st.composite
def deep_values(draw):
    depth = draw(st.integers(50, 400))
    value = draw(json_scalars)
    for level in range(depth):
        value = [value] if draw(st.booleans()) else {f"k{level}": value}
    return value


@settings(PROPERTY, max_examples=scaled(40))
@given(value=deep_values())
@counted("deeply nested bodies")
def test_deeply_nested_bodies_replay_to_the_same_value(folder, value):
    data = json.dumps(value).encode()

    _, replayed = round_trip(folder, JSON, [data], whole=True)

    assert_same_value(value, replayed)


# -- what does not round-trip -------------------------------------------------------------------


def test_a_lone_surrogate_is_refused_at_write_naming_the_file(folder):
    # JSON may escape half a surrogate pair; msgpack strings must be UTF-8, which cannot hold it.
    recorded = []
    recorder = RecordingTransport(
        lambda request: TransportResponse(200, JSON, b'{"delta": "\\ud83d"}'), Kept(recorded)
    )
    recorder(TransportRequest("POST", URL, body={}))
    path = folder / "surrogate.msgpack"

    with pytest.raises(CassetteFormatError, match="cannot write cassette") as caught:
        Cassette(path, recorded, {}).save()

    assert caught.value.path == str(path)
    assert not path.exists()


def test_a_number_beyond_the_float_range_replays_as_json(folder):
    _, replayed = round_trip(folder, JSON, [b'{"x": 1e400}'], whole=True)

    assert b"Infinity" not in replayed
    assert math.isinf(json.loads(replayed)["x"])
