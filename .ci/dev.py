"""Set up a virtual environment on first use, then run one of the project's jobs.

    python3 .ci/dev.py demo    # the example suite, replaying committed cassettes offline
    python3 .ci/dev.py test    # lint, type-check, then the full test suite on each of
                               # CPython 3.11, 3.12 and 3.13 the machine has
                               # (test --python 3.12: the suite on that one only)
    python3 .ci/dev.py bench   # the benchmarks, printed as tables
    python3 .ci/dev.py stress  # the test job 5 times in a row, 2 CPU-bound processes running,
                               # on this interpreter (stress 2: twice; later arguments go to
                               # the test job, --python included)
    python3 .ci/dev.py fuzz    # the fuzzers and properties at 20x their suite size, with a
                               # table of cases tried and failures per class (fuzz 50: 50x)

Only Python 3.11+ is needed. The environment lives in .venv/ and is reinstalled
when pyproject.toml changes.

The suite runs once per interpreter: the one running this script, and each other CPython
3.11, 3.12 and 3.13 found as python3.X on PATH or under pyenv ($PYENV_ROOT or ~/.pyenv,
versions/3.X.N/bin/python3.X; the newest patch release wins). The running interpreter uses
.venv/, each other one .venv-3.X/, built by that interpreter's own `-m venv` with the same
extras. A version the machine lacks is skipped, saying so; `--python 3.X` (repeatable) runs
the suite on the versions named only, and fails when one is missing. Lint, types and the
pytest-vcr check run once, on the running interpreter. The job ends with one line per
interpreter and fails if any suite failed, after running them all.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".toolnexus-installed"
# pytest-recording refuses to start beside pytest-vcr, so the check that pytest-toolnexus
# coexists with pytest-vcr runs in an environment of its own.
VCR_VENV = ROOT / ".venv-pytest-vcr"
# The versions the README promises, each given its own run of the suite by the test job.
SUITE_VERSIONS = ((3, 11), (3, 12), (3, 13))


@dataclass(frozen=True)
class Interpreter:
    """A base Python that can build a virtual environment, and the one it builds."""

    path: Path
    version: tuple[int, int, int]

    @property
    def minor(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    @property
    def env(self) -> Path:
        """.venv/ for the interpreter running this script, .venv-3.X/ for any other."""
        return VENV if self.version[:2] == sys.version_info[:2] else ROOT / f".venv-{self.minor}"


RUNNING = Interpreter(
    Path(sys.executable), (sys.version_info[0], sys.version_info[1], sys.version_info[2])
)


def _run(*argv: str | Path) -> None:
    print("+", " ".join(str(a) for a in argv), flush=True)
    code = subprocess.call([str(a) for a in argv], cwd=ROOT)
    if code:
        sys.exit(code)


def _python(env: Path) -> Path:
    return env / ("Scripts" if os.name == "nt" else "bin") / "python"


def ensure_env(
    extras: str, env: Path = VENV, *extra_packages: str, base: Interpreter = RUNNING
) -> Path:
    """The environment's python, after creating or updating it when pyproject.toml changed.

    ``base`` builds it: the interpreter running this script (the default), or another one,
    through its own ``-m venv``. An environment another minor version built is rebuilt."""
    if base.version < (3, 11):
        sys.exit(f"pytest-toolnexus needs Python 3.11 or newer; this is {base.path} {base.minor}.")
    python = _python(env)
    stamp = env / ".toolnexus-installed"
    spec = f".[{extras}]" if extras else "."
    key = (ROOT / "pyproject.toml").read_bytes() + spec.encode() + " ".join(extra_packages).encode()
    wanted = hashlib.sha256(key).hexdigest()
    built_by = _env_version(env)
    stale = python.exists() and built_by is not None and built_by != base.minor
    if stamp.exists() and stamp.read_text() == wanted and python.exists() and not stale:
        return python
    if stale:
        print(f"rebuilding {env}: it was built by Python {built_by}, not {base.minor}", flush=True)
    if not python.exists() or stale:
        print(f"creating {env} with Python {base.minor} ({base.path})", flush=True)
        if base == RUNNING:
            venv.EnvBuilder(with_pip=True, clear=stale).create(env)
        else:
            _run(base.path, "-m", "venv", *(["--clear"] if stale else []), env)
    _run(python, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    _run(python, "-m", "pip", "install", "--quiet", "-e", spec, *extra_packages)
    stamp.write_text(wanted)
    return python


def _env_version(env: Path) -> str | None:
    """The X.Y of the Python that built the environment, from its pyvenv.cfg."""
    try:
        text = (env / "pyvenv.cfg").read_text()
    except OSError:
        return None
    found = re.search(r"^version(?:_info)?\s*=\s*(\d+)\.(\d+)", text, re.MULTILINE)
    return f"{found[1]}.{found[2]}" if found else None


def find_python(version: tuple[int, int]) -> Interpreter | None:
    """The CPython ``version`` (3.X) this machine has, or None: the running one, else
    ``python3.X`` on PATH, else the newest ``versions/3.X.N`` under pyenv's root. Each
    candidate is asked its version, since a pyenv shim on PATH answers only for the versions
    pyenv has selected."""
    if version == sys.version_info[:2]:
        return RUNNING
    name = f"python{version[0]}.{version[1]}"
    candidates = [Path(found)] if (found := shutil.which(name)) else []
    for root in _pyenv_roots():
        releases = [
            folder
            for folder in (root / "versions").glob(f"{version[0]}.{version[1]}.*")
            if re.fullmatch(r"\d+\.\d+\.\d+", folder.name)
        ]
        releases.sort(key=lambda folder: int(folder.name.rsplit(".", 1)[1]), reverse=True)
        candidates += [folder / "bin" / name for folder in releases]
    for candidate in candidates:
        found_version = _probe(candidate)
        if found_version is not None and found_version[:2] == version:
            return Interpreter(candidate, found_version)
    return None


def _pyenv_roots() -> list[Path]:
    roots = [Path(os.environ["PYENV_ROOT"])] if os.environ.get("PYENV_ROOT") else []
    return list(dict.fromkeys([*roots, Path.home() / ".pyenv"]))


def _probe(python: Path) -> tuple[int, int, int] | None:
    """The version of ``python`` if it runs and can build a virtual environment, else None."""
    try:
        answer = subprocess.run(
            [str(python), "-c", "import sys, venv, ensurepip; print(*sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = answer.stdout.split()
    if answer.returncode or len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def _burn() -> None:
    """Keep one CPU busy until killed."""
    while True:
        pass


def stress(runs: int, rest: list[str]) -> None:
    """Run the test job (``test``: lint, types and every test) ``runs`` times while two
    CPU-bound processes compete for the machine, and say how each run ended. Exits non-zero
    unless every run passed. The suite runs on the running interpreter only, unless the
    arguments name others with ``--python``."""
    import multiprocessing

    if not any(a == "--python" or a.startswith("--python=") for a in rest):
        rest = ["--python", RUNNING.minor, *rest]
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
    "tests/test_fuzz_streamed_secrets.py",
    "tests/test_fuzz_hostile_paths.py",
    "tests/test_fuzz_wide_bombs.py",
)


def fuzz(rest: list[str]) -> None:
    """Run the fuzzers and properties with every case count multiplied (20 unless the first
    argument is a number), then print the cases tried, how they ended and the failures, per
    class. Exits non-zero when any case failed."""
    import json
    import tempfile

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


def _suite_with_crash_reports(python: Path, rest: list[str]) -> tuple[int, str, list[str]]:
    """The whole suite under two xdist workers, on ``python``: its exit code, its counts and
    time, and the tests that failed. A worker that dies (a segfault, an abort) leaves its
    Python traceback in a file here (tests/conftest.py turns faulthandler on into it); those
    are printed at the end, where a CI log's tail shows them."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="toolnexus-faults-") as folder:
        env = {**os.environ, "TOOLNEXUS_FAULT_LOG_DIR": folder}
        junit = Path(folder) / "junit.xml"
        argv = [str(python), "-m", "pytest", "-n", "2", "tests", "examples", *rest]
        print("+", " ".join(argv), flush=True)
        started = time.monotonic()
        code = subprocess.call([*argv, f"--junitxml={junit}"], cwd=ROOT, env=env)
        took = time.monotonic() - started
        counts = _counts(junit)
        failed = _failed_tests(junit)
        for log in sorted(Path(folder).glob("*.log")):
            text = log.read_text(errors="replace").strip()
            if text:
                print(f"\n--- faulthandler output of the test process {log.stem} ---\n{text}")
    return code, f"{counts} in {took:.0f} s", failed


