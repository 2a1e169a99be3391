"""Timing, statistics and table printing shared by the benchmarks.

``now`` reads the kernel's monotonic clock through ``time.clock_gettime``, which neither the
virtual clock (it rebinds ``time.perf_counter`` and ``time.monotonic`` themselves) nor freezegun
touches, so every figure is read on the real clock.
"""

from __future__ import annotations

import gc
import shutil
import socket
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from time import CLOCK_MONOTONIC, clock_gettime
from time import process_time as cpu_now  # this process's CPU time, for the load notes


def now() -> float:
    """Real seconds, whatever clock is installed."""
    return clock_gettime(CLOCK_MONOTONIC)


__all__ = [
    "LoopbackServer",
    "Table",
    "cpu_now",
    "interleaved",
    "mean",
    "median",
    "now",
    "verdict",
    "work_dir",
]

_HERE = Path(__file__).resolve().parent


class LoopbackServer(ThreadingHTTPServer):
    """A threaded HTTP server for a benchmark's upstream, its handler threads daemons and its
    socket without Nagle's delay, so a small write goes out at once."""

    daemon_threads = True

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().server_bind()


def work_dir() -> Path:
    """A fresh scratch folder under benchmarks/.work/ (gitignored), emptied on every run."""
    base = _HERE / ".work"
    base.mkdir(exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="run-", dir=base))


def remove_work_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def run_alone(run: Callable[[Path], tuple[list[Table], object]]) -> None:
    """A benchmark module run on its own: its ``run`` in a fresh scratch folder, each table
    printed, the folder removed whatever happens."""
    work = work_dir()
    try:
        for table in run(work)[0]:
            print(table.render())
    finally:
        remove_work_dir(work)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values)


def interleaved(
    fns: Sequence[Callable[[], object]], repeats: int, warmup: int = 1
) -> list[tuple[float, float]]:
    """Median (wall seconds, CPU seconds) per call of each of ``fns``, timed in turn.

    The functions alternate, call after call, so a burst of load from another process falls on
    all of them alike rather than on whichever happened to be running.
    """
    for fn in fns:
        for _ in range(warmup):
            fn()
    gc.collect()
    walls: list[list[float]] = [[] for _ in fns]
    cpus: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            cpu, start = cpu_now(), now()
            fn()
            walls[i].append(now() - start)
            cpus[i].append(cpu_now() - cpu)
    return [(median(w), median(c)) for w, c in zip(walls, cpus, strict=True)]


def verdict(ok: bool | None) -> str:
    if ok is None:
        return "info"
    return "PASS" if ok else "MISS"


@dataclass
class Table:
    """A plain-text table: a title, column names, rows of already formatted cells."""

    title: str
    columns: Sequence[str]
    rows: list[Sequence[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([str(c) for c in cells])

    def note(self, text: str) -> None:
        self.notes.append(text)

    def render(self) -> str:
        widths = [len(c) for c in self.columns]
        for row in self.rows:
            for i, cell in enumerate(row):
                widths[i] = max(widths[i], len(cell))

        def line(cells: Sequence[str]) -> str:
            parts = []
            for i, cell in enumerate(cells):
                # Left-align the first column (labels), right-align figures.
                parts.append(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]))
            return "  ".join(parts).rstrip()

        rule = "  ".join("-" * w for w in widths)
        out = [self.title, "=" * len(self.title), line(self.columns), rule]
        out += [line(row) for row in self.rows]
        out += [f"  {n}" for n in self.notes]
        return "\n".join(out)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f}"


def ratio(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}x"
    if value >= 10:
        return f"{value:.1f}x"
    return f"{value:.2f}x"
