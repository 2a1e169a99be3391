"""Writes that cannot lose a recording (issue 14, items 8 to 10, and the first part of 11).

- An unreadable cassette on disk (empty, truncated, random bytes, another tool's file, a newer
  format): record mode ``all`` records it again and keeps the old bytes beside it, under the
  name its warning gives; ``once`` and ``new`` refuse before any live call.
- Two plain processes (no pytest, no xdist, no run id) recording one cassette at once, in
  ``once`` and ``all``: every interaction of both ends up in the file.
- A write the disk refuses (full, quota, read-only, not permitted), at each step of the
  atomic write: a ``CassetteWriteError`` naming the cassette and the reason, the recording saved
  in the temp folder under the name it gives, the previous cassette intact, no temp file left.
- A cassette path through a file, or a path that is a folder: refused before the test runs.

The live server is a loopback JSON server that counts its hits.
"""

import errno
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest

from pytest_toolnexus import (
    CassetteError,
    CassetteFormatError,
    CassetteSession,
    CassetteSetAsideWarning,
    CassetteWriteError,
    load_cassette,
)
from pytest_toolnexus._seam.transport import TransportRequest, TransportResponse
from pytest_toolnexus._store.cassette import FORMAT
from tests.support.fuzzing import report, scaled
from tests.support.servers import LoopbackServer, write_response

ROOT = Path(__file__).resolve().parent.parent


class Counting:
    """Answers each request with JSON echoing the body it got."""

    def __init__(self):
        self.hits = 0
        self._lock = threading.Lock()

    def __call__(self, request, conn):
        with self._lock:
            self.hits += 1
        body = json.dumps({"echo": json.loads(request.body or b"null")}).encode()
        write_response(conn, 200, [("Content-Type", "application/json")], body)


@pytest.fixture
def server():
    handler = Counting()
    with LoopbackServer(handler) as running:
        running.counter = handler
        yield running


@pytest.fixture
def path(tmp_path):
    return tmp_path / "cassettes" / "test_x" / "write.msgpack"


def ask(session, server, number):
    response = session.transport(
        TransportRequest(
            "POST",
            server.url("/v1/x"),
            headers={"content-type": "application/json"},
            body={"n": number},
        )
    )
    return response.body


def recorded_numbers(path):
    return sorted(i.request.body.value["n"] for i in load_cassette(path).interactions)


UNREADABLE = {
    "empty": b"",
    "truncated": None,  # filled in below from a real cassette
    "random bytes": bytes(range(7, 250, 3)),
    "a vcrpy YAML file": b"interactions:\n- request:\n    uri: https://x.invalid/\nversion: 1\n",
    "a newer format": None,
    "trailing bytes": None,
}


