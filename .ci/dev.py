"""Set up a virtual environment on first use, then run one of the project's jobs.

    python3 .ci/dev.py demo    # the example suite, replaying committed cassettes offline
    python3 .ci/dev.py test    # lint, type-check and the full test suite
    python3 .ci/dev.py bench   # the benchmarks, printed as tables

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


def _run(*argv: str | Path) -> None:
    print("+", " ".join(str(a) for a in argv), flush=True)
    code = subprocess.call([str(a) for a in argv], cwd=ROOT)
    if code:
        sys.exit(code)


def ensure_env(extras: str) -> None:
    if sys.version_info < (3, 11):
        sys.exit(f"pytest-toolnexus needs Python 3.11 or newer; this is {sys.version.split()[0]}.")
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted and PY.exists():
        return
    if not PY.exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    _run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    _run(PY, "-m", "pip", "install", "--quiet", "-e", f".[{extras}]")
    STAMP.write_text(wanted)


def main(argv: list[str]) -> None:
    job = argv[0] if argv else ""
    rest = argv[1:]
    if job == "demo":
        ensure_env("dev")
        _run(PY, "-m", "pytest", "examples", "-p", "no:cacheprovider", *rest)
    elif job == "test":
        ensure_env("dev,bench")
        _run(PY, "-m", "ruff", "check", "pytest_toolnexus", "tests", "examples", "benchmarks")
        _run(PY, "-m", "ruff", "format", "--check", "pytest_toolnexus", "tests", "examples", "benchmarks")
        _run(PY, "-m", "mypy")
        _run(PY, "-m", "pytest", "-n", "2", "tests", "examples", *rest)
    elif job == "bench":
        ensure_env("dev,bench")
        _run(PY, "benchmarks/run.py", *rest)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
