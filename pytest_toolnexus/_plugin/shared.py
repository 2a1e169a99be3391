"""What the plugin module and the cassette fixture share: the run's cassette statistics, the
stash keys, the warning for traffic around a cassette, and how a report shows a path.

Nothing here imports the cassette machinery; the plugin module loads it only when a test uses
a cassette (``serve.py``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

__all__ = [
    "CALL_FAILED",
    "ENDING",
    "FAILED",
    "RAISED",
    "RUN_ID",
    "STATS",
    "Stats",
    "UnservedTrafficWarning",
    "base_dir",
    "shown",
]


@dataclass
class Stats:
    """What the run did with cassettes; merged from xdist workers on the controller."""

    replayed: set[str] = field(default_factory=set)
    recorded: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    used: set[str] = field(default_factory=set)
    discarded: set[str] = field(default_factory=set)
    rescued: dict[str, str] = field(default_factory=dict)
    """Cassettes the run stopped recording into, each with the file its recording was kept in."""
    unused: list[tuple[str, str, list[str]]] = field(default_factory=list)
    swallowed: list[tuple[str, str]] = field(default_factory=list)
    """Tests whose code caught a cassette miss and went on, as vcrpy allowed: each with the
    request that had no recording."""
    outside: dict[str, str] = field(default_factory=dict)
    """Cassettes that lead out of the project through a symlink, each with what a write to it
    does (the summary says it beside each one written)."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "replayed": sorted(self.replayed),
                "recorded": sorted(self.recorded),
                "written": sorted(self.written),
                "used": sorted(self.used),
                "discarded": sorted(self.discarded),
                "rescued": self.rescued,
                "unused": self.unused,
                "swallowed": self.swallowed,
                "outside": self.outside,
            }
        )

    def merge_json(self, text: str) -> None:
        data = json.loads(text)
        self.replayed.update(data["replayed"])
        self.recorded.update(data["recorded"])
        self.written.update(data["written"])
        self.used.update(data["used"])
        self.discarded.update(data["discarded"])
        self.rescued.update(data["rescued"])
        self.unused.extend((a, b, list(c)) for a, b, c in data["unused"])
        self.swallowed.extend((a, b) for a, b in data["swallowed"])
        self.outside.update(data["outside"])


STATS: Final = pytest.StashKey[Stats]()
RUN_ID: Final = pytest.StashKey[str]()
CALL_FAILED: Final = pytest.StashKey[bool]()
RAISED: Final = pytest.StashKey["list[BaseException]"]()
"""What the test's setup and call raised, which its report shows: the teardown checks leave
those out. Emptied at teardown."""
FAILED: Final = pytest.StashKey[bool]()
ENDING: Final = pytest.StashKey["int | pytest.ExitCode"]()
"""Set once pytest finishes the session, to its exit status: a test's fixtures torn down after
that belong to a test the run stopped in (Ctrl-C, ``pytest.exit()``, an internal error)."""


class UnservedTrafficWarning(UserWarning):
    """A recording test's traffic went around the cassette (with ``unserved="warn"``)."""


UnservedTrafficWarning.__module__ = "pytest_toolnexus.plugin"


_BASE_DIR: Final = pytest.StashKey[Path]()
_ROOT_PREFIX: Final = pytest.StashKey[str]()


def base_dir(config: pytest.Config) -> Path:
    """The cassette folder: ``--cassette-dir``, else the ``cassette_dir`` ini value, under the
    rootdir when relative (worked out once per run: neither changes)."""
    found = config.stash.get(_BASE_DIR, None)
    if found is None:
        given = config.getoption("cassette_dir") or config.getini("cassette_dir")
        path = Path(given)
        found = config.stash[_BASE_DIR] = path if path.is_absolute() else config.rootpath / path
    return found


def shown(config: pytest.Config, path: Path) -> str:
    """``path`` as reports show it: relative to the rootdir where it lies under it."""
    prefix = config.stash.get(_ROOT_PREFIX, None)
    if prefix is None:
        prefix = config.stash[_ROOT_PREFIX] = os.path.join(str(config.rootpath), "")
    text = str(path)
    if text.startswith(prefix) and len(text) > len(prefix):
        return text[len(prefix) :]  # what relative_to gives, without its parts compared
    try:
        return str(path.relative_to(config.rootpath))
    except ValueError:
        return text
