"""Fuzzing cassette paths (issue 23, hostile paths): whatever sits at a cassette's path, every
way of using it ends at once in a typed error or in success, never in a hang or an untyped
error.

Two classes:

- special files and links (systematic): a FIFO, a symlink to one, a symlink to
  ``/dev/zero``, a Unix socket, a symlink to itself, two symlinks in a loop, a dangling
  symlink, a folder where the file goes, a symlink to a folder, a path through a file, a path
  through a looping folder link, a name too long for the file system, a NUL in the name, an
  empty file, and a good cassette behind a chain of links; each used every way: loaded (and
  validated), replayed by a session, recorded into in record modes ``once``, ``new`` and
  ``all``, checked (the file, and its folder) and shown;
- odd names (random): names with control characters, newlines, bidi and combining marks,
  emoji, quotes, glob and shell characters, leading dashes and dots, bytes that are not UTF-8,
  percent signs, 200 to 300 bytes; each recorded into, replayed, checked and shown.

A case passes when each use succeeds or raises a ``CassetteError`` (or, replaying a path where
no file is, ``CassetteMissError``; ``check`` and ``show``: return 0 or 1 with a line naming the
file, or saying no cassette was found) within ``LIMIT`` seconds; an alarm stops a use
that blocks. Counts: 15 kinds x 8 uses; 60 names (times ``TOOLNEXUS_FUZZ_SCALE``).
"""

import contextlib
import io
import os
import random
import signal
import socket
import warnings
from collections import Counter

import pytest

from pytest_toolnexus import (
    CassetteError,
    CassetteMissError,
    CassetteSession,
    TransportRequest,
    TransportResponse,
    load_cassette,
)
from pytest_toolnexus._cli.check import check
from pytest_toolnexus._cli.main import PREVIEW
from pytest_toolnexus._cli.show import show
from tests.support.fuzzing import report, scaled

LIMIT = 10.0
URL = "https://api.example.invalid/v1/x"


class Hang(Exception):
    """A use of a path did not end within the limit."""


@contextlib.contextmanager
def deadline(seconds):
    def fire(signum, frame):
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def answer(sent):
    return TransportResponse(200, {"content-type": "application/json"}, {"ok": 1})


def _record(path, mode):
    session = CassetteSession(path, record=mode, timing="instant", live=answer)
    session.transport(TransportRequest("POST", URL, body={"n": 1}))
    session.close()
    return "recorded"


def _replay(path):
    with CassetteSession(path, timing="instant", on_unused="ignore") as session:
        response = session.transport(TransportRequest("POST", URL, body={"n": 1}))
    return f"replayed {response.status}"


def _cli(command, target):
    out = io.StringIO()
    if command == "check":
        code = check([target], [], out, io.StringIO())
    else:
        code = show(target, out, width=PREVIEW, err=io.StringIO())
    text = out.getvalue()
    name = os.path.basename(target)
    named = name in text or repr(name)[1:-1] in text or "no cassettes found" in text
    if code not in (0, 1) or (code == 1 and not named):
        raise AssertionError(f"{command} exit {code}: {text[:300]}")
    return f"{command} exit {code}"


USES = {
    "load": lambda p: (load_cassette(p, validate=True), "loaded")[1],
    "replay": _replay,
    "record once": lambda p: _record(p, "once"),
    "record new": lambda p: _record(p, "new"),
    "record all": lambda p: _record(p, "all"),
    "check the file": lambda p: _cli("check", p),
    "check its folder": lambda p: _cli("check", p.parent),
    "show": lambda p: _cli("show", p),
}


def _good(path):
    _record(path, "all")


KINDS = {
    # kind -> makes the thing in folder ``d`` and returns the cassette path
    "a FIFO": lambda d: (os.mkfifo(d / "x.msgpack"), d / "x.msgpack")[1],
    "a symlink to a FIFO": lambda d: (
        os.mkfifo(d / "pipe"),
        (d / "x.msgpack").symlink_to(d / "pipe"),
        d / "x.msgpack",
    )[2],
    "a symlink to /dev/zero": lambda d: (
        (d / "x.msgpack").symlink_to("/dev/zero"),
        d / "x.msgpack",
    )[1],
    "a Unix socket": lambda d: _socket(d / "x.msgpack"),
    "a symlink to itself": lambda d: (
        (d / "x.msgpack").symlink_to(d / "x.msgpack"),
        d / "x.msgpack",
    )[1],
    "two symlinks in a loop": lambda d: (
        (d / "y.msgpack").symlink_to(d / "x.msgpack"),
        (d / "x.msgpack").symlink_to(d / "y.msgpack"),
        d / "x.msgpack",
    )[2],
    "a dangling symlink": lambda d: ((d / "x.msgpack").symlink_to(d / "gone"), d / "x.msgpack")[1],
    "a folder where the file goes": lambda d: ((d / "x.msgpack").mkdir(), d / "x.msgpack")[1],
    "a symlink to a folder": lambda d: ((d / "x.msgpack").symlink_to(d), d / "x.msgpack")[1],
    "a path through a file": lambda d: ((d / "f").write_text("x"), d / "f" / "x.msgpack")[1],
    "a path through a looping folder link": lambda d: (
        (d / "loop").symlink_to(d / "loop"),
        d / "loop" / "x.msgpack",
    )[1],
    "a name too long": lambda d: d / ("n" * 300 + ".msgpack"),
    "a NUL in the name": lambda d: d / "x\x00y.msgpack",
    "an empty file": lambda d: ((d / "x.msgpack").write_bytes(b""), d / "x.msgpack")[1],
    "a cassette behind a chain of links": lambda d: _chain(d),
}

