"""boto3's bedrock-runtime client, unmodified, served through urllib3: converse and
converse_stream recorded against the loopback emulator, then replayed with it stopped.

The client gets ``endpoint_url`` pointing at the emulator and fake credentials in the
environment, so it signs every request (SigV4) as it would for AWS; the cassette must keep
neither the signature nor the session token. The stream is Bedrock's
``application/vnd.amazon.eventstream``: the cassette stores its frames decoded, each with its
time, and the replay re-encodes them byte for byte for botocore's own parser.
"""

import json

import pytest

from pytest_toolnexus import load_cassette
from pytest_toolnexus._store.cassette import EventStreamBody
from pytest_toolnexus.views import view
from tests.support.emulator import Emulator
from tests.support.plugin_projects import stored_times
from tests.support.realtime import assert_did_not_sleep, assert_stamped_in_flight

pytest_plugins = ["pytester"]

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
FAKE_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
FAKE_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
FAKE_TOKEN = "FwoGZXIvYXdzEFAKESESSIONTOKENforTESTSonly0123456789"

BEDROCK_TESTS = f"""
import json
import os
import time

import boto3
import pytest

MODEL = {MODEL!r}
MESSAGES = [{{"role": "user", "content": [{{"text": "Count."}}]}}]


def wall():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def client():
    return boto3.client("bedrock-runtime", endpoint_url=os.environ["EMULATOR_URL"])


def report(name, cassette, **seen):
    sent = cassette.requests[0]
    seen.update(
        url=sent.url,
        replayed=sent.replayed,
        deliveries=[d - sent.sent_at for d in sent.deliveries],
        complete=sent.complete,
        requests=len(cassette.requests),
    )
    with open(os.environ["SEEN"], "a") as out:
        out.write(json.dumps({{"test": name, **seen}}) + "\\n")


@pytest.mark.cassette
def test_converse(cassette):
    reply = client().converse(modelId=MODEL, messages=MESSAGES)
    text = reply["output"]["message"]["content"][0]["text"]
    report("converse", cassette, texts=[text], stop=reply["stopReason"], usage=reply["usage"])


@pytest.mark.cassette
def test_converse_stream(cassette):
    before = wall()
    reply = client().converse_stream(modelId=MODEL, messages=MESSAGES)
    kinds, texts, virtual, real, read_at = [], [], [], [], []
    start, start_wall = time.monotonic(), wall()
    for event in reply["stream"]:
        (kind,) = event
        kinds.append(kind)
        virtual.append(time.monotonic() - start)
        read_at.append(wall())
        real.append(read_at[-1] - start_wall)
        if kind == "contentBlockDelta":
            texts.append(event[kind]["delta"]["text"])
        if kind == "metadata":
            usage = event[kind]["usage"]
    report(
        "stream",
        cassette,
        kinds=kinds,
        texts=texts,
        virtual=virtual,
        real=real,
        read_at=read_at,
        before=before,
        usage=usage,
    )
"""

EVENTS = 5
# Gaps long enough that the stream spans over two seconds: a replay that slept them cannot be
# taken for one slowed by a busy machine.
DELAY = 0.6
FRAMES = ["messageStart", *["contentBlockDelta"] * EVENTS]
FRAMES += ["contentBlockStop", "messageStop", "metadata"]


def seen_by(path):
    return {entry["test"]: entry for entry in map(json.loads, path.read_text().splitlines())}


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", FAKE_TOKEN)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    pytester.makepyfile(test_bedrock=BEDROCK_TESTS)
    return pytester


