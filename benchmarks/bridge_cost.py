"""What the bridges cost: the plugin's import time, and its per-test cost with and without
aiohttp, requests or boto3 imported. Standalone (not part of run.py):

    .venv/bin/python benchmarks/bridge_cost.py            # the code in this checkout
    PYTHONPATH=/path/to/other/checkout .venv/bin/python benchmarks/bridge_cost.py

Import time is the median of 15 fresh interpreters timing ``import pytest_toolnexus.plugin``.
Per-test cost is (time of N tests marked ``@pytest.mark.cassette`` - time of N unmarked tests)
/ N, in CPU time (process_time, which other processes disturb less), one pytest run each,
median of 5, with the openai and anthropic SDKs imported by the
test module (and aiohttp, requests or boto3 too, in the later rows).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

N = 300
IMPORT = (
    "import time; t = time.perf_counter(); import pytest_toolnexus.plugin; "
    "print(time.perf_counter() - t)"
)


def import_time() -> float:
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", IMPORT], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(15)
    ]
    return statistics.median(runs)


def suite(folder: Path, marked: bool, libraries: str) -> Path:
    marker = "@pytest.mark.cassette\n" if marked else ""
    tests = "".join(f"{marker}def test_{n}():\n    pass\n\n\n" for n in range(N))
    path = folder / f"test_{'marked' if marked else 'plain'}_{libraries.replace(',', '_')}.py"
    imports = "".join(f"import {name}\n" for name in libraries.split(","))
    path.write_text(f"import pytest\n{imports}\n\n{tests}")
    return path


def run_time(path: Path) -> float:
    code = textwrap.dedent(
        f"""
        import time, pytest
        t = time.process_time()
        pytest.main(["-q", "-p", "no:randomly", "-p", "no:cacheprovider", {str(path)!r}])
        print("ELAPSED", time.process_time() - t)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=path.parent,
        env={**os.environ, "CI": ""},
    ).stdout
    return float(next(line for line in out.splitlines() if line.startswith("ELAPSED")).split()[1])


def per_test(folder: Path, libraries: str) -> float:
    marked, plain = suite(folder, True, libraries), suite(folder, False, libraries)
    samples = [(run_time(marked) - run_time(plain)) / N for _ in range(5)]
    return statistics.median(samples)


def main() -> None:
    import pytest_toolnexus

    print(f"pytest_toolnexus from {Path(pytest_toolnexus.__file__).parent}")
    print(f"import pytest_toolnexus.plugin: {import_time() * 1000:.1f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "pytest.ini").write_text("[pytest]\n")
        for libraries in (
            "openai,anthropic",
            "openai,anthropic,aiohttp",
            "openai,anthropic,requests",
            "openai,anthropic,boto3",
        ):
            cost = per_test(folder, libraries)
            print(f"per-test cost, {libraries} imported: {cost * 1000:.3f} ms")


if __name__ == "__main__":
    main()
