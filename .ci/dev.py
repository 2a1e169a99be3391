"""Set up a virtual environment on first use, then run one of the project's jobs.

    python3 .ci/dev.py demo    # the example suite, replaying committed cassettes offline
    python3 .ci/dev.py test    # lint, type-check and the full test suite
    python3 .ci/dev.py bench   # the benchmarks, printed as tables
    python3 .ci/dev.py stress  # the test job 5 times in a row, 2 CPU-bound processes running
                               # (stress 2: twice; later arguments go to pytest)
    python3 .ci/dev.py fuzz    # the fuzzers and properties at 20x their suite size, with a
                               # table of cases tried and failures per class (fuzz 50: 50x)

Only Python 3.11+ is needed. The environment lives in .venv/ and is reinstalled
when pyproject.toml changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".toolnexus-installed"
# pytest-recording refuses to start beside pytest-vcr, so the check that pytest-toolnexus
# coexists with pytest-vcr runs in an environment of its own.
VCR_VENV = ROOT / ".venv-pytest-vcr"


def _run(*argv: str | Path) -> None:
    print("+", " ".join(str(a) for a in argv), flush=True)
    code = subprocess.call([str(a) for a in argv], cwd=ROOT)
    if code:
        sys.exit(code)


def _python(env: Path) -> Path:
    return env / ("Scripts" if os.name == "nt" else "bin") / "python"


def ensure_env(extras: str, env: Path = VENV, *extra_packages: str) -> Path:
    """The environment's python, after creating or updating it when pyproject.toml changed."""
    if sys.version_info < (3, 11):
        sys.exit(f"pytest-toolnexus needs Python 3.11 or newer; this is {sys.version.split()[0]}.")
    python = _python(env)
    stamp = env / ".toolnexus-installed"
    spec = f".[{extras}]" if extras else "."
    key = (ROOT / "pyproject.toml").read_bytes() + spec.encode() + " ".join(extra_packages).encode()
    wanted = hashlib.sha256(key).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted and python.exists():
        return python
    if not python.exists():
        print(f"creating {env}", flush=True)
        venv.EnvBuilder(with_pip=True).create(env)
    _run(python, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    _run(python, "-m", "pip", "install", "--quiet", "-e", spec, *extra_packages)
    stamp.write_text(wanted)
    return python


def _burn() -> None:
    """Keep one CPU busy until killed."""
    while True:
        pass


def stress(runs: int, rest: list[str]) -> None:
    """Run the test job (``test``: lint, types and every test) ``runs`` times while two
    CPU-bound processes compete for the machine, and say how each run ended. Exits non-zero
    unless every run passed."""
    import multiprocessing
    import time

    ensure_env("dev,bench")
    hogs = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(2)]
    for hog in hogs:
        hog.start()
    results: list[str] = []
    try:
        for number in range(1, runs + 1):
            started = time.monotonic()
            print(f"+ stress run {number}/{runs}: python3 .ci/dev.py test", flush=True)
            completed = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "test", *rest],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            lines = completed.stdout.strip().splitlines()
            summary = next((line for line in reversed(lines) if " in " in line), "(no summary)")
            failures = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
            results.append(
                f"run {number}: exit {completed.returncode}, {time.monotonic() - started:.0f} s, "
                f"{summary.strip('= ')}"
            )
            print(results[-1], *failures, sep="\n  ", flush=True)
    finally:
        for hog in hogs:
            hog.terminate()
    print("\n".join(["", "stress: 2 CPU-bound processes running throughout", *results]))
    if any(" exit 0," not in line for line in results):
        sys.exit(1)


FUZZ_TESTS = (
    "tests/test_fuzz_loader.py",
    "tests/test_fuzz_replay.py",
    "tests/test_roundtrip_property.py",
    "tests/test_cassette_names.py",
    "tests/test_write_safety.py",
    "tests/test_recording_fidelity.py",
    "tests/test_secret_gaps.py",
    "tests/test_fuzz_views.py",
)


