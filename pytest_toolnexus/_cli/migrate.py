"""``pytest-toolnexus migrate PATH``: move a pytest-recording suite to pytest-toolnexus.

A dry run by default: it prints the unified diff of every source it would change and a report
(the cassettes it would write, what it translated, what it could not, and with which file and
line). ``--write`` applies the same changes. Run twice, the second run finds nothing to do.

The suite is collected (``pytest --collect-only`` in a subprocess, with the probe plugin) so
that every test id is pytest's own: parametrized ids, classes, and any override of
``vcr_cassette_dir`` or ``default_cassette_name`` are what pytest-recording would have used.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TextIO

from pytest_toolnexus._store.cassette import Cassette

from .import_vcr import VcrImportError, load_vcr_cassette
from .migrate_plan import Conversion, Plan, Probe, plan, read_probe
from .migrate_probe import PROBE_ENV
from .migrate_source import Finding, Rewrite, rewrite_source

__all__ = ["migrate"]

_SKIP_DIRS: Final = frozenset(
    {"__pycache__", "node_modules", "venv", "site-packages", "build", "dist"}
)
_INI_FILES: Final = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
_REQUIREMENT_FILES: Final = re.compile(
    r"(requirements[^/]*\.(txt|in)|pyproject\.toml|setup\.cfg|setup\.py|tox\.ini|Pipfile)$"
)
_PACKAGES: Final = re.compile(r"(?<![\w-])(pytest-recording|pytest_recording|vcrpy)(?![\w-])")
_CLI_OPTIONS: Final = {
    "--record-mode": "use --cassette-record (none, once, new, all; new_episodes is new)",
    "--block-network": "drop it: a replay-only cassette blocks the network by itself",
    "--allowed-hosts": "use --cassette-allow-hosts (host names, not regular expressions)",
    "--disable-recording": "drop it; -p no:toolnexus turns pytest-toolnexus off",
}
_ROOT_CONFIG: Final = '''

@pytest.fixture
def cassette_config():
    """Cassette options for every test below; written by pytest-toolnexus migrate."""
    # vcrpy matched on method, scheme, host, port, path and query, never on the body.
    return {"match_on": "vcrpy"}
'''


class MigrateError(Exception):
    """The suite cannot be migrated as it stands (exit code 2)."""


@dataclass
class _Outcome:
    rewrites: dict[Path, tuple[str, Rewrite]] = field(default_factory=dict)
    created: dict[Path, str] = field(default_factory=dict)
    cassettes: list[tuple[Conversion, Cassette | None, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    plan: Plan = field(default_factory=Plan)


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
    files: Sequence[Path], probe: Probe, the_plan: Plan, outcome: _Outcome
) -> set[tuple[Path, str]]:
    """Rewrite every file; returns the (file, test) names that could not be placed."""
    outcome.rewrites.clear()
    unplaced: set[tuple[Path, str]] = set()
    for file in files:
        text = file.read_bytes().decode("utf-8")
        if not _mentions_recording(text):
            continue
        names = the_plan.names.get(file, {})
        try:
            rewrite = rewrite_source(text, names)
        except SyntaxError as exc:
            outcome.errors.append(f"{file}:{exc.lineno}: cannot be parsed: {exc.msg}")
            continue
        unplaced.update((file, q) for q in names if q not in rewrite.placed)
        if rewrite.text != text or rewrite.findings:
            outcome.rewrites[file] = (text, rewrite)
    return unplaced


def _root_conftest(probe: Probe, the_plan: Plan, outcome: _Outcome) -> None:
    """Give the rootdir conftest.py a cassette_config with vcrpy's matching, unless it has one."""
    if not any(t.marked for t in probe.tests):
        return
    conftest = probe.rootdir / "conftest.py"
    if conftest in outcome.rewrites:
        old, rewrite = outcome.rewrites[conftest]
        if rewrite.defines_cassette_config:
            return
        text = rewrite.text
    elif conftest.exists():
        old = text = conftest.read_bytes().decode("utf-8")
        if any(
            isinstance(n, ast.FunctionDef) and n.name == "cassette_config"
            for n in ast.walk(ast.parse(text))
        ):
            return
        rewrite = Rewrite(text)
    else:
        outcome.created[conftest] = "import pytest\n" + _ROOT_CONFIG
        return
    if not re.search(r"^import pytest\b", text, re.MULTILINE):
        text = "import pytest\n" + ("\n" if not text.startswith("import") else "") + text
    rewrite.text = text.rstrip("\n") + "\n" + _ROOT_CONFIG
    rewrite.findings.append(
        Finding(1, 'cassette_config added with "match_on": "vcrpy" (vcrpy never matched bodies)')
    )
    outcome.rewrites[conftest] = (old, rewrite)


