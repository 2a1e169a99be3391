"""A recording cut short by Ctrl-C never replaces or creates a cassette (issue 23, row 1).

Each test runs a real process (a pytest project, or a plain script with ``use_cassette``) that
records an SSE stream from a loopback server in this process. The server sends the first
events, then holds the stream open until this test lets it go; once the recorder has read
those events it says so in a progress file, and this test sends it a real SIGINT with
``os.kill``. Nothing waits on a wall-clock guess: the signal goes out when the progress file
says the stream is half read, and every wait has a generous limit only so that a regression
fails instead of hanging.

Then the cassette must be as it was (byte for byte, or still absent), the cut recording must
be kept beside it (``<name>.msgpack.interrupted-...``, which ``check`` skips), and the
process's output must name that file.

In one process, the tests after those pin which endings of a ``use_cassette`` block count as
an interruption (anything that is not an ``Exception``, pytest's outcomes aside) and which
write as before, and the fallback to the temp folder when the cassette's folder refuses the
kept file.
"""

import asyncio
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

from pytest_toolnexus import (
    Cassette,
    CassetteSetAsideWarning,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    load_cassette,
    use_cassette,
)
from pytest_toolnexus._store.cassette import JsonBody
from tests.support.servers import Fixed, LoopbackServer, write_chunk, write_chunked_head

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a real SIGINT")

ROOT = Path(__file__).resolve().parent.parent
EVENTS = 42
SENT_BEFORE_THE_SIGNAL = 20
LIMIT = 120.0  # seconds; only a regression (a hang) ever comes near it

# A terminal's Ctrl-C raises KeyboardInterrupt; a process started from a background job may
# have inherited SIGINT as ignored, so the recorder puts Python's own handler back first.
RESTORE_SIGINT = "import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"

READ_THE_STREAM = """
def read_the_stream(client):
    seen = 0
    with client.stream("POST", os.environ["STREAM_URL"], json={"stream": True}) as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                seen += 1
                if seen == int(os.environ["SIGNAL_AFTER"]):
                    with open(os.environ["PROGRESS"], "w") as progress:
                        progress.write("ready")
"""

PYTEST_PROJECT = (
    "import os\n\nimport httpx\nimport pytest\n"
    + READ_THE_STREAM
    + """

@pytest.mark.cassette("stream")
def test_stream():
    with httpx.Client(timeout=120) as client:
        read_the_stream(client)
"""
)

PLAIN_SCRIPT = (
    RESTORE_SIGINT
    + "import os\nimport sys\n\nimport httpx\n\nfrom pytest_toolnexus import use_cassette\n"
    + READ_THE_STREAM
    + """

with use_cassette(sys.argv[1], record=sys.argv[2], on_unused="ignore") as tape:
    with httpx.Client(transport=tape.http_transport(), timeout=120) as client:
        read_the_stream(client)
"""
)


class HeldStream:
    """Sends SENT_BEFORE_THE_SIGNAL events, then holds the stream until released (or the
    server stops), then sends the rest."""

    def __init__(self):
        self.release = threading.Event()

    def stop(self):
        self.release.set()

    def __call__(self, request, conn):
        try:
            write_chunked_head(conn, 200, [("Content-Type", "text/event-stream")])
            for n in range(EVENTS):
                if n == SENT_BEFORE_THE_SIGNAL:
                    self.release.wait(LIMIT)
                write_chunk(conn, f"data: {json.dumps({'n': n})}\n\n".encode())
            write_chunk(conn, b"")
        except OSError:
            pass  # the recorder is gone


@pytest.fixture
def server():
    handler = HeldStream()
    with LoopbackServer(handler) as running:
        running.handler_ = handler
        yield running


def good_cassette(path: Path) -> bytes:
    """A complete cassette the interrupted recording must leave alone."""
    headers = Headers([("content-type", "application/json")])
    request = RecordedRequest("POST", "http://127.0.0.1:9/v1/old", headers, JsonBody({"a": 1}))
    response = RecordedResponse(200, headers, JsonBody({"kept": True}), 1.0, 2.0)
    Cassette(path, [Interaction(request, response)], {"made_by": "the test"}).save()
    return path.read_bytes()


