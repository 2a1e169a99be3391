"""npm packages for the tests that drive ``serve`` from Node, installed at run time.

Nothing from npm is committed: :func:`npm_package` installs a pinned package with npm into a
cache folder outside the work tree (``$TOOLNEXUS_NODE_CACHE``, else
``~/.cache/pytest-toolnexus/node``), once per machine, under a file lock so that xdist workers
do not install it twice at once. Where ``node`` or ``npm`` is missing, or npm cannot install
(no network to its registry, say: it times out or fails), the test is skipped, saying which and
with npm's own last words; where it can install, it does.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["npm_package"]


def _cache() -> Path:
    given = os.environ.get("TOOLNEXUS_NODE_CACHE")
    return Path(given) if given else Path.home() / ".cache" / "pytest-toolnexus" / "node"


def npm_package(name: str, version: str) -> Path:
    """The folder ``name@version`` is installed in (its ``node_modules`` inside)."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not on PATH: the Node proofs of serve need node and npm")
    folder = _cache() / f"{name}-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "node_modules" / name / "package.json"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.is_file():
            _install(name, version, folder, marker)
    return folder


def _install(name: str, version: str, folder: Path, marker: Path) -> None:
    what = f"npm install {name}@{version} into {folder}"
    try:
        done = subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(folder),
                "--no-audit",
                "--no-fund",
                "--no-save",
                f"{name}@{version}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(
            f"{what} took over 300 s (no network to npm's registry?); the Node proofs need it"
        )
    except OSError as exc:
        pytest.skip(f"{what} could not run ({exc}); the Node proofs need it")
    if done.returncode != 0 or not marker.is_file():
        said = "\n".join(done.stderr.strip().splitlines()[-5:]) or "(npm said nothing)"
        pytest.skip(
            f"{what} failed (exit {done.returncode}; no network to npm's registry?), so the Node "
            f"proofs cannot run here. npm said:\n{said}"
        )
