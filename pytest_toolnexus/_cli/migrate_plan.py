"""Which vcrpy cassettes become which pytest-toolnexus cassette, test by test.

pytest-recording gives each marked test one cassette it records into (``<vcr_cassette_dir>/
<default_cassette_name>.yaml``) and loads every name on its ``vcr`` markers as well, read-only.
Here each test gets the file the plugin will look up for it:

- no names on its markers: its own default cassette, converted from its own YAML;
- names on a marker of the test itself, and no YAML of its own: the named cassettes merged
  into one shared cassette, named on the rewritten marker (``"a+b"`` becomes ``a_b``), so
  tests that named the same files share one file again;
- otherwise (names on a class or module marker, or a YAML of its own as well): its own default
  cassette, holding its own interactions and then each named cassette's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_toolnexus._plugin.settings import cassette_file_name, default_cassette_path

__all__ = ["Conversion", "Plan", "Probe", "ProbedTest", "plan", "read_probe"]


@dataclass(frozen=True, slots=True)
class ProbedTest:
    """What the probe saw of one collected test."""

    nodeid: str
    path: Path
    qualname: str
    test_name: str
    marked: bool
    closest_own: bool
    primary: Path
    extras: tuple[Path, ...]
    problems: tuple[str, ...]
    own_only: bool = False
    """Every ``vcr`` marker of the test is a decorator of the test function itself."""
    config_from: Path | None = None
    """The suite file whose ``vcr_config`` (or ``cassette_config``) the test gets, if any."""


@dataclass(frozen=True, slots=True)
class Probe:
    rootdir: Path
    cassette_dir: Path
    tests: tuple[ProbedTest, ...]


@dataclass(frozen=True, slots=True)
class Conversion:
    """One cassette to write, from vcrpy files in the order pytest-recording loaded them."""

    target: Path
    sources: tuple[Path, ...]
    tests: tuple[str, ...]


@dataclass
class Plan:
    conversions: list[Conversion] = field(default_factory=list)
    names: dict[Path, dict[str, str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)


def read_probe(lines: Iterable[str]) -> Probe:
    """Parse the probe's JSON lines: a header, then one line per test."""
    rows = [json.loads(line) for line in lines if line.strip()]
    head: Mapping[str, Any] = rows[0]
    tests = tuple(
        ProbedTest(
            nodeid=row["nodeid"],
            path=Path(row["path"]),
            qualname=row["qualname"],
            test_name=row["test_name"],
            marked=row["marked"],
            closest_own=row["closest_own"],
            primary=Path(row["primary"]),
            extras=tuple(Path(e) for e in row["extras"]),
            problems=tuple(row["problems"]),
            own_only=bool(row.get("own_only")),
            config_from=Path(row["config_from"]) if row.get("config_from") else None,
        )
        for row in rows[1:]
    )
    return Probe(Path(head["rootdir"]), Path(head["cassette_dir"]), tests)


def _extras(test: ProbedTest) -> list[Path]:
    return [p for p in dict.fromkeys(test.extras) if p != test.primary]


def _shared_name(test: ProbedTest) -> str | None:
    extras = _extras(test)
    if not extras or not test.closest_own or test.primary.exists():
        return None
    return cassette_file_name("+".join(dict.fromkeys(p.stem for p in extras)))


def plan(probe: Probe, *, unnamed: Sequence[tuple[Path, str]] = ()) -> Plan:
    """The conversions and marker names for ``probe``; the tests in ``unnamed`` (file,
    qualified name) keep their own default cassette whatever their markers name."""
    result = Plan()
    marked = [t for t in probe.tests if t.marked]
    # A name goes on a function's marker only when every instance of it (parametrized ids)
    # can take the same name.
    wanted: dict[tuple[Path, str], set[str | None]] = {}
    for test in marked:
        wanted.setdefault((test.path, test.qualname), set()).add(_shared_name(test))
    conversions: dict[Path, Conversion] = {}
    for test in marked:
        result.problems.extend(f"{test.nodeid}: {p}" for p in test.problems)
        key = (test.path, test.qualname)
        choices = wanted[key]
        name = next(iter(choices)) if len(choices) == 1 and key not in unnamed else None
        if name is not None:
            result.names.setdefault(test.path, {})[test.qualname] = name
        target = default_cassette_path(
            probe.cassette_dir, probe.rootdir, test.path, test.test_name, name
        )
        candidates = [test.primary, *_extras(test)]
        sources = tuple(p for p in candidates if p.is_file())
        for missing in candidates[1:]:
            if not missing.is_file():
                result.problems.append(
                    f"{test.nodeid}: its marker names {missing}, which does not exist "
                    "(pytest-recording skipped it too)"
                )
        if not sources:
            result.unrecorded.append(test.nodeid)
            continue
        known = conversions.get(target)
        if known is None:
            conversions[target] = Conversion(target, sources, (test.nodeid,))
        elif known.sources == sources:
            conversions[target] = Conversion(target, sources, (*known.tests, test.nodeid))
        else:
            result.problems.append(
                f"{test.nodeid}: its cassette {target} is also {known.tests[0]}'s, which "
                "pytest-recording loaded from other files; name one of them apart by hand"
            )
    result.conversions = list(conversions.values())
    return result
