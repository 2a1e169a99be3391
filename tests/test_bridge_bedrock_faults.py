"""Faults on Bedrock's event stream, as boto3 meets them: re-chunked to single bytes, cut
after a frame, and throttled before the stream (botocore's own retry then answers it)."""

import contextlib

import boto3
import botocore.config
import pytest
import urllib3

from pytest_toolnexus import CassetteSession, faults
from pytest_toolnexus._patching.urllib3 import patch_urllib3
from tests.support.emulator import Emulator

MESSAGES = [{"role": "user", "content": [{"text": "Count."}]}]
FRAMES = ["messageStart", *["contentBlockDelta"] * 3]
FRAMES += ["contentBlockStop", "messageStop", "metadata"]


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)


@contextlib.contextmanager
def served(path, **options):
    session = CassetteSession(path, **options)
    undo = patch_urllib3(session)
    try:
        session.start()
        yield session
    finally:
        undo()
        session.close()


def frames(endpoint, retries=0):
    config = botocore.config.Config(retries={"total_max_attempts": retries + 1})
    client = boto3.client("bedrock-runtime", endpoint_url=endpoint, config=config)
    reply = client.converse_stream(modelId="m", messages=MESSAGES)
    return [next(iter(event)) for event in reply["stream"]]


@pytest.fixture
def recorded(tmp_path):
    path = tmp_path / "stream.msgpack"
    with Emulator(events=3, delay=0.05) as emulator, served(path, record="all"):
        assert frames(emulator.base_url) == FRAMES
    return path, emulator.base_url


def test_frames_split_into_single_bytes_are_still_read_whole(recorded):
    path, endpoint = recorded
    with served(path, faults=[faults.rechunk("bytes")]) as cassette:
        assert frames(endpoint) == FRAMES
    assert cassette.requests[0].faults == ["re-chunked (bytes)"]


def test_a_stream_cut_after_two_frames_fails_as_urllib3_reports_a_broken_connection(recorded):
    path, endpoint = recorded
    seen = []

    def read():
        client = boto3.client("bedrock-runtime", endpoint_url=endpoint)
        for event in client.converse_stream(modelId="m", messages=MESSAGES)["stream"]:
            seen.append(next(iter(event)))

    broken = pytest.raises(urllib3.exceptions.ProtocolError, match="Connection broken")
    with served(path, faults=[faults.disconnect(after_event=2)]), broken:
        read()
    assert seen == FRAMES[:2]


def test_a_throttled_first_attempt_is_retried_by_botocore_on_the_virtual_clock(recorded):
    path, endpoint = recorded
    with served(path, faults=[faults.prepend(429, retry_after="1")]) as cassette:
        assert frames(endpoint, retries=1) == FRAMES
    first, second = cassette.requests
    assert (first.status, second.status) == (429, 200)
    assert second.replayed
    assert second.sent_at >= first.sent_at