def fuzz(rest: list[str]) -> None:
    """Run the fuzzers and properties with every case count multiplied (20 unless the first
    argument is a number), then print the cases tried, how they ended and the failures, per
    class. Exits non-zero when any case failed."""
    import json
    import tempfile
    import time

    scale = rest.pop(0) if rest and rest[0].isdigit() else "20"
    ensure_env("dev,bench")
    with tempfile.TemporaryDirectory(prefix="toolnexus-fuzz-") as folder:
        report = Path(folder) / "report.jsonl"
        junit = Path(folder) / "junit.xml"
        env = {**os.environ, "TOOLNEXUS_FUZZ_SCALE": scale, "TOOLNEXUS_FUZZ_REPORT": str(report)}
        argv = [str(PY), "-m", "pytest", "-q", "-p", "no:randomly", *FUZZ_TESTS, *rest]
        print("+", f"TOOLNEXUS_FUZZ_SCALE={scale}", " ".join(argv), flush=True)
        started = time.monotonic()
        code = subprocess.call([*argv, f"--junitxml={junit}"], cwd=ROOT, env=env)
        lines = report.read_text().splitlines() if report.exists() else []
        failed_tests = _failed_tests(junit)
    rows = [json.loads(line) for line in lines]
    print(f"\nfuzz at {scale}x the suite's size, {time.monotonic() - started:.0f} s")
    print(f"{'class':<56} {'cases':>8} {'failures':>8}  outcomes")
    for row in rows:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(row["outcomes"].items()))
        kind = f"{row['test']}: {row['class']}"
        print(f"{kind:<56} {row['cases']:>8} {row['failures']:>8}  {outcomes}")
    total = sum(row["cases"] for row in rows)
    failed = sum(row["failures"] for row in rows)
    print(f"{'total':<56} {total:>8} {failed:>8}")
    for name in failed_tests:
        print(f"FAILED {name} (its class stopped at the first failure; see the output above)")
    if code or failed:
        sys.exit(code or 1)


def _failed_tests(junit: Path) -> list[str]:
    """The tests a JUnit XML report lists as failed or in error."""
    import xml.etree.ElementTree as ElementTree

    if not junit.exists():
        return []
    cases = ElementTree.parse(junit).getroot().iter("testcase")
    return [
        f"{case.get('classname')}::{case.get('name')}"
        for case in cases
        if case.find("failure") is not None or case.find("error") is not None
    ]


def _suite_with_crash_reports(rest: list[str]) -> None:
    """The whole suite under two xdist workers. A worker that dies (a segfault, an abort)
    leaves its Python traceback in a file here (tests/conftest.py turns faulthandler on into
    it); those are printed at the end, where a CI log's tail shows them."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="toolnexus-faults-") as folder:
        env = {**os.environ, "TOOLNEXUS_FAULT_LOG_DIR": folder}
        argv = [str(PY), "-m", "pytest", "-n", "2", "tests", "examples", *rest]
        print("+", " ".join(argv), flush=True)
        code = subprocess.call(argv, cwd=ROOT, env=env)
        for log in sorted(Path(folder).glob("*.log")):
            text = log.read_text(errors="replace").strip()
            if text:
                print(f"\n--- faulthandler output of the test process {log.stem} ---\n{text}")
    if code:
        sys.exit(code)


def main(argv: list[str]) -> None:
    job = argv[0] if argv else ""
    rest = argv[1:]
    if job == "demo":
        ensure_env("dev")
        _run(PY, "-m", "pytest", "examples", "-p", "no:cacheprovider", *rest)
    elif job == "test":
        ensure_env("dev,bench")
        _run(PY, "-m", "ruff", "check", "pytest_toolnexus", "tests", "examples", "benchmarks")
        _run(
            PY,
            "-m",
            "ruff",
            "format",
            "--check",
            "pytest_toolnexus",
            "tests",
            "examples",
            "benchmarks",
        )
        _run(PY, "-m", "mypy")
        vcr_python = ensure_env("", VCR_VENV, "pytest-vcr>=1.0")
        _run(vcr_python, "-m", "pytest", "-c", "tests/coexistence/pytest.ini", "tests/coexistence")
        _suite_with_crash_reports(rest)
    elif job == "stress":
        runs = int(rest.pop(0)) if rest and rest[0].isdigit() else 5
        stress(runs, rest)
    elif job == "fuzz":
        fuzz(rest)
    elif job == "bench":
        ensure_env("dev,bench")
        _run(PY, "benchmarks/run.py", *rest)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