def _counts(junit: Path) -> str:
    """'2011 passed, 2 failed, 3 skipped' from a JUnit XML report."""
    import xml.etree.ElementTree as ElementTree

    if not junit.exists():
        return "no report"
    suite = ElementTree.parse(junit).getroot()
    if suite.tag == "testsuites":
        suite = suite[0]
    number = {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}
    passed = number["tests"] - number["failures"] - number["errors"] - number["skipped"]
    parts = [f"{passed} passed"] + [
        f"{number[key]} {word}"
        for key, word in (("failures", "failed"), ("errors", "errors"), ("skipped", "skipped"))
        if number[key]
    ]
    return ", ".join(parts)


def _chosen_versions(rest: list[str]) -> tuple[list[tuple[int, int]], bool, list[str]]:
    """The versions ``--python 3.X`` names (each may be given more than once), whether any
    was named, and the other arguments, which go to pytest."""
    named: list[tuple[int, int]] = []
    others: list[str] = []
    arguments = iter(rest)
    for argument in arguments:
        if argument == "--python" or argument.startswith("--python="):
            value = argument.partition("=")[2] or next(arguments, "")
            found = re.fullmatch(r"(\d+)\.(\d+)", value)
            if found is None:
                sys.exit(f"--python takes a version such as 3.12, not {value!r}")
            named.append((int(found[1]), int(found[2])))
        else:
            others.append(argument)
    if named:
        return list(dict.fromkeys(named)), True, others
    versions = {*SUITE_VERSIONS, sys.version_info[:2]}  # and the one running, if newer
    return sorted(versions), False, others