def interrupt(command, cwd, env, progress: Path, server) -> str:
    """Run ``command``, send it SIGINT once it has read half the stream, and return its
    output (stdout and stderr)."""
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + LIMIT
        while not progress.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                output = process.communicate(timeout=LIMIT)[0]
                pytest.fail(f"the recorder never reached the stream's middle:\n{output}")
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGINT)  # our own child, still running: the pid is its
        output = process.communicate(timeout=LIMIT)[0]
    finally:
        server.handler_.release.set()
        if process.poll() is None:
            process.kill()
            process.communicate()
    return output


def child_env(tmp_path: Path, server) -> dict[str, str]:
    env = {**os.environ, "STREAM_URL": server.url("/v1/stream")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PROGRESS"] = str(tmp_path / "progress")
    env["SIGNAL_AFTER"] = str(SENT_BEFORE_THE_SIGNAL)
    env.pop("CI", None)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def kept_beside(path: Path) -> Path:
    """The one file the interrupted recording was kept in, beside the cassette."""
    kept = sorted(path.parent.glob(f"{path.name}.interrupted-*"))
    assert len(kept) == 1, sorted(p.name for p in path.parent.iterdir())
    return kept[0]


def assert_the_cut_recording_is_in(kept: Path) -> None:
    (interaction,) = load_cassette(kept).interactions
    assert interaction.response is not None
    assert not interaction.response.complete
    events = interaction.response.body.events
    assert SENT_BEFORE_THE_SIGNAL <= len(events) < EVENTS


CASES = [
    pytest.param("all", True, id="all-over-a-good-cassette"),
    pytest.param("once", False, id="once-with-no-cassette"),
]


@pytest.mark.parametrize(("mode", "existed"), CASES)
def test_ctrl_c_under_pytest_keeps_the_cassette_and_the_cut_recording_beside_it(
    mode, existed, tmp_path, server
):
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text(RESTORE_SIGINT)
    (project / "test_stream.py").write_text(PYTEST_PROJECT)
    path = project / "cassettes" / "test_stream" / "stream.msgpack"
    path.parent.mkdir(parents=True)
    before = good_cassette(path) if existed else None

    command = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider"]
    command += ["-p", "no:xdist", "-o", "asyncio_default_fixture_loop_scope=function"]
    command += [f"--cassette-record={mode}", "test_stream.py"]
    output = interrupt(command, project, child_env(tmp_path, server), tmp_path / "progress", server)

    assert "KeyboardInterrupt" in output, output
    if existed:
        assert path.read_bytes() == before, output
    else:
        assert not path.exists(), output
    kept = kept_beside(path)
    assert_the_cut_recording_is_in(kept)
    assert str(kept.relative_to(project)) in output, output
    assert not list(path.parent.glob("*.tmp")), sorted(path.parent.iterdir())


@pytest.mark.parametrize(("mode", "existed"), CASES)
def test_ctrl_c_in_use_cassette_keeps_the_cassette_and_the_cut_recording_beside_it(
    mode, existed, tmp_path, server
):
    path = tmp_path / "cassettes" / "stream.msgpack"
    path.parent.mkdir()
    before = good_cassette(path) if existed else None
    script = tmp_path / "record.py"
    script.write_text(textwrap.dedent(PLAIN_SCRIPT))

    command = [sys.executable, str(script), str(path), mode]
    output = interrupt(
        command, tmp_path, child_env(tmp_path, server), tmp_path / "progress", server
    )

    assert "KeyboardInterrupt" in output, output
    if existed:
        assert path.read_bytes() == before, output
    else:
        assert not path.exists(), output
    kept = kept_beside(path)
    assert_the_cut_recording_is_in(kept)
    assert str(kept) in output, output


# -- in one process: which endings keep the recording beside the cassette ------------------------


class Stop(BaseException):
    """Something that is not an ``Exception`` and not pytest's: a cancellation, say."""


@pytest.fixture
def json_server():
    body = json.dumps({"answer": 42}).encode()
    with LoopbackServer(Fixed(200, [("Content-Type", "application/json")], body)) as running:
        yield running


def record_one(path, server, raised, *, mode="all", **options):
    """Record one whole request in ``use_cassette``, then leave the block with ``raised``."""
    tape = use_cassette(path, record=mode, on_unused="ignore", **options)

    def block():
        with tape, httpx.Client(transport=tape.http_transport()) as client:
            client.post(server.url("/v1/x"), json={"n": 1})
            raise raised

    with pytest.raises(type(raised)):
        block()
    return tape


@pytest.mark.parametrize(
    "raised",
    [KeyboardInterrupt(), SystemExit(1), asyncio.CancelledError(), Stop()],
    ids=["KeyboardInterrupt", "SystemExit", "CancelledError", "a-BaseException"],
)
def test_a_block_left_by_an_interruption_keeps_the_recording_beside_the_cassette(
    raised, tmp_path, json_server
):
    path = tmp_path / "tape.msgpack"
    before = good_cassette(path)
    with pytest.warns(CassetteSetAsideWarning, match=type(raised).__name__) as caught:
        tape = record_one(path, json_server, raised)
    assert path.read_bytes() == before
    assert tape.rescued == kept_beside(path)
    assert not tape.written
    # Only the plugin's warning: a socket an earlier test left may be collected meanwhile.
    [set_aside] = [w for w in caught if issubclass(w.category, CassetteSetAsideWarning)]
    assert str(tape.rescued) in str(set_aside.message)
    (interaction,) = load_cassette(tape.rescued).interactions
    assert interaction.request.body.value == {"n": 1}


@pytest.mark.parametrize(
    "raised", [ValueError("the code's own failure"), pytest.fail.Exception("x")]
)
def test_a_block_left_by_an_ordinary_error_or_a_test_outcome_writes_nothing_unless_asked(
    raised, tmp_path, json_server
):
    # As the marker does for a test that fails while recording (record_on_error=False).
    path = tmp_path / "tape.msgpack"
    before = good_cassette(path)
    tape = record_one(path, json_server, raised)
    assert not tape.written
    assert tape.rescued is None
    assert path.read_bytes() == before
    assert not list(tmp_path.glob("*.interrupted-*"))

    tape = record_one(path, json_server, raised, record_on_error=True)
    assert tape.written
    assert tape.rescued is None
    assert [i.request.body.value for i in load_cassette(path).interactions] == [{"n": 1}]
    assert not list(tmp_path.glob("*.interrupted-*"))


def test_an_interrupted_async_block_keeps_the_recording_beside_the_cassette(tmp_path, json_server):
    path = tmp_path / "tape.msgpack"

    async def main():
        async with use_cassette(path, record="once", on_unused="ignore") as tape:
            async with httpx.AsyncClient(transport=tape.http_transport()) as client:
                await client.post(json_server.url("/v1/x"), json={"n": 2})
            raise asyncio.CancelledError
        return tape

    with pytest.warns(CassetteSetAsideWarning), pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    assert not path.exists()
    (interaction,) = load_cassette(kept_beside(path)).interactions
    assert interaction.request.body.value == {"n": 2}


def test_an_interrupted_recording_is_kept_in_the_temp_folder_when_its_folder_refuses_it(
    tmp_path, json_server, monkeypatch
):
    from pytest_toolnexus._store import write as store

    path = tmp_path / "tape.msgpack"
    real = store.write_atomic

    def refuse_beside(target, data):
        if Path(target).parent == tmp_path:
            raise OSError(errno.EROFS, "Read-only file system")
        real(target, data)

    monkeypatch.setattr(store, "write_atomic", refuse_beside)
    with pytest.warns(CassetteSetAsideWarning, match="pytest-toolnexus-rescued"):
        tape = record_one(path, json_server, KeyboardInterrupt(), mode="once")
    assert not path.exists()
    assert tape.rescued is not None
    assert not tape.rescued.is_relative_to(tmp_path)
    assert load_cassette(tape.rescued).interactions
    tape.rescued.unlink()