def unreadable_bytes(kind, tmp_path, server):
    if UNREADABLE[kind] is not None:
        return UNREADABLE[kind]
    good = tmp_path / "good.msgpack"
    with CassetteSession(good, record="all", timing="instant") as session:
        ask(session, server, 0)
    data = good.read_bytes()
    if kind == "truncated":
        return data[: len(data) // 2]
    if kind == "trailing bytes":
        return data + b"\x00"
    import msgpack

    doc = msgpack.unpackb(data, raw=False)
    return msgpack.packb({**doc, "format": FORMAT, "version": 99}, use_bin_type=True)


@pytest.mark.parametrize("kind", list(UNREADABLE))
def test_record_mode_all_replaces_an_unreadable_cassette_and_keeps_the_old_bytes(
    kind, path, server, tmp_path
):
    old = unreadable_bytes(kind, tmp_path, server)
    path.parent.mkdir(parents=True)
    path.write_bytes(old)
    hits = server.counter.hits

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with CassetteSession(path, record="all", timing="instant") as session:
            for number in range(3):
                assert ask(session, server, number) == {"echo": {"n": number}}

    assert server.counter.hits == hits + 3
    assert recorded_numbers(path) == [0, 1, 2]
    notes = [w.message for w in caught if isinstance(w.message, CassetteSetAsideWarning)]
    assert len(notes) == 1, [str(w.message) for w in caught]
    backups = list(path.parent.glob(f"{path.name}.unreadable-*"))
    assert len(backups) == 1
    assert str(backups[0]) in str(notes[0])
    assert str(path) in str(notes[0])
    assert backups[0].read_bytes() == old
    # The backup is not taken for a cassette by `check` (it does not end in .msgpack).
    assert not backups[0].name.endswith(".msgpack")


@pytest.mark.parametrize("mode", ["once", "new"])
@pytest.mark.parametrize("kind", list(UNREADABLE))
def test_once_and_new_refuse_an_unreadable_cassette_before_any_live_call(
    mode, kind, path, server, tmp_path
):
    old = unreadable_bytes(kind, tmp_path, server)
    path.parent.mkdir(parents=True)
    path.write_bytes(old)
    hits = server.counter.hits

    with pytest.raises(CassetteError) as raised:
        CassetteSession(path, record=mode, timing="instant")

    assert server.counter.hits == hits
    assert path.read_bytes() == old
    error = raised.value
    assert getattr(error, "path", None) == str(path)
    assert str(path) in str(error)
    if kind != "a newer format":
        assert isinstance(error, CassetteFormatError)
        assert "Record mode 'all'" in str(error)


def test_the_plugin_refuses_an_unreadable_cassette_in_once_mode_before_the_test_runs(
    pytester, server
):
    folder = pytester.path / "cassettes" / "test_once"
    folder.mkdir(parents=True)
    (folder / "test_it.msgpack").write_bytes(b"")
    pytester.makepyfile(
        test_once=f"""
        import httpx, pytest

        @pytest.mark.cassette(record="once")
        def test_it(cassette):
            httpx.post("{server.url("/v1/x")}", json={{"n": 1}})
        """
    )
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*CassetteFormatError*test_it.msgpack is empty*"])
    assert server.counter.hits == 0


# -- two writers, no pytest --------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import os, sys, time
    import httpx
    from pytest_toolnexus import use_cassette

    path, mode, url, tag, count, ready, go = sys.argv[1:]
    with use_cassette(path, record=mode, timing="instant") as cassette:
        open(ready, "w").close()
        deadline = time.monotonic() + 30
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.005)
        with httpx.Client(transport=cassette.http_transport()) as client:
            for number in range(int(count)):
                client.post(url, json={"n": f"{tag}-{number}"}).raise_for_status()
    """
)


def run_writers(path, mode, server, tmp_path, count, stagger):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    go = tmp_path / f"go-{mode}-{stagger}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CI", None)
    writers = []
    for tag in ("a", "b"):
        ready = tmp_path / f"ready-{mode}-{stagger}-{tag}"
        argv = [sys.executable, str(script), str(path), mode, server.url("/v1/x")]
        argv += [tag, str(count), str(ready), str(go)]
        writers.append((subprocess.Popen(argv, env=env, stderr=subprocess.PIPE), ready))
    deadline = time.monotonic() + 60
    while not all(ready.exists() for _, ready in writers) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    codes = []
    for process, _ in writers:
        _, err = process.communicate(timeout=60)
        codes.append((process.returncode, err.decode()[-2000:]))
    return codes


@pytest.mark.parametrize("mode", ["once", "all"])
def test_two_plain_processes_recording_one_cassette_lose_nothing(mode, path, server, tmp_path):
    count = scaled(30)
    if mode == "all":
        # An old recording the two re-record: it is replaced, their new ones are all kept.
        path.parent.mkdir(parents=True)
        with CassetteSession(path, record="all", timing="instant") as session:
            ask(session, server, "old")
    codes = run_writers(path, mode, server, tmp_path, count, stagger=0)

    assert [code for code, _ in codes] == [0, 0], codes
    got = sorted(i.request.body.value["n"] for i in load_cassette(path).interactions)
    wanted = sorted(f"{tag}-{n}" for tag in "ab" for n in range(count))
    lost = len(set(wanted) - set(got))
    report("two plain writers", f"record mode {mode}", {"kept": len(got)}, lost)
    assert got == wanted


# -- disks that refuse the write --------------------------------------------------------------

REFUSALS = [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES]


def fd_path(fd):
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


@pytest.fixture
def refuse(monkeypatch):
    """Make one step of the write fail with an errno, for files in one folder only."""

    def install(step, code, folder):
        folder = Path(folder).resolve()

        def inside(target):
            return target is not None and Path(target).resolve().parent == folder

        fail = OSError(code, os.strerror(code))
        if step == "open":
            real_open = os.open

            def fake_open(file, flags, *args, **kwargs):
                if inside(file) and flags & os.O_CREAT:
                    raise fail
                return real_open(file, flags, *args, **kwargs)

            monkeypatch.setattr(os, "open", fake_open)
        elif step == "fsync":
            if not Path("/proc/self/fd").is_dir():
                pytest.skip("needs /proc/self/fd to tell which file an fsync is for")
            real_fsync = os.fsync

            def fake_fsync(fd):
                if inside(fd_path(fd)):
                    raise fail
                return real_fsync(fd)

            monkeypatch.setattr(os, "fsync", fake_fsync)
        elif step == "replace":
            real_replace = os.replace

            def fake_replace(src, dst, *args, **kwargs):
                if inside(dst) and Path(dst).suffix == ".msgpack":
                    raise fail
                return real_replace(src, dst, *args, **kwargs)

            monkeypatch.setattr(os, "replace", fake_replace)

    return install


@pytest.mark.parametrize("step", ["open", "fsync", "replace"])
@pytest.mark.parametrize("code", REFUSALS, ids=[errno.errorcode[c] for c in REFUSALS])
@pytest.mark.parametrize("existing", [False, True], ids=["new file", "over a cassette"])
def test_a_refused_write_names_the_cassette_and_saves_the_recording(
    step, code, existing, path, server, refuse
):
    path.parent.mkdir(parents=True)
    if existing:
        with CassetteSession(path, record="all", timing="instant") as session:
            ask(session, server, -1)
    before = path.read_bytes() if existing else None
    session = CassetteSession(path, record="new" if existing else "once", timing="instant")
    with session:
        for number in range(3):
            ask(session, server, number)
        refuse(step, code, path.parent)
        with pytest.raises(CassetteWriteError) as raised:
            session.close()

    error = raised.value
    message = str(error)
    assert error.path == str(path)
    assert str(path) in message
    assert f"Errno {code}" in message
    assert error.rescued is not None
    assert error.rescued in message
    rescued = Path(error.rescued)
    assert not rescued.is_relative_to(path.parent)
    expected = [-1, 0, 1, 2] if existing else [0, 1, 2]
    assert recorded_numbers(rescued) == expected
    rescued.unlink()
    if existing:
        assert path.read_bytes() == before
    else:
        assert not path.exists()
    assert [p.name for p in path.parent.iterdir() if p.name != path.name] == []


@pytest.fixture
def shared_folder():
    """A folder any user can write to, in the system's temp folder (pytest's own temp folders
    are private to the user running the tests)."""
    folder = Path(tempfile.mkdtemp(prefix="toolnexus-ro-"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        for inner in folder.rglob("*"):
            if inner.is_dir():
                inner.chmod(0o755)
        shutil.rmtree(folder)


def _write_into_a_read_only_folder(path):
    """Record one interaction at ``path``, make its folder read-only, close: what happened."""
    path.parent.mkdir(parents=True)

    def live(request):
        return TransportResponse(200, {"content-type": "application/json"}, {"ok": True})

    session = CassetteSession(path, record="once", timing="instant", live=live)
    with session:
        session.transport(
            TransportRequest("POST", "https://api.example.invalid/v1/x", body={"n": 0})
        )
        path.parent.chmod(0o555)
        try:
            (path.parent / "probe").touch()
        except PermissionError:
            stopped = True
        else:
            stopped = False
        try:
            session.close()
        except CassetteWriteError as exc:
            rescued = load_cassette(exc.rescued)
            numbers = [i.request.body.value["n"] for i in rescued.interactions]
            return {"stopped": stopped, "message": str(exc), "numbers": numbers}
    return {"stopped": stopped, "written": path.exists()}


def _as_nobody(work):
    """``work()`` in a forked child that runs as the user nobody (uid 65534), for whom folder
    modes mean something; its result comes back through a pipe."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's coverage is not collected
        code = 0
        try:
            os.close(read_end)
            os.setgid(65534)
            os.setuid(65534)
            # The rescue folder under the system temp folder may be root's already.
            tempfile.tempdir = tempfile.mkdtemp(dir=os.environ["TOOLNEXUS_SHARED"])
            outcome = work()
        except BaseException as exc:
            outcome = {"error": f"{type(exc).__name__}: {exc}"}
            code = 1
        with os.fdopen(write_end, "w") as out:
            out.write(json.dumps(outcome))
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as received:
        text = received.read()
    os.waitpid(child, 0)
    return json.loads(text)


