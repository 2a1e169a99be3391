"""A write that fails in a way no rule expects still keeps the recording (issue 23, row 7).

``MemoryError`` from the secret scan or from the encoder, or a ``before_write`` hook that
raises, used to escape bare from the session's close, and the recording was lost. Now the
session raises ``CassetteWriteError`` naming the cassette, the cause and the file the
recording was saved to in the temp folder; the cassette on disk is left as it was.

When the scan fails only the first time (the merged cassette was too big for it, say), the
saved file went through the gate. When it fails every time, the file is saved redacted but not
scanned, readable by its owner only, and the message says so. A secret in the recording is
still refused: nothing is saved.
"""

import json
import stat
from pathlib import Path

import httpx
import pytest

from pytest_toolnexus import (
    Cassette,
    CassetteWriteError,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    SecretFoundError,
    load_cassette,
    use_cassette,
)
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._store.cassette import JsonBody
from tests.support.servers import Fixed, LoopbackServer

FAKE_KEY = "sk-proj-" + "Q" * 40


@pytest.fixture
def server():
    body = json.dumps({"answer": 42}).encode()
    with LoopbackServer(Fixed(200, [("Content-Type", "application/json")], body)) as running:
        yield running


@pytest.fixture
def path(tmp_path):
    return tmp_path / "cassettes" / "tape.msgpack"


@pytest.fixture
def before(path):
    headers = Headers([("content-type", "application/json")])
    request = RecordedRequest("POST", "http://127.0.0.1:9/v1/old", headers, JsonBody({"a": 1}))
    response = RecordedResponse(200, headers, JsonBody({"kept": True}), 1.0, 2.0)
    Cassette(path, [Interaction(request, response)], {"made_by": "the test"}).save()
    return path.read_bytes()


def fail_first(monkeypatch, owner, name, times):
    """Make ``owner.name`` raise MemoryError on its first ``times`` calls (None: always)."""
    real = getattr(owner, name)
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if times is None or len(calls) <= times:
            raise MemoryError
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)
    return calls


def record(path, server, body=None, **options):
    """Record one request with ``use_cassette(record="all")``; return the error its close
    raised."""
    tape = use_cassette(path, record="all", on_unused="ignore", **options)
    with pytest.raises(CassetteWriteError) as raised:
        send(tape, server, body or {"n": 1})
    return raised.value


def send(tape, server, body):
    """One request through ``tape``, in its block: the close writes (or fails to)."""
    with tape, httpx.Client(transport=tape.http_transport()) as client:
        client.post(server.url("/v1/x"), json=body)


def saved(error):
    assert error.rescued is not None
    rescued = Path(error.rescued)
    assert error.rescued in str(error)
    assert "pytest-toolnexus-rescued" in rescued.parts
    return rescued


@pytest.mark.parametrize(
    ("owner", "name"),
    [(SecretScanner, "scan_cassette"), (Cassette, "write_to")],
    ids=["the scan", "the encoder"],
)
def test_a_memory_error_while_writing_rescues_the_recording(
    owner, name, path, before, server, monkeypatch
):
    fail_first(monkeypatch, owner, name, times=1)
    error = record(path, server)
    message = str(error)
    assert f"cannot write cassette {path}" in message
    assert "MemoryError" in message
    assert isinstance(error.__cause__, MemoryError)
    assert path.read_bytes() == before
    rescued = saved(error)
    monkeypatch.undo()
    assert [i.request.body.value for i in load_cassette(rescued, validate=True).interactions] == [
        {"n": 1}
    ]
    assert "not scanned" not in message
    rescued.unlink()


def test_when_the_scan_fails_every_time_the_recording_is_saved_unscanned_and_private(
    path, before, server, monkeypatch
):
    fail_first(monkeypatch, SecretScanner, "scan_cassette", times=None)
    error = record(path, server)
    assert "not scanned for secrets" in str(error)
    assert "pytest-toolnexus check" in str(error)
    assert path.read_bytes() == before
    rescued = saved(error)
    assert stat.S_IMODE(rescued.stat().st_mode) == 0o600
    assert load_cassette(rescued).interactions
    rescued.unlink()


def test_when_the_encoder_fails_every_time_the_error_says_the_recording_is_lost(
    path, before, server, monkeypatch
):
    fail_first(monkeypatch, Cassette, "write_to", times=None)
    error = record(path, server)
    assert error.rescued is None
    assert "so it is lost" in str(error)
    assert path.read_bytes() == before


def test_a_before_write_hook_that_raises_rescues_the_recording(path, before, server):
    def broken(cassette):
        raise RuntimeError("the write hook broke")

    error = record(path, server, before_write=broken)
    assert "RuntimeError: the write hook broke" in str(error)
    assert path.read_bytes() == before
    rescued = saved(error)
    assert load_cassette(rescued).interactions
    rescued.unlink()


def test_a_secret_in_a_recording_whose_write_failed_is_not_saved_anywhere(
    path, before, server, monkeypatch
):
    fail_first(monkeypatch, SecretScanner, "scan_cassette", times=1)
    # The scan fails once, then finds the key when the recording alone is scanned again.
    error = record(path, server, body={"note": FAKE_KEY})
    assert error.rescued is None
    assert "was not saved either" in str(error)
    assert FAKE_KEY not in str(error)
    assert path.read_bytes() == before


def test_a_secret_is_still_refused_as_before_when_nothing_unexpected_happens(path, server):
    tape = use_cassette(path, record="all", on_unused="ignore")
    with pytest.raises(SecretFoundError):
        send(tape, server, {"note": FAKE_KEY})
    assert not path.exists()
