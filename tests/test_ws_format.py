"""WebSocket sessions in a cassette (issue 21, DESIGN §9 D3): one interaction per connection,
its handshake as the request and a 101 response whose body is the frames, both directions,
each with its time. Files without them read as before; a damaged frame is a typed error naming
the file; redaction, the account-key masking and the secret scan run over every frame; check,
show and diff read them.
"""

import subprocess
import sys
from pathlib import Path

import msgpack
import pytest

from pytest_toolnexus._safety.redact_interaction import redacted
from pytest_toolnexus._seam.errors import CassetteFormatError, SecretFoundError
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._store.cassette import (
    FORMAT,
    Cassette,
    EmptyBody,
    Interaction,
    RecordedError,
    RecordedRequest,
    RecordedResponse,
    WebSocketBody,
    load_cassette,
)
from pytest_toolnexus._store.ws_frames import frame_doc, frames_of

ROOT = Path(__file__).resolve().parent.parent
URL = "wss://api.openai.example/v1/realtime?model=gpt-realtime"
FAKE_KEY = "sk-proj-" + "Qz7_" * 6  # built at run time: no secret-shaped literal in the source


def session_interaction(frames, *, headers=None, error=None):
    request = RecordedRequest(
        "GET", URL, Headers(headers or [("Authorization", f"Bearer {FAKE_KEY}")]), EmptyBody()
    )
    response = RecordedResponse(
        101,
        Headers([("Upgrade", "websocket"), ("Sec-WebSocket-Protocol", "realtime")]),
        WebSocketBody(frames),
        t_headers=12.5,
        t_end=12.5,
        error=error,
    )
    return Interaction(request, response)


FRAMES = [
    frame_doc(14.0, "client", '{"type":"session.update","session":{"instructions":"hi"}}'),
    frame_doc(60.25, "server", '{"type": "session.updated"}'),
    frame_doc(61.0, "server", "plain text, not JSON"),
    frame_doc(62.0, "server", "42"),
    frame_doc(70.0, "server", b"\x00\x01audio"),
    frame_doc(90.0, "client", None, code=1000, reason="bye"),
]


def test_frames_are_stored_parsed_as_text_or_as_bytes():
    assert FRAMES[0] == {
        "t": 14.0,
        "from": "client",
        "kind": "text",
        "data": {"type": "session.update", "session": {"instructions": "hi"}},
    }
    # JSON is stored parsed when it is sent again as the very text: spaced as Python writes it.
    assert FRAMES[1]["data"] == {"type": "session.updated"}
    assert FRAMES[1]["spaced"] is True
    assert "spaced" not in FRAMES[0]
    odd = frame_doc(1.0, "server", '{ "type" :"odd"}')
    assert odd["data"] == '{ "type" :"odd"}'
    assert FRAMES[2]["data"] == "plain text, not JSON"
    # Only an object or an array is stored parsed: a number stays the text it was.
    assert FRAMES[3]["data"] == "42"
    assert FRAMES[4] == {"t": 70.0, "from": "server", "kind": "binary", "data": b"\x00\x01audio"}
    assert FRAMES[5] == {
        "t": 90.0,
        "from": "client",
        "kind": "close",
        "code": 1000,
        "reason": "bye",
    }
    read = list(frames_of(FRAMES))
    assert [f.message for f in read] == [
        '{"type":"session.update","session":{"instructions":"hi"}}',
        '{"type": "session.updated"}',
        "plain text, not JSON",
        "42",
        b"\x00\x01audio",
        None,
    ]
    assert (read[5].code, read[5].reason) == (1000, "bye")


def test_a_websocket_session_round_trips_through_the_file(tmp_path):
    error = RecordedError("RemoteProtocolError", "connection dropped (1006)", 95.0)
    path = tmp_path / "rt.msgpack"
    Cassette(path, [session_interaction(FRAMES, error=error)]).save()

    loaded = load_cassette(path, validate=True)

    (interaction,) = loaded.interactions
    assert interaction.request.url == URL
    assert interaction.request.headers["authorization"] == "REDACTED"
    response = interaction.response
    assert response.status == 101
    assert response.headers["sec-websocket-protocol"] == "realtime"
    assert isinstance(response.body, WebSocketBody)
    assert list(response.body.frames) == FRAMES
    assert response.error == error
    # The same input always gives the same bytes.
    again = tmp_path / "again.msgpack"
    Cassette(again, list(loaded.interactions), dict(loaded.meta)).save()
    assert again.read_bytes() == path.read_bytes()


@pytest.mark.parametrize(
    ("frame", "problem"),
    [
        ({"t": 1.0, "from": "nobody", "kind": "text", "data": "x"}, "'from' must be"),
        ({"t": 1.0, "from": "server", "kind": "ping", "data": "x"}, "kind must be text"),
        ({"t": -1.0, "from": "server", "kind": "text", "data": "x"}, "'t' must be"),
        ({"t": 1.0, "from": "server", "kind": "binary", "data": "x"}, "must be binary"),
        ({"t": 1.0, "from": "server", "kind": "text", "data": 7}, "must be a string, a map"),
        ({"t": 1.0, "from": "server", "kind": "close", "code": 70000}, "code must be 1000-4999"),
        ("not a map", "must be a map"),
    ],
)
def test_a_damaged_frame_is_a_typed_error_naming_the_file(tmp_path, frame, problem):
    path = tmp_path / "bad.msgpack"
    Cassette(path, [session_interaction([FRAMES[0], frame])]).save(unsafe_verbatim=True)

    with pytest.raises(CassetteFormatError) as caught:
        load_cassette(path, validate=True)

    message = str(caught.value)
    assert f"cassette {path} is corrupt at interaction 0" in message
    assert "websocket frame 1" in message
    assert problem in message
    assert caught.value.path == str(path)