def test_a_read_only_folder_refuses_the_write_naming_the_cassette(shared_folder, monkeypatch):
    # Folder modes stop every user but root: under root, the write runs as nobody.
    path = shared_folder / "cassettes" / "write.msgpack"
    work = functools.partial(_write_into_a_read_only_folder, path)
    monkeypatch.setenv("TOOLNEXUS_SHARED", str(shared_folder))
    outcome = _as_nobody(work) if os.geteuid() == 0 else work()

    assert "error" not in outcome, outcome
    assert outcome["stopped"] is True, "the folder's mode did not stop this user"
    assert str(path) in outcome["message"]
    assert "not writable" in outcome["message"]
    assert outcome["numbers"] == [0]
    assert not path.exists()


# -- paths no write can succeed at -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["once", "new", "all"])
@pytest.mark.parametrize("depth", [0, 1, 3])
def test_a_cassette_path_through_a_file_is_refused_before_any_live_call(
    mode, depth, tmp_path, server
):
    blocker = tmp_path / "cassettes"
    blocker.write_text("not a folder")
    target = blocker.joinpath(*[f"d{n}" for n in range(depth)], "x.msgpack")
    with pytest.raises(CassetteWriteError, match="is a file, not a folder") as raised:
        CassetteSession(target, record=mode, timing="instant")
    assert str(target) in str(raised.value)
    assert str(blocker) in str(raised.value)
    assert server.counter.hits == 0


