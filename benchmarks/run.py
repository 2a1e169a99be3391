"""pytest-toolnexus benchmarks, as ratios against baselines measured in the same run.

    .venv/bin/python benchmarks/run.py              # all fifteen, about 13-16 minutes on 2 cores
    .venv/bin/python benchmarks/run.py --only 1 3   # some of them
    .venv/bin/python benchmarks/run.py --full-vcrpy # vcrpy sends all 2,000 requests (~15 min)

Baselines: the httpx ``MockTransport`` floor, vcrpy (YAML cassettes, libyaml's loader where
PyYAML has it), freezegun, bare pytest and ``python -c pass``, and pytest-recording. Scratch
cassettes and generated test projects go to benchmarks/.work/ and are removed at the end. See
benchmarks/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import compileall
import os
import platform
import sys
from importlib.metadata import version
from pathlib import Path

import anthropic  # noqa: F401  (loaded up front: benchmark 3 measures with the SDKs loaded)
import bench_clock
import bench_huge_event
import bench_load
import bench_open
import bench_realtime
import bench_record
import bench_replay
import bench_report
import bench_scan
import bench_serve
import bench_startup
import bench_stream
import bench_suite
import bench_virtual
import bench_write
import openai  # noqa: F401  (idem)
import yaml
from _common import Table, now, remove_work_dir, work_dir
from vcr.serializers import yamlserializer

import pytest_toolnexus


def _header() -> str:
    packages = (
        "pytest-toolnexus",
        "httpx",
        "httpx2",
        "msgpack",
        "vcrpy",
        "pytest-recording",
        "PyYAML",
        "freezegun",
        "openai",
        "anthropic",
    )
    versions = ", ".join(f"{name} {version(name)}" for name in packages)
    loader = yamlserializer._BaseLoader.__name__
    libyaml = "libyaml present" if yaml.__with_libyaml__ else "pure-Python PyYAML"
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return "\n".join(
        [
            "pytest-toolnexus benchmarks",
            f"  python {platform.python_version()} on {platform.platform()}, "
            f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
            f"  {versions}",
            f"  vcrpy's YAML loader: {loader} ({libyaml})",
        ]
    )


def _load() -> float:
    """The 1-minute load average: above the CPU count, other processes share the timings."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", type=int, nargs="+", choices=range(1, 16), help="benchmarks to run"
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="timed rounds of benchmark 1 (default 5)"
    )
    parser.add_argument(
        "--full-vcrpy",
        action="store_true",
        help="benchmark 1: let vcrpy replay all 2,000 requests instead of every 50th",
    )
    args = parser.parse_args(argv)
    chosen = set(args.only or range(1, 16))

    started_all = now()
    print(_header(), flush=True)
    # Every process the benchmarks start imports the plugin from bytecode, as an installed
    # package does (pip compiles it, as it compiled vcrpy, pytest-recording and the SDKs): a
    # checkout under PYTHONDONTWRITEBYTECODE=1 would otherwise compile each of its modules
    # from source in every pytest run, a cost no user's suite pays and the baselines do not.
    compileall.compile_dir(Path(pytest_toolnexus.__file__).parent, quiet=1)
    work = work_dir()
    tables: list[Table] = []
    try:
        steps = [
            (1, lambda: bench_replay.run(work, args.rounds, args.full_vcrpy)),
            (2, lambda: bench_load.run(work)),
            (3, lambda: bench_clock.run(work)),
            (4, lambda: bench_virtual.run(work)),
            (5, lambda: bench_stream.run(work)),
            (6, lambda: bench_startup.run(work)),
            (7, lambda: bench_suite.run(work)),
            (8, lambda: bench_scan.run(work)),
            (9, lambda: bench_write.run(work)),
            (10, lambda: bench_record.run(work)),
            (11, lambda: bench_serve.run(work)),
            (12, lambda: bench_realtime.run(work)),
            (13, lambda: bench_report.run(work)),
            (14, lambda: bench_open.run(work)),
            (15, lambda: bench_huge_event.run(work)),
        ]
        for number, step in steps:
            if number not in chosen:
                continue
            started = now()
            produced, _ = step()
            for table in produced:
                print()
                print(table.render(), flush=True)
            print(
                f"  [benchmark {number}: {now() - started:.1f} s, load average {_load():.2f}]",
                flush=True,
            )
            tables += produced
    finally:
        remove_work_dir(work)

    verdicts = [cell for t in tables for row in t.rows for cell in row]
    passed = sum(1 for v in verdicts if v == "PASS")
    missed = sum(1 for v in verdicts if v == "MISS")
    print()
    print(
        f"Goals: {passed} PASS, {missed} MISS.  Total {now() - started_all:.1f} s, "
        f"load average at the end {_load():.2f}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
