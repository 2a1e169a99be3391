"""Cassette format version 1 (DESIGN §3, docs/cassette-format.md): every body kind round-trips,
the same input always gives the same bytes, a broken or newer file is a typed error naming the
file and never an empty cassette, and writes are atomic.
"""

import dataclasses
import os
import pickle
import random
from pathlib import Path

import msgpack
import pytest

from pytest_toolnexus._seam.errors import (
    CassetteError,
    CassetteFormatError,
    CassetteNotFoundError,
    CassetteVersionError,
)
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import TransportRequest, TransportResponse
from pytest_toolnexus._session.record import BodyRecorder, RecordingTransport
from pytest_toolnexus._session.session import CassetteSession
from pytest_toolnexus._store.cassette import (
    FORMAT,
    VERSION,
    BytesBody,
    Cassette,
    ChunksBody,
    EmptyBody,
    Interaction,
    JsonBody,
    NdjsonBody,
    RecordedError,
    RecordedRequest,
    RecordedResponse,
    SseBody,
    TextBody,
    load_cassette,
    sse_event_doc,
    sse_event_of,
)
from pytest_toolnexus._store.streams import SseEvent, SseParser
from tests.support.observers import Kept

URL = "https://api.example.test/v1/chat/completions"

# Three chunks, arriving at 0, 10 and 20 ms.
SSE_CHUNKS = [
    b": OPENROUTER PROCESSING\n\nevent: message_start\nid: evt-1\n",
    b"retry: 2500\n"
    b'data: {"type": "message_start", "n": 1.5, "ok": true, "none": null}\n\n'
    b"data: first\ndata: second\n\n",
    b'data: 42\n\ndata: "quoted"\n\nevent: ping\n\ndata: [DONE]\n\nevent: cut\ndata: half',
]
SSE_WIRE = b"".join(SSE_CHUNKS)
NDJSON_CHUNKS = [
    b'{"message":{"content":"H\xc3',
    b'\xa9"},"done":false}\nthis line is not json\n[1, 2, 3]\n',
    b'{"done":true}\n{"partial":',
]


def recorded_body(content_type, chunks):
    """The stored body the recorder builds from ``chunks`` arriving 10 ms apart."""
    recorder = BodyRecorder(Headers([("content-type", content_type)]))
    for index, chunk in enumerate(chunks):
        recorder.feed(chunk, 10.0 * index + 0.0004)
    return recorder.finish()


def request(body=None):
    return RecordedRequest(
        "POST",
        URL,
        Headers([("content-type", "application/json"), ("x-trace", "a"), ("x-trace", "b")]),
        body if body is not None else JsonBody({"model": "m", "stream": True}),
    )


def response(body, **fields):
    headers = fields.pop("headers", Headers([("content-type", "application/octet-stream")]))
    return RecordedResponse(200, headers, body, t_headers=12.346, t_end=99.5, **fields)


def every_kind():
    """One interaction per body kind and per way an interaction can end."""
    sse = recorded_body("text/event-stream", SSE_CHUNKS)
    ndjson = recorded_body("application/x-ndjson", NDJSON_CHUNKS)
    chunks = recorded_body("application/octet-stream", [b"\x00\xff", b"", b"\x89PNG\r\n"])
    return [
        Interaction(request(EmptyBody()), response(EmptyBody())),
        Interaction(
            request(),
            response(JsonBody({"z": 1, "a": [1, 2.5, None, True, "\u00e9"], "nested": {"k": {}}})),
        ),
        Interaction(request(TextBody("a=1&b=2")), response(TextBody("<html>502</html>"))),
        Interaction(request(BytesBody(b"\x00\x01")), response(BytesBody(b"\xff\xfe\x00"))),
        Interaction(request(), response(sse)),
        Interaction(request(), response(ndjson)),
        Interaction(request(), response(chunks)),
        Interaction(
            request(),
            response(
                SseBody([{"t": 5.0, "data": {"delta": "He"}}]),
                error=RecordedError("RemoteProtocolError", "peer closed connection", 55.25),
            ),
        ),
        Interaction(request(), response(SseBody([{"t": 5.0, "text": "x"}]), complete=False)),
        Interaction(request(), error=RecordedError("ConnectError", "connection refused", 1.5)),
        Interaction(
            request(),
            response(
                JsonBody({"ok": True}),
                headers=Headers(
                    [
                        ("Set-Cookie", "a=1; Path=/"),
                        ("content-type", "application/json"),
                        ("set-cookie", "b=2; Path=/"),
                    ]
                ),
            ),
        ),
    ]


