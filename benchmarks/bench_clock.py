"""Benchmark 3: what the virtual clock costs per test, with the openai and anthropic SDKs imported.

A test that replays on the virtual clock pays for a ``VirtualClock`` and for ``install(clock)``
plus the uninstall at its end. ``freezegun.freeze_time().start()`` / ``.stop()`` does the same
job by scanning every loaded module for time functions, so its cost grows with the SDKs loaded.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import anthropic
import freezegun
import openai
from _common import Table, median, ms, now, ratio, verdict
from _fixtures import chat_pairs, write_toolnexus

from pytest_toolnexus import use_cassette
from pytest_toolnexus._timing.timepatch import install
from pytest_toolnexus._timing.virtual import VirtualClock

GOAL_MS = 2.0
CLOCK_CYCLES = 1_000
FREEZEGUN_CYCLES = 20
SESSION_CYCLES = 200


def _clock_cycle() -> float:
    start = now()
    clock = VirtualClock()
    uninstall = install(clock)
    uninstall()
    return now() - start


def _freezegun_cycle() -> float:
    start = now()
    freezer = freezegun.freeze_time("2024-11-19 07:06:40")
    freezer.start()
    freezer.stop()
    return now() - start


def _session_cycle(path: Path) -> float:
    start = now()
    with use_cassette(path, on_unused="ignore"):
        pass
    return now() - start


_FIRST_INSTALL = """
import time, openai, anthropic
from pytest_toolnexus._timing.timepatch import install
from pytest_toolnexus._timing.virtual import VirtualClock
start = time.clock_gettime(time.CLOCK_MONOTONIC)
install(VirtualClock())()
print(time.clock_gettime(time.CLOCK_MONOTONIC) - start)
"""


def _first_install() -> float:
    """The first install in a fresh process, which scans every loaded module once for sleep
    functions bound as globals (later installs only look at modules loaded since)."""
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_INSTALL], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


def run(work: Path) -> tuple[list[Table], dict[str, float]]:
    assert openai.__version__
    assert anthropic.__version__
    modules = len(sys.modules)
    path = work / "clock-1.msgpack"
    write_toolnexus(path, chat_pairs(1))

    for _ in range(20):
        _clock_cycle()
    gc.collect()
    clock = median([_clock_cycle() for _ in range(CLOCK_CYCLES)])
    for _ in range(20):
        _session_cycle(path)
    gc.collect()
    session = median([_session_cycle(path) for _ in range(SESSION_CYCLES)])
    first = median([_first_install() for _ in range(3)])
    _freezegun_cycle()
    gc.collect()
    frozen = median([_freezegun_cycle() for _ in range(FREEZEGUN_CYCLES)])

    table = Table(
        f"3. Virtual clock cost per test ({modules:,} modules loaded, openai "
        f"{openai.__version__} and anthropic {anthropic.__version__} among them)",
        ["what", "ms per test", "freezegun / this", "goal", ""],
    )
    table.add(
        f"VirtualClock() + install + uninstall (median of {CLOCK_CYCLES:,})",
        f"{clock * 1e3:.3f}",
        ratio(frozen / clock),
        f"<= {GOAL_MS:.0f} ms",
        verdict(clock * 1e3 <= GOAL_MS),
    )
    table.add(
        f"use_cassette(1 interaction): load, install, close (median of {SESSION_CYCLES})",
        f"{session * 1e3:.3f}",
        ratio(frozen / session),
        f"<= {GOAL_MS:.0f} ms",
        verdict(session * 1e3 <= GOAL_MS),
    )
    table.add(
        "the first install in a process: import time-machine, scan the loaded modules once",
        f"{first * 1e3:.3f}",
        ratio(frozen / first),
        "once per process",
        "info",
    )
    table.add(
        f"freezegun.freeze_time() start + stop (median of {FREEZEGUN_CYCLES})",
        ms(frozen),
        "1.00x",
        "",
        "",
    )
    table.note("Elsewhere: a naive freeze_time costs ~69 ms per test with these SDKs imported.")
    return [table], {"clock_ms": clock * 1e3, "freezegun_ms": frozen * 1e3}


if __name__ == "__main__":
    from _common import run_alone

    run_alone(run)
