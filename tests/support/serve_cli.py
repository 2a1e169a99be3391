"""``pytest-toolnexus serve`` run as users run it: a process of its own, on loopback.

:func:`serving` starts the command, reads the base URL it prints, and stops it with SIGTERM
when the block ends, failing loudly if it does not exit cleanly.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Served", "serving", "start_serve"]

_START_TIMEOUT = 30.0


@dataclass
class Served:
    url: str
    process: subprocess.Popen[str]

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        """Send ``sig``, wait for the exit; the exit code and what it wrote to stderr."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"serve did not stop on signal {sig}") from None
        assert self.process.stderr is not None
        return self.process.returncode, self.process.stderr.read()


def start_serve(paths: Sequence[Path | str], *args: str, cwd: Path | None = None) -> Served:
    """Start ``pytest-toolnexus serve PATH... ARGS`` and wait for the URL line it prints."""
    command = [sys.executable, "-m", "pytest_toolnexus", "serve", *map(str, paths), *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
    )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], _START_TIMEOUT)
    line = process.stdout.readline() if ready else ""
    if not line.startswith("http://"):
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"serve printed {line!r} instead of its URL; stderr:\n{err}")
    return Served(line.strip(), process)


@contextlib.contextmanager
def serving(paths: Sequence[Path | str], *args: str) -> Iterator[Served]:
    served = start_serve(paths, *args)
    try:
        yield served
    finally:
        code, err = served.stop()
        assert code == 0, f"serve exited {code}:\n{err}"
