"""``pytest-toolnexus serve`` run as users run it: a process of its own, on loopback.

:func:`serving` starts the command, reads the base URL it prints, and stops it with SIGTERM
when the block ends, failing loudly if it does not exit cleanly. The server's log goes to a
file in a folder of its own, read when it stops: a pipe nobody reads until then fills (about
64 KB of miss messages) and blocks the server mid-answer.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Served", "log_file", "serving", "start_record", "start_serve"]

_START_TIMEOUT = 30.0


def log_file() -> Path:
    """A new empty file, in a folder of its own, for a server's stderr."""
    return Path(tempfile.mkdtemp(prefix="toolnexus-serve-log-")) / "stderr.log"


def _read_and_remove(log: Path) -> str:
    try:
        return log.read_text(errors="replace")
    finally:
        shutil.rmtree(log.parent, ignore_errors=True)


@dataclass
class Served:
    url: str
    process: subprocess.Popen[str]
    log: Path
    _stopped: tuple[int, str] | None = None

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        """Send ``sig``, wait for the exit; the exit code and what it wrote to stderr (the
        same again when asked again)."""
        if self._stopped is not None:
            return self._stopped
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"serve did not stop on signal {sig}") from None
        self._stopped = (self.process.returncode, _read_and_remove(self.log))
        return self._stopped


def start_serve(paths: Sequence[Path | str], *args: str, cwd: Path | None = None) -> Served:
    """Start ``pytest-toolnexus serve PATH... ARGS`` and wait for the URL line it prints."""
    command = [sys.executable, "-m", "pytest_toolnexus", "serve", *map(str, paths), *args]
    return _start(command, "serve", cwd=cwd)


def _start(command: list[str], name: str, cwd: Path | None = None) -> Served:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = log_file()
    with log.open("w") as err:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=err, text=True, cwd=cwd, env=env
        )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], _START_TIMEOUT)
    line = process.stdout.readline() if ready else ""
    if not line.startswith(("http://", "https://")):
        process.kill()
        process.communicate()
        raise AssertionError(
            f"{name} printed {line!r} instead of its URL; stderr:\n{_read_and_remove(log)}"
        )
    return Served(line.strip(), process, log)


def start_record(upstream: str, out: Path, *args: str) -> Served:
    """Start ``pytest-toolnexus record --upstream UPSTREAM --out OUT ARGS`` and wait for the
    URL line it prints; stop it (which writes the cassette) with :meth:`Served.stop`."""
    command = [sys.executable, "-m", "pytest_toolnexus", "record", "--upstream", upstream]
    return _start([*command, "--out", str(out), *args], "record")


@contextlib.contextmanager
def serving(paths: Sequence[Path | str], *args: str) -> Iterator[Served]:
    served = start_serve(paths, *args)
    try:
        yield served
    finally:
        code, err = served.stop()
        assert code == 0, f"serve exited {code}:\n{err}"