@pytest.fixture
def saved(tmp_path):
    cassette = Cassette(tmp_path / "every-kind.msgpack", every_kind(), {"note": "x"})
    # The format itself, byte for byte: a set-cookie header must survive as it was given.
    # What a default save redacts is tested in tests/test_store_safety.py.
    cassette.save(unsafe_verbatim=True)
    return cassette


def test_every_interaction_survives_save_and_load(saved):
    loaded = load_cassette(saved.path)

    assert loaded.interactions == saved.interactions
    assert loaded.meta == {"note": "x"}
    assert loaded.path == saved.path


def test_a_loaded_interaction_stands_for_the_interaction_it_was_saved_from(saved):
    loaded = load_cassette(saved.path).interactions
    original = saved.interactions

    for mine, theirs in zip(loaded, original, strict=True):
        assert isinstance(mine, Interaction)
        assert mine == theirs
        assert theirs == mine  # both ways round
        assert (mine != theirs) is False
        assert repr(mine) == repr(theirs)
        copied = pickle.loads(pickle.dumps(mine))
        assert type(copied) is Interaction
        assert copied == theirs
        assert dataclasses.replace(mine) == theirs
        with pytest.raises(dataclasses.FrozenInstanceError):
            mine.request = theirs.request  # type: ignore[misc]
    assert loaded[0] != loaded[1]
    hashable = Interaction(original[0].request, error=RecordedError("ConnectError", "x", 1.0))
    path = saved.path.with_name("hash.msgpack")
    Cassette(path, [hashable]).save(unsafe_verbatim=True)
    assert hash(load_cassette(path).interactions[0]) == hash(hashable)


def test_sse_events_are_stored_parsed_with_every_field(saved):
    body = load_cassette(saved.path).interactions[4].response.body

    assert isinstance(body, SseBody)
    assert [{k: v for k, v in e.items() if k != "t"} for e in body.events] == [
        {"comments": ["OPENROUTER PROCESSING"]},
        {
            "event": "message_start",
            "id": "evt-1",
            "retry": 2500,
            "data": {"type": "message_start", "n": 1.5, "ok": True, "none": None},
        },
        {"text": "first\nsecond"},
        {"data": 42},
        {"data": "quoted"},
        {"event": "ping"},
        {"text": "[DONE]"},
    ]
    # Offsets are in ms, as floats rounded to the microsecond.
    # Each event is stamped with the arrival of the chunk that completed it.
    assert [e["t"] for e in body.events] == [0.0, 10.0, 10.0, 20.0, 20.0, 20.0, 20.0]
    assert all(type(e["t"]) is float for e in body.events)
    assert body.tail == "event: cut\ndata: half"


def test_a_replayed_sse_body_reparses_to_the_recorded_events(saved):
    body = load_cassette(saved.path).interactions[4].response.body
    parser = SseParser()

    events = []
    for _, piece in body.pieces():
        events += parser.feed(piece)
    tail = parser.finish()

    original = SseParser()
    expected = original.feed(SSE_WIRE)
    # JSON data comes back as its value, re-encoded compactly; everything else is unchanged.
    expected[1].data = '{"type":"message_start","n":1.5,"ok":true,"none":null}'
    assert events == expected
    assert tail == original.finish()
    assert events[-1] == SseEvent(data="[DONE]")


def test_ndjson_lines_keep_json_and_text_apart(saved):
    body = load_cassette(saved.path).interactions[5].response.body

    assert isinstance(body, NdjsonBody)
    assert list(body.lines) == [
        {"t": 10.0, "value": {"message": {"content": "H\u00e9"}, "done": False}},
        {"t": 10.0, "text": "this line is not json"},
        {"t": 10.0, "value": [1, 2, 3]},
        {"t": 20.0, "value": {"done": True}},
    ]
    assert body.tail == '{"partial":'
    assert body.content().endswith(b'{"done":true}\n{"partial":')


def test_chunks_keep_their_bytes_and_times(saved):
    body = load_cassette(saved.path).interactions[6].response.body

    assert isinstance(body, ChunksBody)
    # The empty chunk carried nothing and is not stored.
    assert list(body.pieces()) == [(0.0, b"\x00\xff"), (20.0, b"\x89PNG\r\n")]