def ensure_chromium() -> None:
    """Install Debian's chromium for the report's browser tests (tests/support/browser.py)
    where it is missing and this machine can: as root, with apt-get. Quiet, and never fatal:
    without it those tests skip and say why."""
    if shutil.which("chromium") or not shutil.which("apt-get"):
        return
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        print("+ chromium is missing (not root: the report's browser tests skip)", flush=True)
        return
    print("+ apt-get install chromium (the report's browser tests)", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}

    def quietly(*argv: str) -> int:
        done = subprocess.run(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, check=False
        )
        return done.returncode

    install = ("apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium")
    if quietly(*install) != 0 and (quietly("apt-get", "update", "-qq") or quietly(*install)):
        print("+ chromium could not be installed: the report's browser tests skip", flush=True)


def test(rest: list[str]) -> None:
    """Lint, types and the pytest-vcr check once; then the suite on each interpreter chosen,
    all of them even after one fails; then one line per interpreter. Exits non-zero when any
    suite failed, or when an interpreter named with --python is missing."""
    versions, named, rest = _chosen_versions(rest)
    ensure_env("dev,bench")
    _run(PY, "-m", "ruff", "check", "pytest_toolnexus", "tests", "examples", "benchmarks")
    _run(
        PY, "-m", "ruff", "format", "--check", "pytest_toolnexus", "tests", "examples", "benchmarks"
    )
    _run(PY, "-m", "mypy")
    ensure_chromium()
    vcr_python = ensure_env("", VCR_VENV, "pytest-vcr>=1.0")
    _run(vcr_python, "-m", "pytest", "-c", "tests/coexistence/pytest.ini", "tests/coexistence")
    results: list[str] = []
    failed = False
    for version in versions:
        minor = f"{version[0]}.{version[1]}"
        interpreter = find_python(version)
        if interpreter is None:
            roots = " or ".join(str(root / "versions" / f"{minor}.*") for root in _pyenv_roots())
            line = f"Python {minor}: not found (no python{minor} on PATH, none in {roots})"
            failed = failed or named
            results.append(f"{line}: {'FAILED' if named else 'skipped'}")
            print(f"\n{results[-1]}", flush=True)
            continue
        where = f"Python {'.'.join(map(str, interpreter.version))} ({interpreter.path})"
        print(f"\n+ the suite on {where}, in {interpreter.env.name}/", flush=True)
        try:
            python = ensure_env("dev,bench", interpreter.env, base=interpreter)
        except SystemExit as stop:  # a step of the build failed and said so above
            failed = True
            results.append(f"{where}: FAILED, its environment was not built ({stop.code})")
            continue
        code, summary, failures = _suite_with_crash_reports(python, rest)
        failed = failed or code != 0
        results.append(f"{where}: {'passed' if code == 0 else f'FAILED (exit {code})'}, {summary}")
        results += [f"    FAILED {name}" for name in failures[:10]]
        results += [f"    ... and {len(failures) - 10} more"] if len(failures) > 10 else []
    print("\n".join(["", "the suite on each interpreter:", *(f"  {r}" for r in results)]))
    if failed:
        sys.exit(1)


def main(argv: list[str]) -> None:
    job = argv[0] if argv else ""
    rest = argv[1:]
    if job == "demo":
        ensure_env("dev")
        _run(PY, "-m", "pytest", "examples", "-p", "no:cacheprovider", *rest)
    elif job == "test":
        test(rest)
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
