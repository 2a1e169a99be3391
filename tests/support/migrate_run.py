"""Running ``pytest-toolnexus migrate`` on a project as a user does, in a process of its own, and
the options of the pytest runs around it (no plugin of ours reorders, caches or parallelises)."""

import subprocess
import sys

INNER = ("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist")


def migrate(path, *args):
    """``pytest-toolnexus migrate PATH ARGS...``: its exit code, output and errors."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_toolnexus", "migrate", str(path), *args],
        capture_output=True,
        text=True,
        check=False,
    )