SOCKETS = []


def _socket(path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    SOCKETS.append(server)
    return path


def _chain(d):
    (d / "store").mkdir()
    _good(d / "store" / "real.msgpack")
    (d / "a").symlink_to(d / "store" / "real.msgpack")
    (d / "x.msgpack").symlink_to(d / "a")
    return d / "x.msgpack"


class Fuzz:
    def __init__(self):
        self.outcomes: Counter[str] = Counter()
        self.failures: list[str] = []

    def use(self, label, use, path):
        try:
            with warnings.catch_warnings(), deadline(LIMIT):
                warnings.simplefilter("ignore")
                outcome = use(path)
        except (CassetteError, CassetteMissError) as exc:  # a miss: nothing is there to play
            outcome = f"refused ({type(exc).__name__})"
            if not str(exc):
                self.failures.append(f"{label}: {type(exc).__name__} with no message")
        except BaseException as exc:  # a hang, or an untyped error: what this exists to find
            outcome = "failed"
            self.failures.append(f"{label}: {type(exc).__name__}: {exc!s:.300}")
        self.outcomes[outcome] += 1
        return outcome

    def finish(self, kind):
        report("hostile paths", kind, self.outcomes, len(self.failures))
        assert not self.failures, f"{len(self.failures)} failed:\n" + "\n".join(self.failures[:15])


@pytest.fixture
def sockets():
    yield
    while SOCKETS:
        SOCKETS.pop().close()


def test_special_files_and_links_are_refused_typed_or_used(tmp_path, sockets):
    fuzz = Fuzz()
    for number, (kind, make) in enumerate(KINDS.items()):
        for use_number, (use, run) in enumerate(USES.items()):
            folder = tmp_path / f"k{number}-{use_number}"
            folder.mkdir()
            path = make(folder)
            fuzz.use(f"{kind}, {use}", run, path)
    assert fuzz.outcomes["loaded"] == 1  # the chain of links, read through
    assert fuzz.outcomes["refused (CassetteFormatError)"] > 0
    fuzz.finish("special files and links")


# -- odd names ----------------------------------------------------------------------------------

PIECES = [
    "\t",
    "\n",
    "\r",
    "\x01",
    "\x7f",
    " ",
    "\u202e",  # right-to-left override
    "e\u0301",  # a combining accent (NFD)
    "\u00e9",
    "\U0001f642",
    "\u65e5\u672c",
    '"',
    "'",
    "\\",
    "*",
    "?",
    "[",
    "]",
    "$",
    "`",
    "%2F",
    "%",
    "-",
    ".",
    "..",
    "~",
    "\udcff",  # a byte that is not UTF-8, as os.fsdecode reads it
    "name",
    "x",
]


def odd_name(rng):
    if rng.random() < 0.1:
        return "n" * rng.randint(200, 300) + ".msgpack"  # near and past the 255-byte limit
    head = rng.choice(["-", ".", " ", "", "", ""])
    body = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12)))
    return head + body + rng.choice([".msgpack", ".msgpack", "", ".msgpack."])


def test_odd_names_record_replay_check_and_show_or_are_refused_typed(tmp_path):
    fuzz = Fuzz()
    rng = random.Random(2313)
    for number in range(scaled(60)):
        folder = tmp_path / f"n{number}"
        folder.mkdir()
        path = folder / odd_name(rng)
        label = f"{os.fsencode(path.name)[:80]!r}"
        recorded = fuzz.use(f"{label}, record", lambda p: _record(p, "once"), path)
        if recorded == "recorded":
            fuzz.use(f"{label}, replay", _replay, path)
        for use in ("check the file", "check its folder", "show"):
            fuzz.use(f"{label}, {use}", USES[use], path)
    assert fuzz.outcomes["recorded"] > 0
    assert fuzz.outcomes["replayed 200"] == fuzz.outcomes["recorded"]
    fuzz.finish("odd names")