def test_a_cassette_path_that_is_a_folder_is_refused_before_any_live_call(tmp_path):
    target = tmp_path / "x.msgpack"
    target.mkdir()
    with pytest.raises(CassetteWriteError, match="that path is a folder"):
        CassetteSession(target, record="all", timing="instant")


def test_the_plugin_refuses_a_cassette_folder_that_is_a_file_before_the_test_runs(pytester, server):
    (pytester.path / "cassettes").write_text("a file where the folder should be")
    pytester.makepyfile(
        test_blocked=f"""
        import httpx, pytest

        @pytest.mark.cassette(record="all")
        def test_it(cassette):
            httpx.post("{server.url("/v1/x")}", json={{"n": 1}})
        """
    )
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*CassetteWriteError*is a file, not a folder*"])
    assert server.counter.hits == 0


@pytest.mark.parametrize("step", ["open", "fsync", "replace"])
def test_a_refused_write_over_an_unreadable_cassette_names_both_files(step, path, server, refuse):
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a cassette")
    session = CassetteSession(path, record="all", timing="instant")
    with session:
        ask(session, server, 0)
        refuse(step, errno.ENOSPC, path.parent)
        with pytest.raises(CassetteWriteError) as raised:
            session.close()
    message = str(raised.value)
    kept = [p for p in path.parent.iterdir() if ".unreadable-" in p.name]
    assert len(kept) == 1
    assert str(kept[0]) in message
    assert kept[0].read_bytes() == b"not a cassette"
    assert "the disk is full" in message
    rescued = Path(raised.value.rescued)
    assert str(rescued) in message
    assert recorded_numbers(rescued) == [0]
    rescued.unlink()


def test_a_refused_move_aside_keeps_the_unreadable_file_and_saves_the_recording(
    path, server, monkeypatch
):
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a cassette")
    real_replace = os.replace

    def refuse_move_aside(src, dst, *args, **kwargs):
        if ".unreadable-" in str(dst):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_replace(src, dst, *args, **kwargs)

    session = CassetteSession(path, record="all", timing="instant")
    with session:
        ask(session, server, 0)
        monkeypatch.setattr(os, "replace", refuse_move_aside)
        with pytest.raises(CassetteWriteError, match="the file system is read-only") as raised:
            session.close()
    assert path.read_bytes() == b"not a cassette"
    rescued = Path(raised.value.rescued)
    assert recorded_numbers(rescued) == [0]
    rescued.unlink()


def test_under_pytest_a_full_disk_fails_the_test_naming_the_cassette_and_the_rescued_file(
    pytester, server, monkeypatch
):
    # The disk "fills" for the inner run's cassette folder only, at the final rename of the
    # atomic write (the inner run is in this process).
    folder = str(pytester.path / "cassettes")
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if str(dst).startswith(folder):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    pytester.makepyfile(
        test_full=f"""
        import httpx, pytest

        @pytest.mark.cassette(record="once")
        def test_it(cassette):
            assert httpx.post("{server.url("/v1/x")}", json={{"n": 7}}).status_code == 200
        """
    )
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*CassetteWriteError: cannot write cassette *test_it.msgpack: the disk is full*"
            "The recording was saved to *pytest-toolnexus-rescued*",
        ]
    )
    rescued = re.findall(r"saved to (\S+pytest-toolnexus-rescued\S+\.msgpack)", result.stdout.str())
    assert rescued
    assert recorded_numbers(Path(rescued[0])) == [7]
    Path(rescued[0]).unlink()