def _convert(conversion: Conversion, allow_secrets: Sequence[str]) -> Cassette:
    parts = [
        load_vcr_cassette(source, conversion.target, allow_secrets=allow_secrets)[0]
        for source in conversion.sources
    ]
    meta = dict(parts[0].meta)
    if len(parts) > 1:
        meta["imported_from"] = "; ".join(str(p.meta.get("imported_from")) for p in parts)
    interactions = [i for part in parts for i in part.interactions]
    return Cassette(conversion.target, interactions, meta)


def _cassettes(the_plan: Plan, force: bool, allow: Sequence[str], outcome: _Outcome) -> None:
    for conversion in the_plan.conversions:
        try:
            cassette = _convert(conversion, allow)
        except VcrImportError as exc:
            outcome.errors.append(str(exc))
            continue
        target = conversion.target
        if target.exists():
            if target.read_bytes() == cassette.to_bytes():
                outcome.cassettes.append((conversion, None, "unchanged"))
                continue
            if not force:
                outcome.cassettes.append((conversion, None, "exists, differs; --force"))
                continue
        outcome.cassettes.append((conversion, cassette, "write"))


def _shown(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _diff(old: str, new: str, shown: str, created: bool = False) -> list[str]:
    return list(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            "/dev/null" if created else f"a/{shown}",
            f"b/{shown}",
        )
    )


def _config_mentions(root: Path, scan: Path) -> tuple[list[str], list[str]]:
    """pytest-recording options in ini files, and requirement lines naming it or vcrpy."""
    options: list[str] = []
    requirements: list[str] = []
    folders = {root, scan if scan.is_dir() else scan.parent}
    seen: set[Path] = set()
    for folder in sorted(folders):
        for file in sorted(folder.iterdir()) if folder.is_dir() else []:
            if file in seen or not file.is_file():
                continue
            seen.add(file)
            is_ini = file.name in _INI_FILES
            is_requirements = bool(_REQUIREMENT_FILES.search(file.name))
            if not (is_ini or is_requirements):
                continue
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            for number, line in enumerate(lines, 1):
                where = f"{_shown(file, root)}:{number}"
                if is_ini:
                    for option, fix in _CLI_OPTIONS.items():
                        if option in line:
                            options.append(f"{where}: {option}: {fix}")
                if is_requirements and _PACKAGES.search(line):
                    requirements.append(f"{where}: {line.strip()}")
    return options, requirements


