"""``pytest-toolnexus migrate PATH``: move a pytest-recording suite to pytest-toolnexus.

A dry run by default: it prints the unified diff of every source it would change and a report
(the cassettes it would write, what it translated, what it could not, and with which file and
line). ``--write`` applies the same changes. Run twice, the second run finds nothing to do.

The suite is collected (``pytest --collect-only`` in a subprocess, with the probe plugin) so
that every test id is pytest's own: parametrized ids, classes, and any override of
``vcr_cassette_dir`` or ``default_cassette_name`` are what pytest-recording would have used.

A vcrpy cassette that cannot be converted (a secret would remain in it, say) blocks only its
own tests: they stay on ``@pytest.mark.vcr`` (their whole file does when the marker is not on
the test function itself), everything else is migrated, and the exit code is 1.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final, TextIO

from pytest_toolnexus._store.cassette import Cassette

from .import_vcr import VcrImportError, convert_file
from .migrate_plan import Conversion, Plan, Probe, ProbedTest, plan, read_probe
from .migrate_probe import PROBE_ENV
from .migrate_report import Blocked, Outcome, print_blocked, print_diffs, report, shown
from .migrate_source import Finding, Rewrite, rewrite_source

__all__ = ["migrate"]

_SKIP_DIRS: Final = frozenset(
    {"__pycache__", "node_modules", "venv", "site-packages", "build", "dist"}
)
_ROOT_CONFIG: Final = '''

@pytest.fixture
def cassette_config():
    """Cassette options for every test below; written by pytest-toolnexus migrate."""
    # vcrpy matched on method, scheme, host, port, path and query, never on the body.
    return {"match_on": "vcrpy"}
'''


class MigrateError(Exception):
    """The suite cannot be migrated as it stands (exit code 2)."""


def _probe(path: Path, pytest_args: Sequence[str]) -> Probe:
    folder = path if path.is_dir() else path.parent
    with tempfile.TemporaryDirectory(prefix="toolnexus-migrate-") as scratch:
        out = Path(scratch) / "probe.jsonl"
        env = {**os.environ, PROBE_ENV: str(out)}
        command = [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "pytest_toolnexus._cli.migrate_probe",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            *pytest_args,
            str(path),
        ]
        done = subprocess.run(
            command, cwd=folder, env=env, capture_output=True, text=True, check=False
        )
        if done.returncode not in (0, 5) or not out.exists():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise MigrateError(
                f"pytest could not collect {path} (exit code {done.returncode}), so migrate "
                f"cannot tell its test names; fix the collection first:\n{tail}"
            )
        return read_probe(out.read_text(encoding="utf-8").splitlines())


def _python_files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for folder, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(folder) / name


def _mentions_recording(text: str) -> bool:
    return "vcr" in text or "default_cassette" in text or "block_network" in text


def _rewrite_all(
    files: Sequence[Path],
    the_plan: Plan,
    outcome: Outcome,
    keep: dict[Path, set[str]],
    frozen: set[Path],
) -> tuple[set[tuple[Path, str]], set[tuple[Path, str]]]:
    """Rewrite every file but the ``frozen`` ones, leaving the tests in ``keep`` as they are;
    returns the (file, test) names that could not be placed, and those kept on their own
    ``vcr`` decorator."""
    outcome.rewrites.clear()
    outcome.errors.clear()
    unplaced: set[tuple[Path, str]] = set()
    kept: set[tuple[Path, str]] = set()
    for file in files:
        if file in frozen:
            continue
        text = file.read_bytes().decode("utf-8")
        if not _mentions_recording(text):
            continue
        names = the_plan.names.get(file, {})
        wanted = keep.get(file, set())
        try:
            rewrite = rewrite_source(text, names, keep=wanted)
        except SyntaxError as exc:
            outcome.errors.append(f"{file}:{exc.lineno}: cannot be parsed: {exc.msg}")
            continue
        kept.update((file, q) for q in rewrite.kept)
        unplaced.update((file, q) for q in names if q not in rewrite.placed and q not in wanted)
        if rewrite.text != text or rewrite.findings:
            outcome.rewrites[file] = (text, rewrite)
    return unplaced, kept


def _defines_cassette_config(text: str) -> bool:
    return any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "cassette_config"
        for n in ast.walk(ast.parse(text))
    )


def _root_conftest(probe: Probe, migrated: Sequence[ProbedTest], outcome: Outcome) -> None:
    """Give the rootdir conftest.py a cassette_config with vcrpy's matching, unless it has one
    or no migrated test would get it (each gets a vcr_config of its own nearer to it, which
    shadows the rootdir's)."""
    conftest = probe.rootdir / "conftest.py"
    root_file = conftest.resolve()
    own = [t for t in migrated if t.config_from not in (None, root_file)]
    if len(own) == len(migrated):
        return
    if conftest in outcome.rewrites:
        old, rewrite = outcome.rewrites[conftest]
        if rewrite.defines_cassette_config:
            return
        text = rewrite.text
    elif conftest.exists():
        old = text = conftest.read_bytes().decode("utf-8")
        if _defines_cassette_config(text):
            return
        rewrite = Rewrite(text)
    else:
        outcome.created[conftest] = "import pytest\n" + _ROOT_CONFIG
        rewrite = None
    if rewrite is not None:
        if not re.search(r"^import pytest\b", text, re.MULTILINE):
            text = "import pytest\n" + ("\n" if not text.startswith("import") else "") + text
        rewrite.text = text.rstrip("\n") + "\n" + _ROOT_CONFIG
        rewrite.findings.append(
            Finding(
                1, 'cassette_config added with "match_on": "vcrpy" (vcrpy never matched bodies)'
            )
        )
        outcome.rewrites[conftest] = (old, rewrite)
    if own:
        others = sorted({shown(t.config_from, probe.rootdir) for t in own if t.config_from})
        outcome.notes.append(
            f"conftest.py: its cassette_config serves the {len(migrated) - len(own)} test(s) "
            f"with no vcr_config of their own; the other {len(own)} get the cassette_config "
            f"of {', '.join(others)} instead (converted from their vcr_config), which shadows "
            'the rootdir\'s, so "match_on": "vcrpy" must be there too'
        )


def _load(the_plan: Plan, allow: Sequence[str], outcome: Outcome) -> dict[Path, Cassette]:
    """Every vcrpy file the plan reads, converted; a file that cannot be is left out, and
    ``outcome.blocked`` gets it (its tests are filled in later)."""
    loaded: dict[Path, Cassette] = {}
    for conversion in the_plan.conversions:
        for source in conversion.sources:
            if source in loaded or any(b.source == source for b in outcome.blocked):
                continue
            try:
                result = convert_file(source, conversion.target, allow_secrets=allow)
            except VcrImportError as exc:
                outcome.blocked.append(Blocked(source, (str(exc),), False, ()))
                continue
            outcome.warnings.extend(f"{source}: {line}" for line in result.warnings)
            if result.cassette is None:
                reasons = tuple(result.reasons or result.errors)
                outcome.blocked.append(Blocked(source, reasons, result.secret, ()))
            else:
                loaded[source] = result.cassette
    return loaded


def _merged(conversion: Conversion, loaded: dict[Path, Cassette]) -> Cassette:
    parts = [loaded[source] for source in conversion.sources]
    meta = dict(parts[0].meta)
    if len(parts) > 1:
        meta["imported_from"] = "; ".join(str(p.meta.get("imported_from")) for p in parts)
    interactions = [i for part in parts for i in part.interactions]
    return Cassette(conversion.target, interactions, meta)


def _cassettes(
    the_plan: Plan, loaded: dict[Path, Cassette], kept: set[str], force: bool, outcome: Outcome
) -> None:
    """What becomes of each conversion that serves a migrated test."""
    for conversion in the_plan.conversions:
        if all(nodeid in kept for nodeid in conversion.tests):
            continue
        if any(source not in loaded for source in conversion.sources):
            continue  # blocked: its tests are kept
        cassette = _merged(conversion, loaded)
        target = conversion.target
        if target.exists():
            if target.read_bytes() == cassette.to_bytes():
                outcome.cassettes.append((conversion, None, "unchanged"))
                continue
            if not force:
                outcome.cassettes.append((conversion, None, "exists, differs; --force"))
                continue
        outcome.cassettes.append((conversion, cassette, "write"))


def _blocked_tests(probe: Probe, the_plan: Plan, outcome: Outcome) -> list[ProbedTest]:
    """The tests whose cassette reads a blocked file; each Blocked is given its tests."""
    by_id = {t.nodeid: t for t in probe.tests}
    sources = {b.source for b in outcome.blocked}
    tests: dict[Path, list[str]] = {}
    for conversion in the_plan.conversions:
        for source in conversion.sources:
            if source in sources:
                tests.setdefault(source, []).extend(conversion.tests)
    outcome.blocked = [
        Blocked(b.source, b.reasons, b.secret, tuple(dict.fromkeys(tests.get(b.source, ()))))
        for b in outcome.blocked
    ]
    return [by_id[n] for b in outcome.blocked for n in b.tests if n in by_id]


def _rewrite(
    files: Sequence[Path], probe: Probe, outcome: Outcome, blocked: Sequence[ProbedTest]
) -> set[str]:
    """Rewrite the sources, keeping the blocked tests on their markers; returns the node ids
    of every test kept (a blocked test's whole file is kept when its marker is not on the
    function itself)."""
    keep: dict[Path, set[str]] = {}
    frozen: set[Path] = set()
    for test in blocked:
        if test.own_only:
            keep.setdefault(test.path, set()).add(test.qualname)
        else:
            frozen.add(test.path)
    while True:
        unplaced, kept = _rewrite_all(files, outcome.plan, outcome, keep, frozen)
        missed = {path for path, names in keep.items() for q in names if (path, q) not in kept}
        if not missed - frozen:
            break
        frozen |= missed
    if unplaced:
        # A name the rewrite could not put on a marker (a marker outside a decorator): those
        # tests keep their own default cassette instead.
        outcome.plan = plan(probe, unnamed=sorted(unplaced))
        _rewrite_all(files, outcome.plan, outcome, keep, frozen)
    return {
        t.nodeid
        for t in probe.tests
        if t.marked and (t.path in frozen or t.qualname in keep.get(t.path, ()))
    }


def _extend_blocked(probe: Probe, outcome: Outcome, kept: set[str]) -> None:
    """Add to each blocked file the tests kept only because they share a test file with its
    tests, where the marker is on a class or the module and cannot be left on one test."""
    path_of = {t.nodeid: t.path for t in probe.tests}
    listed = {n for b in outcome.blocked for n in b.tests}
    extra = sorted(kept - listed)
    if not extra:
        return
    for index, blocked in enumerate(outcome.blocked):
        files = {path_of.get(n) for n in blocked.tests}
        mine = tuple(n for n in extra if path_of.get(n) in files)
        if mine:
            extended = (*blocked.tests, *mine)
            outcome.blocked[index] = Blocked(
                blocked.source, blocked.reasons, blocked.secret, extended
            )
            extra = [n for n in extra if n not in mine]
    outcome.notes.append(
        "the tests of a file whose vcr marker is on a class or the module stay with its "
        "blocked tests: that marker cannot be left on one test alone"
    )


def migrate(
    path: Path,
    *,
    write: bool,
    force: bool = False,
    allow_secrets: Sequence[str] = (),
    pytest_args: Sequence[str] = (),
    out: TextIO,
    err: TextIO,
) -> int:
    """Run ``migrate``; returns the exit code: 0 done (or would be done), 1 some tests stay
    on pytest-recording because their cassette cannot be converted (the rest is migrated),
    2 the suite cannot be collected."""
    scan = path.resolve()
    if not scan.exists():
        print(f"error: {path} does not exist", file=err)
        return 2
    try:
        probe = _probe(scan, pytest_args)
    except MigrateError as exc:
        print(f"error: {exc}", file=err)
        return 2
    files = list(_python_files(scan))
    conftest = probe.rootdir / "conftest.py"
    if conftest.exists() and conftest not in files:
        files.append(conftest)
    outcome = Outcome(plan=plan(probe))
    loaded = _load(outcome.plan, allow_secrets, outcome)
    blocked = _blocked_tests(probe, outcome.plan, outcome)
    kept = _rewrite(files, probe, outcome, blocked)
    _extend_blocked(probe, outcome, kept)
    migrated = [t for t in probe.tests if t.marked and t.nodeid not in kept]
    if migrated:
        _root_conftest(probe, migrated, outcome)
    _cassettes(outcome.plan, loaded, kept, force, outcome)
    root = probe.rootdir
    print_diffs(outcome, root, out)
    report(outcome, probe, scan, write, out)
    for warning in outcome.warnings:
        print(f"warning: {warning}", file=err)
    for error in outcome.errors:
        print(f"error: {error}", file=err)
    if write:
        for _, cassette, state in outcome.cassettes:
            if state == "write" and cassette is not None:
                cassette.save(allow_secrets=allow_secrets)
        for file, text in outcome.created.items():
            file.write_text(text, encoding="utf-8", newline="")
        for file, (old, rewrite) in outcome.rewrites.items():
            if rewrite.text != old:
                file.write_text(rewrite.text, encoding="utf-8", newline="")
    if outcome.blocked:
        print_blocked(outcome, root, f"pytest-toolnexus migrate {path}", write, err)
    return 1 if outcome.blocked or outcome.errors else 0