def test_boto3_converse_and_converse_stream_record_then_replay_offline(project, monkeypatch):
    emulator = Emulator(events=EVENTS, delay=DELAY).start()
    try:
        monkeypatch.setenv("EMULATOR_URL", emulator.base_url)
        monkeypatch.setenv("SEEN", str(project.path / "recorded.jsonl"))
        recording = project.runpytest_subprocess("--cassette-record=once", "-p", "no:randomly")
        recording.assert_outcomes(passed=2)
    finally:
        emulator.stop()
    sent, received = emulator.responses, emulator.requests
    monkeypatch.setenv("SEEN", str(project.path / "replayed.jsonl"))
    replaying = project.runpytest_subprocess("-p", "no:randomly")
    replaying.assert_outcomes(passed=2)
    replaying.stdout.fnmatch_lines(["*cassettes: 2 used, 2 replayed, 0 recorded, 0 written*"])
    recorded = seen_by(project.path / "recorded.jsonl")
    replayed = seen_by(project.path / "replayed.jsonl")

    # Given: boto3 signed both requests as for AWS, and reached the emulator once each.
    assert [r.path for r in received] == [
        "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse",
        "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream",
    ]
    assert all(r.header("authorization").startswith("AWS4-HMAC-SHA256") for r in received)
    assert all(r.header("x-amz-security-token") == FAKE_TOKEN for r in received)
    # Then: the replay, offline, gave boto3 what the recording did.
    for name in ("converse", "stream"):
        live, again = recorded[name], replayed[name]
        assert (live["replayed"], again["replayed"]) == (False, True)
        assert live["requests"] == again["requests"] == 1
        assert live["url"] == again["url"]
        assert live["complete"]
        assert again["complete"]
        assert again["texts"] == live["texts"]
        assert again["usage"] == live["usage"]
    assert recorded["converse"]["stop"] == replayed["converse"]["stop"] == "end_turn"
    assert len(recorded["stream"]["texts"]) == EVENTS
    assert "".join(recorded["stream"]["texts"]) == recorded["converse"]["texts"][0]
    assert recorded["stream"]["kinds"] == replayed["stream"]["kinds"] == FRAMES

    # Recording: each frame was stamped when it passed the recorder, after the emulator began
    # writing it and before boto3 yielded its event. Stamps count from when boto3 sent the
    # request, which lies between ``before`` (read just before the call) and the emulator's
    # ``received_at``. Both processes read CLOCK_MONOTONIC, so on any machine, however loaded:
    # ``began - received_at <= stamp <= read - before``.
    written = sent[1]
    live, again = recorded["stream"], replayed["stream"]
    deltas = slice(1, EVENTS + 1)
    began = [event.started_at for event in written.events if event.kind == "delta"]
    stamped = live["deliveries"][deltas]
    read = live["read_at"][deltas]
    assert len(stamped) == EVENTS
    assert_stamped_in_flight(
        [b - written.received_at for b in began],
        stamped,
        [r - live["before"] for r in read],
        what="recording converse_stream",
    )
    # And boto3 had the first delta while the emulator still held the last one back, seconds
    # later: a bridge that buffered the stream would hand over nothing until the end.
    assert read[0] < began[-1], (read[0], began[-1])
    stamps = live["deliveries"]
    assert len(stamps) == len(FRAMES)
    # Replaying: each frame was delivered at its recorded time on the virtual clock, and
    # boto3 saw it then, without the seconds of gaps being slept.
    stored = stored_times(project.path / "cassettes/test_bedrock/test_converse_stream.msgpack")
    assert again["deliveries"] == pytest.approx(stored, abs=1e-3)
    # boto3 saw each frame when it was delivered: the stored times, on its virtual clock (the
    # recording session's own deliveries may differ from them by the ms a loaded machine puts
    # between stamping a piece and handing it on).
    start = stored[0] - again["virtual"][0]
    assert [start + t for t in again["virtual"]] == pytest.approx(stored, abs=1e-3)
    assert_did_not_sleep(again["real"][-1], stored[EVENTS], what="replaying converse_stream")

    # The cassette keeps each frame decoded, with its time, and the emulator's exact bytes.
    cassette = load_cassette(project.path / "cassettes/test_bedrock/test_converse_stream.msgpack")
    (interaction,) = cassette.interactions
    body = interaction.response.body
    assert isinstance(body, EventStreamBody)
    assert [f["headers"][0] for f in body.frames] == [
        [":event-type", "string", kind] for kind in FRAMES
    ]
    assert body.frames[1]["payload"]["delta"]["text"] == recorded["stream"]["texts"][0]
    # Stored at the time each frame came in, which is when the recording handed it on give or
    # take what a loaded machine puts between the two (2 ms seen at a load of 4); the frames
    # are whole seconds apart.
    assert [f["t"] for f in body.frames] == pytest.approx([t * 1000 for t in stamps], abs=25)
    assert b"".join(piece for _, piece in body.pieces()) == written.body
    # No credential reached the file: the signature and the session token are redacted.
    for path in project.path.glob("cassettes/test_bedrock/*.msgpack"):
        raw = path.read_bytes()
        assert FAKE_TOKEN.encode() not in raw
        assert FAKE_SECRET.encode() not in raw
        assert b"Signature=" not in raw
        headers = load_cassette(path).interactions[0].request.headers
        assert headers["authorization"] == "REDACTED"
        assert headers["x-amz-security-token"] == "REDACTED"

    # The provider view reads both answers alike: text, stop reason, usage, model, and the
    # stream's deltas at their recorded times.
    whole = view(
        load_cassette(project.path / "cassettes/test_bedrock/test_converse.msgpack").interactions[0]
    )
    streamed = view(interaction)
    assert whole.provider == streamed.provider == "bedrock"
    assert whole.text == streamed.text == recorded["converse"]["texts"][0]
    assert whole.finish_reason == streamed.finish_reason == "stop"
    assert whole.model == streamed.model == MODEL
    usage = recorded["stream"]["usage"]
    assert streamed.usage.output_tokens == usage["outputTokens"] == EVENTS
    assert streamed.streamed
    assert not whole.streamed
    assert [text for _, text in streamed.deltas] == recorded["stream"]["texts"]
    # At the times the cassette stores (checked against the emulator's above), in seconds: the
    # view reads the file, and a loaded machine may store a frame a few ms after its stamp.
    stored_at = [frame["t"] / 1000 for frame in list(body.frames)[deltas]]
    assert [t for t, _ in streamed.deltas] == pytest.approx(stored_at, abs=1e-9)
