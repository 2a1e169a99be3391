"""The AWS event stream codec: byte-exact both ways, checked against botocore's own parser."""

import json
import zlib

import msgpack
import pytest
from botocore.eventstream import EventStreamBuffer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_toolnexus import CassetteFormatError, load_cassette
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._session.record import BodyRecorder
from pytest_toolnexus._store.cassette import (
    Cassette,
    ChunksBody,
    EventStreamBody,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    body_from_doc,
    frame_doc,
)
from pytest_toolnexus._store.eventstream import (
    EventStreamError,
    Frame,
    FrameSplitter,
    Header,
    decode,
    encode,
)

names = st.text(min_size=1, max_size=24).filter(lambda n: len(n.encode()) < 256)
INTEGER_RANGES = {
    "byte": (-(2**7), 2**7 - 1),
    "short": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
    "timestamp": (-(2**63), 2**63 - 1),
}


def values(kind):
    if kind == "bool":
        return st.booleans()
    if kind in INTEGER_RANGES:
        low, high = INTEGER_RANGES[kind]
        return st.integers(low, high)
    if kind == "bytes":
        return st.binary(max_size=64)
    if kind == "uuid":
        return st.binary(min_size=16, max_size=16)
    return st.text(max_size=64)


kinds = st.sampled_from(["bool", *INTEGER_RANGES, "bytes", "uuid", "string"])
headers = kinds.flatmap(lambda kind: st.builds(Header, names, st.just(kind), values(kind)))
frames = st.builds(
    Frame,
    st.lists(headers, max_size=6).map(tuple),
    st.binary(max_size=256)
    | st.dictionaries(st.text(max_size=8), st.integers()).map(
        lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()
    ),
)


# Judged on what they find, not how fast a busy machine generates the examples.
UNHURRIED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@UNHURRIED
@given(frames)
def test_decode_undoes_encode(frame):
    assert decode(encode(frame)) == frame


@given(frames)
def test_encode_gives_back_the_bytes_of_any_valid_frame(frame):
    wire = encode(frame)
    assert encode(decode(wire)) == wire


# A frame made by hand, not by the codec: total 16, no headers, no payload; both CRCs are
# CRC32s of what precedes them (the empty-message vector of AWS's event stream test suite).
EMPTY = b"\x00\x00\x00\x10\x00\x00\x00\x00\x05\xc2\x48\xeb\x7d\x98\xc8\xff"


def test_a_frame_made_elsewhere_decodes_and_encodes_back_byte_for_byte():
    assert zlib.crc32(EMPTY[:8]) == 0x05C248EB
    assert decode(EMPTY) == Frame((), b"")
    assert encode(decode(EMPTY)) == EMPTY


@given(st.lists(headers, max_size=6, unique_by=lambda h: h.name), st.binary(max_size=256))
def test_botocore_reads_what_we_encode(header_list, payload):
    buffer = EventStreamBuffer()
    buffer.add_data(encode(Frame(tuple(header_list), payload)))
    (message,) = list(buffer)

    assert message.payload == payload
    assert message.headers == {h.name: h.value for h in header_list}


@given(frames, st.data())
def test_any_flipped_bit_is_refused(frame, data):
    wire = bytearray(encode(frame))
    bit = data.draw(st.integers(0, len(wire) * 8 - 1))
    wire[bit // 8] ^= 1 << (bit % 8)

    with pytest.raises(EventStreamError):
        decode(bytes(wire))


@UNHURRIED
@given(st.lists(frames, min_size=1, max_size=4), st.data())
def test_the_splitter_finds_the_same_frames_however_the_bytes_are_chunked(batch, data):
    wire = b"".join(encode(f) for f in batch)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    chunks = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
    splitter = FrameSplitter()

    found = [decode(raw) for chunk in chunks for raw in splitter.feed(chunk)]

    assert found == batch
    assert splitter.finish() == b""


@given(frames)
def test_a_stored_frame_survives_the_cassette_byte_for_byte(frame):
    wire = encode(frame)
    doc = EventStreamBody([frame_doc(12.5, wire)], b"").to_doc()
    loaded = body_from_doc(msgpack.unpackb(msgpack.packb(doc, use_bin_type=True)), timed=True)

    assert list(loaded.pieces()) == [(12.5, wire)]


def test_a_json_payload_is_stored_parsed_and_its_headers_decoded():
    payload = b'{"contentBlockIndex":0,"delta":{"text":"Hi \xc3\xa9"},"p":"abcd"}'
    wire = encode(
        Frame(
            (
                Header(":event-type", "string", "contentBlockDelta"),
                Header(":content-type", "string", "application/json"),
                Header(":message-type", "string", "event"),
            ),
            payload,
        )
    )

    doc = frame_doc(3.25, wire)

    assert doc == {
        "t": 3.25,
        "headers": [
            [":event-type", "string", "contentBlockDelta"],
            [":content-type", "string", "application/json"],
            [":message-type", "string", "event"],
        ],
        "payload": {"contentBlockIndex": 0, "delta": {"text": "Hi é"}, "p": "abcd"},
    }
    # JSON that would not encode back to its very bytes is kept as its text.
    spaced = frame_doc(0, encode(Frame((), b'{"a": 1}')))
    assert spaced["text"] == '{"a": 1}'
    assert "payload" not in spaced


EVENTSTREAM = Headers({"content-type": "application/vnd.amazon.eventstream"})


def test_the_recorder_stamps_each_frame_when_its_last_byte_arrives():
    one, two = encode(Frame((), b'{"n":1}')), encode(Frame((), b'{"n":2}'))
    recorder = BodyRecorder(EVENTSTREAM)
    recorder.feed(one[:5], 1.0)
    recorder.feed(one[5:] + two[:3], 2.0)
    recorder.feed(two[3:] + b"\x00\x00", 3.0)

    body = recorder.finish()

    assert isinstance(body, EventStreamBody)
    assert [(f["t"], f["payload"]) for f in body.frames] == [(2.0, {"n": 1}), (3.0, {"n": 2})]
    assert body.tail == b"\x00\x00"
    assert b"".join(piece for _, piece in body.pieces()) == one + two + b"\x00\x00"


def test_a_body_that_is_not_an_event_stream_after_all_is_kept_as_its_chunks():
    recorder = BodyRecorder(EVENTSTREAM)
    recorder.feed(b'{"message": "not frames at all"}', 1.0)

    body = recorder.finish()

    assert isinstance(body, ChunksBody)
    assert list(body.pieces()) == [(1.0, b'{"message": "not frames at all"}')]


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        ([":n", "float", 1.5], "bad name or type"),
        ([":n", "byte", 300], "out of range"),
        ([":n", "string", 7], "is a string"),
    ],
)
def test_a_broken_stored_frame_is_a_format_error_naming_the_file(tmp_path, header, problem):
    path = tmp_path / "broken.msgpack"
    frames = [{"t": 1.0, "headers": [header], "payload": {"a": 1}}]
    response = RecordedResponse(200, body=EventStreamBody(frames))
    Cassette(path, [Interaction(RecordedRequest("POST", "http://x/"), response)]).save()

    with pytest.raises(CassetteFormatError, match=rf"broken\.msgpack is corrupt.*{problem}"):
        load_cassette(path, validate=True)
