"""npm packages for the tests that drive ``serve`` from Node, installed at run time.

Nothing from npm is committed: :func:`npm_package` installs a pinned package with npm into a
cache folder outside the work tree (``$TOOLNEXUS_NODE_CACHE``, else
``~/.cache/pytest-toolnexus/node``), once per machine, under a file lock so that xdist workers
do not install it twice at once. Where ``node`` or ``npm`` is missing the test is skipped,
saying which; an install that fails fails the test with npm's own words.
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
            if done.returncode != 0 or not marker.is_file():
                pytest.fail(f"npm install {name}@{version} into {folder} failed:\n{done.stderr}")
    return folder