def _report(
    outcome: _Outcome, probe: Probe, scan: Path, write: bool, out: TextIO
) -> tuple[int, bool]:
    """Print the report; returns the number of untranslated items and whether anything
    changes."""
    root = probe.rootdir
    changes = bool(outcome.created) or any(
        rewrite.text != old for old, rewrite in outcome.rewrites.values()
    )
    writes = [c for c in outcome.cassettes if c[2] == "write"]
    changes = changes or bool(writes)
    untranslated: list[str] = []
    notes: list[str] = []
    for file, (_, rewrite) in sorted(outcome.rewrites.items()):
        for finding in rewrite.findings:
            line = f"{_shown(file, root)}:{finding.line}: {finding.text}"
            (untranslated if finding.untranslated else notes).append(line)
    options, requirements = _config_mentions(root, scan)
    untranslated.extend(options)
    untranslated.extend(outcome.plan.problems)
    mode = "" if write else " (dry run: nothing written; --write applies it)"
    print(f"pytest-toolnexus migrate {_shown(scan, root) or '.'}{mode}", file=out)
    if outcome.cassettes or outcome.plan.unrecorded:
        print("\ncassettes:", file=out)
    verb = "wrote" if write else "would write"
    for conversion, cassette, state in outcome.cassettes:
        sources = " + ".join(_shown(s, root) for s in conversion.sources)
        target = _shown(conversion.target, root)
        if state == "write":
            assert cassette is not None
            count = len(cassette.interactions)
            print(f"  {verb} {target} ({count} interaction(s)) from {sources}", file=out)
        elif state == "unchanged":
            print(f"  unchanged {target} (already converted from {sources})", file=out)
        else:
            print(
                f"  skipped {target}: it exists and differs from {sources}; pass --force to "
                "overwrite it",
                file=out,
            )
    for nodeid in outcome.plan.unrecorded:
        print(f"  no vcrpy cassette for {nodeid}: nothing to convert", file=out)
    if outcome.rewrites or outcome.created:
        print("\nsources:", file=out)
        for file in sorted(outcome.created):
            print(f"  {'created' if write else 'would create'} {_shown(file, root)}", file=out)
        for file, (old, rewrite) in sorted(outcome.rewrites.items()):
            if rewrite.text != old:
                state = "rewrote" if write else "would rewrite"
                print(
                    f"  {state} {_shown(file, root)} ({rewrite.markers} marker(s), "
                    f"{rewrite.fixtures} fixture(s))",
                    file=out,
                )
    if notes:
        print("\ntranslated:", file=out)
        for line in notes:
            print(f"  {line}", file=out)
    if untranslated:
        print(f"\nuntranslated ({len(untranslated)}): change these by hand", file=out)
        for line in untranslated:
            print(f"  {line}", file=out)
    if not changes:
        print(
            "\nnothing to change: no pytest-recording marker, fixture or cassette is left "
            "to migrate",
            file=out,
        )
    if changes:
        print(
            "\nmatching: vcrpy matched method, scheme, host, port, path and query, never the "
            'body; "match_on": "vcrpy" in cassette_config keeps that. Drop it to match '
            "bodies too (the pytest-toolnexus default) once the cassettes are re-recorded.",
            file=out,
        )
    print(
        "\nafterwards: pytest-recording was left installed. Run the suite with "
        "-p no:recording to check it, then: pip uninstall pytest-recording vcrpy. The "
        "converted .yaml cassettes were kept; delete them when the suite passes.",
        file=out,
    )
    for line in requirements:
        print(f"  remove from requirements: {line}", file=out)
    return len(untranslated), changes


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
    """Run ``migrate``; returns the exit code: 0 done (or would be done), 1 a cassette or
    source could not be converted (nothing written), 2 the suite cannot be collected."""
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
    outcome = _Outcome()
    outcome.plan = plan(probe)
    unplaced = _rewrite_all(files, probe, outcome.plan, outcome)
    if unplaced:
        # A name the rewrite could not put on a marker (a marker outside a decorator): those
        # tests keep their own default cassette instead.
        outcome.plan = plan(probe, unnamed=sorted(unplaced))
        _rewrite_all(files, probe, outcome.plan, outcome)
    _root_conftest(probe, outcome.plan, outcome)
    _cassettes(outcome.plan, force, allow_secrets, outcome)
    root = probe.rootdir
    for file, text in sorted(outcome.created.items()):
        out.writelines(_diff("", text, _shown(file, root), created=True))
    for file, (old, rewrite) in sorted(outcome.rewrites.items()):
        out.writelines(_diff(old, rewrite.text, _shown(file, root)))
    _report(outcome, probe, scan, write, out)
    if outcome.errors:
        for error in outcome.errors:
            print(f"error: {error}", file=err)
        print(
            "error: nothing was written; fix the files above (or pass --allow-secret VALUE for "
            "a known fake value) and run migrate again",
            file=err,
        )
        return 1
    if write:
        for _, cassette, state in outcome.cassettes:
            if state == "write" and cassette is not None:
                cassette.save(allow_secrets=allow_secrets)
        for file, text in outcome.created.items():
            file.write_text(text, encoding="utf-8", newline="")
        for file, (old, rewrite) in outcome.rewrites.items():
            if rewrite.text != old:
                file.write_text(rewrite.text, encoding="utf-8", newline="")
    return 0