def test_frames_that_are_not_a_list_are_refused_when_the_response_is_read(tmp_path):
    path = tmp_path / "bad.msgpack"
    good = session_interaction(FRAMES).to_doc()
    good["response"]["body"]["frames"] = {"not": "a list"}
    doc = {"format": FORMAT, "version": 1, "meta": {}, "interactions": [good]}
    path.write_bytes(msgpack.packb(doc, use_bin_type=True))

    with pytest.raises(CassetteFormatError, match="'frames' must be a list"):
        load_cassette(path).interactions[0].response  # noqa: B018


def test_a_reader_that_does_not_know_websocket_bodies_refuses_them_by_kind(tmp_path):
    # A request body can never be a WebSocket session: the kind is a response's only.
    path = tmp_path / "odd.msgpack"
    doc = session_interaction(FRAMES).to_doc()
    doc["request"]["body"] = {"kind": "websocket", "frames": []}
    packed = {"format": FORMAT, "version": 1, "meta": {}, "interactions": [doc]}
    path.write_bytes(msgpack.packb(packed, use_bin_type=True))

    with pytest.raises(CassetteFormatError, match="unknown body kind 'websocket'"):
        load_cassette(path, validate=True)


def test_account_keys_in_frames_are_masked_both_ways():
    frames = [
        frame_doc(1.0, "client", '{"type":"session.update","user_id":"user-8812"}'),
        frame_doc(2.0, "server", '{"type":"session.created","organization":"org-AcmeCorp"}'),
    ]
    safe = redacted(session_interaction(frames))

    stored = safe.response.body.frames
    assert stored[0]["data"]["user_id"] != "user-8812"
    assert stored[1]["data"]["organization"] != "org-AcmeCorp"
    assert stored[1]["data"]["type"] == "session.created"
    assert safe.request.headers["authorization"] == "REDACTED"


@pytest.mark.parametrize(
    "frame",
    [
        frame_doc(3.0, "client", f'{{"type":"conversation.item.create","text":"{FAKE_KEY}"}}'),
        frame_doc(3.0, "server", f"your key is {FAKE_KEY}"),
        frame_doc(3.0, "server", f"key {FAKE_KEY}".encode()),
        frame_doc(3.0, "server", None, code=4000, reason=FAKE_KEY),
    ],
    ids=["client-json", "server-text", "server-binary", "close-reason"],
)
def test_a_secret_in_any_frame_refuses_the_write(tmp_path, frame):
    path = tmp_path / "leaky.msgpack"

    with pytest.raises(SecretFoundError) as caught:
        Cassette(path, [session_interaction([FRAMES[0], frame])]).save()

    message = str(caught.value)
    assert "response.body.frames[1]" in message
    assert FAKE_KEY not in message
    assert not path.exists()


def test_a_secret_split_across_frames_is_found_joined(tmp_path):
    half = len(FAKE_KEY) // 2
    frames = [
        frame_doc(
            1.0, "server", f'{{"type":"response.output_text.delta","delta":"{FAKE_KEY[:half]}"}}'
        ),
        frame_doc(
            2.0, "server", f'{{"type":"response.output_text.delta","delta":"{FAKE_KEY[half:]}"}}'
        ),
    ]
    with pytest.raises(SecretFoundError) as caught:
        Cassette(tmp_path / "split.msgpack", [session_interaction(frames)]).save()

    assert "spread across 2 pieces" in str(caught.value)


def run_cli(*args):
    done = subprocess.run(
        [sys.executable, "-m", "pytest_toolnexus", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def test_check_show_and_diff_read_a_websocket_session(tmp_path):
    path = tmp_path / "rt.msgpack"
    Cassette(path, [session_interaction(FRAMES)]).save()
    other = tmp_path / "other.msgpack"
    changed = [*FRAMES[:2], frame_doc(61.0, "server", "other text"), *FRAMES[3:]]
    Cassette(other, [session_interaction(changed)]).save()

    code, out = run_cli("check", path)
    assert code == 0, out
    assert f"ok   {path} (1 interaction)" in out

    code, out = run_cli("show", path)
    assert code == 0, out
    lines = out.splitlines()
    assert f"#0 GET {URL}" in lines
    assert "  6 websocket frame(s) over 90.0 ms" in lines
    timeline = [line for line in lines if " ms " in line and "|" in line]
    assert [line.split("|")[1].split()[0:2] for line in timeline] == [
        ["client", ">"],
        ["<", "server"],
        ["<", "server"],
        ["<", "server"],
        ["<", "server"],
        ["client", ">"],
    ]
    assert timeline[2].rstrip().endswith("plain text, not JSON")
    assert timeline[4].rstrip().endswith("7 bytes")
    assert timeline[5].rstrip().endswith("close 1000 bye")

    code, out = run_cli("diff", path, other)
    assert code == 1, out
    assert "frames" in out
    assert "other text" in out
