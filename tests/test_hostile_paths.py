"""Cassette paths that are not what they seem (issue 23, row 6).

A cassette path that is a FIFO, a device (``/dev/zero``) or a symlink to one is refused at once
with ``CassetteFormatError`` saying "not a regular file" and naming the path, by
``load_cassette``, by a session, and by ``check`` and ``show``. Before, reading a FIFO blocked
until a writer came (forever), and ``/dev/zero`` was read until ``MemoryError``.

Each case runs in a subprocess with a generous time limit and a cap on its address space, so
a regression fails here (a timeout, a ``MemoryError``) instead of hanging the suite or eating
the machine's memory.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 60.0  # seconds; a refusal takes milliseconds, a regression blocks forever
MEMORY_CAP = 2 << 30  # bytes of address space for the child: /dev/zero read whole exceeds it

pytestmark = pytest.mark.skipif(
    sys.platform == "win32" or not hasattr(os, "mkfifo"), reason="needs FIFOs and /dev/zero"
)

CAPPED = textwrap.dedent(
    f"""
    import resource, runpy, sys
    resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP}))
    kind, what, *sys.argv[1:] = sys.argv[1:]
    if kind == "-m":
        runpy.run_module(what, run_name="__main__", alter_sys=True)
    else:
        exec(compile(what, "<program>", "exec"), {{"__name__": "__main__"}})
    """
)

LOAD = textwrap.dedent(
    """
    import sys
    from pytest_toolnexus import CassetteFormatError, load_cassette, use_cassette
    try:
        if sys.argv[2] == "session":
            use_cassette(sys.argv[1])
        else:
            load_cassette(sys.argv[1], validate=True)
    except CassetteFormatError as exc:
        assert exc.path == sys.argv[1], exc.path
        print("refused:", exc)
    else:
        print("loaded")
    """
)


def run_capped(args, cwd):
    """Run ``python -m <module> ...`` or ``python -c <program> ...`` (``args``) with its
    memory capped and a time limit; a timeout fails the test instead of hanging it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        return subprocess.run(
            [sys.executable, "-c", CAPPED, *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=LIMIT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args} still ran after {LIMIT:.0f} s: it blocked on the path")


def fifo(folder: Path) -> Path:
    path = folder / "fifo.msgpack"
    os.mkfifo(path)
    return path


def link_to(target: Path, folder: Path) -> Path:
    path = folder / "link.msgpack"
    path.symlink_to(target)
    return path


PATHS = {
    "a FIFO": fifo,
    "/dev/zero": lambda folder: Path("/dev/zero"),
    "a symlink to /dev/zero": lambda folder: link_to(Path("/dev/zero"), folder),
    "a symlink to a FIFO": lambda folder: link_to(fifo(folder / "real"), folder),
}


@pytest.fixture(params=sorted(PATHS))
def hostile(request, tmp_path):
    (tmp_path / "real").mkdir()
    return PATHS[request.param](tmp_path)


@pytest.mark.parametrize("reader", ["load", "session"])
def test_a_path_that_is_not_a_regular_file_is_refused_at_once(hostile, reader, tmp_path):
    done = run_capped(["-c", LOAD, str(hostile), reader], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused:"), done.stdout
    assert "not a regular file" in done.stdout
    assert str(hostile) in done.stdout


@pytest.mark.parametrize("command", ["check", "show"])
def test_check_and_show_refuse_it_naming_the_path(hostile, command, tmp_path):
    done = run_capped(["-m", "pytest_toolnexus", command, str(hostile)], tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "not a regular file" in output
    assert str(hostile) in output
    assert "Traceback" not in output


def test_check_of_a_folder_refuses_a_fifo_among_its_cassettes(tmp_path):
    folder = tmp_path / "cassettes"
    folder.mkdir()
    path = fifo(folder)
    done = run_capped(["-m", "pytest_toolnexus", "check", str(folder)], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"FAIL {path}: " in done.stdout
    assert "not a regular file" in done.stdout