def test_errors_and_incomplete_streams_survive(saved):
    interactions = load_cassette(saved.path).interactions

    cut = interactions[7].response
    assert cut.error == RecordedError("RemoteProtocolError", "peer closed connection", 55.25)
    assert cut.complete is True
    assert interactions[8].response.complete is False
    assert interactions[8].response.error is None
    assert interactions[9].response is None
    assert interactions[9].error == RecordedError("ConnectError", "connection refused", 1.5)


def test_multi_value_headers_keep_every_value_in_order(saved):
    loaded = load_cassette(saved.path).interactions

    headers = loaded[10].response.headers
    assert headers.get_list("set-cookie") == ["a=1; Path=/", "b=2; Path=/"]
    assert headers.multi_items() == [
        ("Set-Cookie", "a=1; Path=/"),
        ("content-type", "application/json"),
        ("set-cookie", "b=2; Path=/"),
    ]
    assert loaded[0].request.headers.get_list("x-trace") == ["a", "b"]


def test_the_document_layout_is_format_version_1(saved):
    doc = msgpack.unpackb(saved.path.read_bytes(), raw=False)

    assert list(doc) == ["format", "version", "meta", "interactions"]
    assert doc["format"] == FORMAT == "pytest-toolnexus-cassette"
    assert doc["version"] == VERSION == 1
    first = doc["interactions"][0]
    assert first == {
        "request": {
            "method": "POST",
            "url": URL,
            "headers": [["content-type", "application/json"], ["x-trace", "a"], ["x-trace", "b"]],
            "body": {"kind": "empty"},
        },
        "response": {
            "status": 200,
            "headers": [["content-type", "application/octet-stream"]],
            "t_headers": 12.346,
            "t_end": 99.5,
            "body": {"kind": "empty"},
        },
    }
    assert doc["interactions"][3]["response"]["body"] == {"kind": "bytes", "data": b"\xff\xfe\x00"}
    assert doc["interactions"][7]["response"]["error"] == {
        "kind": "RemoteProtocolError",
        "message": "peer closed connection",
        "t": 55.25,
    }
    assert doc["interactions"][8]["response"]["complete"] is False
    assert doc["interactions"][9]["error"]["kind"] == "ConnectError"


def test_times_are_stored_as_milliseconds_rounded_to_the_microsecond(tmp_path):
    interaction = Interaction(
        request(),
        RecordedResponse(
            200,
            body=SseBody([sse_doc(1.23456789)]),
            t_headers=0.0004999,
            t_end=7,
            error=RecordedError("ReadTimeout", "timed out", 2.0000004),
        ),
    )
    path = tmp_path / "times.msgpack"
    Cassette(path, [interaction]).save()

    loaded = load_cassette(path).interactions[0].response
    assert (loaded.t_headers, loaded.t_end, loaded.error.t) == (0.0, 7.0, 2.0)
    assert loaded.body.events[0]["t"] == 1.235
    assert type(msgpack.unpackb(path.read_bytes())["interactions"][0]["response"]["t_end"]) is float


def sse_doc(t_ms):
    return sse_event_doc(t_ms, SseEvent(data="x"))


def test_the_same_interactions_encode_to_the_same_bytes(tmp_path):
    first = Cassette(tmp_path / "a.msgpack", every_kind(), {"b": 1, "a": 2})
    second = Cassette(tmp_path / "b.msgpack", every_kind(), {"b": 1, "a": 2})
    first.save()
    second.save()

    assert first.path.read_bytes() == second.path.read_bytes()
    assert load_cassette(first.path).to_bytes() == first.path.read_bytes()


def test_a_session_recording_the_same_thing_twice_writes_the_same_bytes(tmp_path, monkeypatch):
    def live(req):
        return TransportResponse(
            200,
            [("content-type", "application/json"), ("set-cookie", "s=1"), ("x-id", "7")],
            {"answer": [1, 2, {"k": "v"}]},
        )

    def record(name):
        ticks = iter(range(1000))
        monkeypatch.setattr(
            "pytest_toolnexus._session.record.real_monotonic", lambda: next(ticks) * 0.0125
        )
        path = tmp_path / name
        with CassetteSession(path, record="all", live=live) as session:
            session.transport(
                request_for({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
            )
            session.transport(request_for({"model": "m", "n": 2}))
        return path

    first, second = record("one.msgpack"), record("two.msgpack")

    one, two = load_cassette(first), load_cassette(second)
    assert {"recorded_at", "recorded_with"} <= one.meta.keys()
    assert [i.request.headers["authorization"] for i in one.interactions] == ["REDACTED"] * 2
    # Only the metadata (when it was recorded) may differ: with it swapped in, the files are
    # byte for byte equal.
    two.meta = one.meta
    assert two.to_bytes() == first.read_bytes()


@pytest.mark.parametrize(
    ("body", "text"),
    [({1: "a", 2: "b"}, '{"1":"a","2":"b"}'), ({"n": 2**70}, '{"n":1180591620717411303424}')],
    ids=["int-keys", "huge-int"],
)
def test_a_body_msgpack_cannot_carry_is_stored_as_text_and_stays_loadable(tmp_path, body, text):
    path = tmp_path / "odd.msgpack"
    recorded = []

    def live(req):
        return TransportResponse(200, [("content-type", "application/json")], body)

    RecordingTransport(live, Kept(recorded))(request_for(body))
    Cassette(path, recorded).save()

    (interaction,) = load_cassette(path).interactions
    assert interaction.request.body == TextBody(text)
    assert interaction.response.body == TextBody(text)


def request_for(body):
    return TransportRequest("POST", URL, headers=[("authorization", "Bearer sk-x")], body=body)


# -- loading broken files ---------------------------------------------------------------------


def write(tmp_path, data, name="broken.msgpack"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def packed(doc):
    return msgpack.packb(doc, use_bin_type=True)


def valid_doc(**changes):
    doc = {"format": FORMAT, "version": 1, "meta": {}, "interactions": []}
    doc.update(changes)
    return doc


def test_a_newer_version_is_a_version_error_naming_the_file(tmp_path):
    path = write(tmp_path, packed(valid_doc(version=2)), "from-the-future.msgpack")

    with pytest.raises(CassetteVersionError) as caught:
        load_cassette(path)

    assert caught.value.path == str(path)
    assert str(path) in str(caught.value)
    assert "version 2" in str(caught.value)
    assert "upgrade pytest-toolnexus" in str(caught.value)


def good_bytes():
    return Cassette(Path("unused"), every_kind(), {"recorded_with": "x"}).to_bytes()


def corrupt_interaction(**request_changes):
    interaction = every_kind()[1].to_doc()
    interaction["request"].update(request_changes)
    return interaction


BROKEN = {
    "truncated": lambda: good_bytes()[: len(good_bytes()) // 2],
    "zero-bytes": lambda: b"",
    "random-bytes": lambda: random.Random(1234).randbytes(512),
    "trailing-bytes": lambda: good_bytes() + b"\x00",
    "a-list": lambda: packed([FORMAT, 1]),
    "a-map-without-marker": lambda: packed({"version": 1, "interactions": []}),
    "another-tools-marker": lambda: packed(valid_doc(format="vcrpy")),
    "ext-type": lambda: packed(valid_doc(meta={"x": msgpack.ExtType(5, b"code")})),
    "timestamp-ext": lambda: packed(
        valid_doc(interactions=[corrupt_interaction(body={"kind": "json", "value": 1})])
    ).replace(b"\xa5value\x01", b"\xa5value" + msgpack.packb(msgpack.Timestamp(1, 2))),
    "version-zero": lambda: packed(valid_doc(version=0)),
    "version-not-int": lambda: packed(valid_doc(version="1")),
    "interactions-not-a-list": lambda: packed(valid_doc(interactions={})),
    "missing-method": lambda: packed(valid_doc(interactions=[corrupt_interaction(method=None)])),
    "bad-status": lambda: packed(
        valid_doc(interactions=[{**corrupt_interaction(), "response": {"status": 999}}])
    ),
    "unknown-body-kind": lambda: packed(
        valid_doc(interactions=[corrupt_interaction(body={"kind": "yaml"})])
    ),
    "response-and-error": lambda: packed(
        valid_doc(
            interactions=[
                {**corrupt_interaction(), "error": {"kind": "ReadError", "message": "", "t": 1.0}}
            ]
        )
    ),
    "negative-time": lambda: packed(
        valid_doc(
            interactions=[{**corrupt_interaction(), "response": {"status": 200, "t_headers": -1.0}}]
        )
    ),
    "header-not-a-pair": lambda: packed(
        valid_doc(interactions=[corrupt_interaction(headers=[["only-a-name"]])])
    ),
    "int-map-keys": lambda: packed({1: 2}),
}


# Damage inside an interaction's request or response, which loading leaves until first read.
INSIDE = {
    "missing-method": "request",
    "bad-status": "response",
    "unknown-body-kind": "request",
    "negative-time": "response",
    "header-not-a-pair": "request",
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_file_is_a_format_error_naming_the_file(tmp_path, case):
    data = BROKEN[case]()
    path = write(tmp_path, data, f"{case}.msgpack")

    read = (lambda: load_cassette(path).decode()) if case in INSIDE else lambda: load_cassette(path)

    with pytest.raises(CassetteFormatError) as caught:
        read()

    assert isinstance(caught.value, CassetteError)
    assert caught.value.path == str(path)
    assert str(path) in str(caught.value)
    with pytest.raises(CassetteFormatError):
        load_cassette(path, validate=True)


@pytest.mark.parametrize("case", list(INSIDE))
def test_a_damaged_part_raises_when_first_read_naming_file_and_interaction(tmp_path, case):
    path = write(tmp_path, BROKEN[case](), f"{case}.msgpack")
    cassette = load_cassette(path)  # the outline is sound: nothing is decoded yet
    interaction = cassette.interactions[0]
    other = "response" if INSIDE[case] == "request" else "request"

    getattr(interaction, other)  # the sound part reads
    with pytest.raises(CassetteFormatError, match="at interaction 0: ") as caught:
        getattr(interaction, INSIDE[case])

    assert caught.value.path == str(path)
    assert str(path) in str(caught.value)
    assert "record mode 'all'" in str(caught.value)
    # Read again, it raises again: a damaged part is never remembered as decoded.
    with pytest.raises(CassetteFormatError):
        getattr(interaction, INSIDE[case])


@pytest.mark.parametrize("case", list(INSIDE))
def test_a_recording_session_refuses_a_damaged_part_before_any_call(tmp_path, case):
    path = write(tmp_path, BROKEN[case](), f"{case}.msgpack")

    # Record mode "new" records into the file and keeps what is there: it reads it all first.
    with pytest.raises(CassetteFormatError, match=r"at interaction 0: .*record mode 'all'"):
        CassetteSession(path, record="new")


def _sound_and_damaged(tmp_path, damaged_first=False):
    """A cassette of a sound interaction and one whose response is damaged, each with its own
    URL; and a request for each."""
    sound = every_kind()[1].to_doc()
    damaged = {"request": {**sound["request"], "url": URL + "?n=2"}, "response": {"status": 999}}
    interactions = [damaged, sound] if damaged_first else [sound, damaged]
    path = write(tmp_path, packed(valid_doc(interactions=interactions)), "response.msgpack")
    body, json_type = b'{"model":"m","stream":true}', [("content-type", "application/json")]
    return (
        path,
        TransportRequest("POST", URL, json_type, body),
        TransportRequest("POST", URL + "?n=2", json_type, body),
    )


@pytest.mark.parametrize("record", ["none", "once"])  # "once" on a file that exists replays
@pytest.mark.parametrize("timing", ["virtual", "instant"])
def test_a_damaged_response_never_played_fails_no_replay_only_session(tmp_path, record, timing):
    # First in the file, where the virtual clock looks for the recording's Date header.
    path, sound, _ = _sound_and_damaged(tmp_path, damaged_first=True)

    with CassetteSession(path, record=record, timing=timing, on_unused="ignore") as session:
        assert session.transport(sound).status == 200

    assert session.damaged == []


def test_a_replay_session_reads_requests_when_it_opens_and_a_response_when_it_plays(tmp_path):
    damaged_request = write(tmp_path, BROKEN["missing-method"](), "request.msgpack")
    with pytest.raises(CassetteFormatError, match="at interaction 0: a request method"):
        CassetteSession(damaged_request, record="none")

    path, sound, damaged = _sound_and_damaged(tmp_path)
    with CassetteSession(path, record="none", on_unused="ignore") as session:
        assert session.transport(sound).status == 200  # the sound interaction plays
        with pytest.raises(CassetteFormatError, match="at interaction 1: a response status"):
            session.transport(damaged)

    assert len(session.damaged) == 1
    assert "at interaction 1: a response status" in str(session.damaged[0])


def test_the_timestamp_case_really_holds_a_timestamp():
    data = BROKEN["timestamp-ext"]()

    doc = msgpack.unpackb(data, raw=False)

    assert isinstance(doc["interactions"][0]["request"]["body"]["value"], msgpack.Timestamp)


def test_a_corrupt_interaction_names_its_position(tmp_path):
    doc = valid_doc(interactions=[every_kind()[1].to_doc(), corrupt_interaction(method=None)])
    path = write(tmp_path, packed(doc))

    cassette = load_cassette(path)

    assert cassette.interactions[0].request.method == every_kind()[1].request.method
    with pytest.raises(CassetteFormatError, match=r"at interaction 1: a request method"):
        cassette.interactions[1].request  # noqa: B018
    with pytest.raises(CassetteFormatError, match=r"at interaction 1: a request method"):
        load_cassette(path, validate=True)


@pytest.mark.parametrize("record", ["none", "once", "new"])
def test_a_session_never_reads_a_broken_file_as_empty(tmp_path, record):
    path = write(tmp_path, b"")

    with pytest.raises(CassetteFormatError, match="empty"):
        CassetteSession(path, record=record)

    assert path.read_bytes() == b""


def test_a_missing_file_is_not_found(tmp_path):
    path = tmp_path / "nope.msgpack"

    with pytest.raises(CassetteNotFoundError) as caught:
        load_cassette(path)

    assert caught.value.path == str(path)
    assert str(path) in str(caught.value)


def test_a_directory_is_a_format_error(tmp_path):
    with pytest.raises(CassetteFormatError, match="is a directory"):
        load_cassette(tmp_path)


# -- atomic writes ----------------------------------------------------------------------------


def test_save_leaves_only_the_cassette_behind(tmp_path):
    target = tmp_path / "deep" / "er" / "c.msgpack"
    cassette = Cassette(target, every_kind())

    cassette.save()
    cassette.save()

    assert sorted(p.name for p in target.parent.iterdir()) == ["c.msgpack"]


@pytest.fixture
def previous(tmp_path):
    path = tmp_path / "keep.msgpack"
    Cassette(path, every_kind()[:2], {"generation": 1}).save()
    return path, path.read_bytes()


def replacement(path):
    return Cassette(path, every_kind(), {"generation": 2})


def test_a_failing_replace_keeps_the_previous_file(monkeypatch, previous):
    path, before = previous

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        replacement(path).save()

    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]


class HalfWriter:
    """A file whose write puts half the bytes on disk and then fails (a full disk)."""

    def __init__(self, handle):
        self._handle = handle

    def write(self, data):
        self._handle.write(data[: len(data) // 2])
        self._handle.flush()
        raise OSError(28, "No space left on device")

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._handle.close()


@pytest.mark.parametrize("error", [OSError, KeyboardInterrupt])
def test_a_write_failing_midway_keeps_the_previous_file(monkeypatch, previous, error):
    path, before = previous
    real_fdopen = os.fdopen
    seen = []

    def half_writer(fd, mode):
        handle = HalfWriter(real_fdopen(fd, mode))
        seen.append(handle)
        if error is KeyboardInterrupt:

            def interrupted(data):
                handle._handle.write(data[:10])
                raise KeyboardInterrupt

            handle.write = interrupted
        return handle

    monkeypatch.setattr(os, "fdopen", half_writer)
    with pytest.raises(error):
        replacement(path).save()

    assert seen, "the write went through os.fdopen"
    assert path.read_bytes() == before
    assert load_cassette(path).meta == {"generation": 1}
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_an_unencodable_cassette_does_not_touch_the_previous_file(previous):
    path, before = previous
    bad = Interaction(request(), response(JsonBody({"n": 2**70})))

    with pytest.raises(CassetteFormatError) as caught:
        Cassette(path, [bad]).save()

    assert caught.value.path == str(path)
    assert path.read_bytes() == before


def test_stored_event_maps_are_validated_when_replayed():
    with pytest.raises(Exception, match="comments must be a list of strings"):
        sse_event_of({"t": 1.0, "comments": "oops"})


def test_a_cassette_made_with_a_path_as_a_string_saves_and_loads(tmp_path):
    where = str(tmp_path / "deeper" / "plain.msgpack")
    cassette = Cassette(where, [], {"note": "str path"})

    cassette.save()

    assert cassette.path == Path(where)
    assert load_cassette(where).meta["note"] == "str path"
