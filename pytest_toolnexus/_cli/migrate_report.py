"""What ``migrate`` found and prints: the outcome of one run, its unified diffs, the report, and
the tests a cassette that cannot be converted keeps on pytest-recording, with the command that
unblocks them."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Final, TextIO

from pytest_toolnexus._store.cassette import Cassette

from .migrate_plan import Conversion, Plan, Probe
from .migrate_source import Rewrite

__all__ = ["Blocked", "Outcome", "print_blocked", "print_diffs", "report", "shown"]

_INI_FILES: Final = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
_REQUIREMENT_FILES: Final = re.compile(
    r"(requirements[^/]*\.(txt|in)|pyproject\.toml|setup\.cfg|setup\.py|tox\.ini|Pipfile)$"
)
_PACKAGES: Final = re.compile(r"(?<![\w-])(pytest-recording|pytest_recording|vcrpy)(?![\w-])")
_COMMENT: Final = re.compile(r"(?:^|\s)[#;]")
_CLI_OPTIONS: Final = {
    "--record-mode": "use --cassette-record (none, once, new, all; new_episodes is new)",
    "--block-network": "drop it: a replay-only cassette blocks the network by itself",
    "--allowed-hosts": "use --cassette-allow-hosts (host names, not regular expressions)",
    "--disable-recording": "drop it; -p no:toolnexus turns pytest-toolnexus off",
}
_DISTRIBUTIONS: Final = ("pytest-recording", "vcrpy")


@dataclass(frozen=True, slots=True)
class Blocked:
    """A vcrpy cassette that cannot be converted, and the tests it keeps on pytest-recording."""

    source: Path
    reasons: tuple[str, ...]
    secret: bool
    tests: tuple[str, ...]


@dataclass
class Outcome:
    rewrites: dict[Path, tuple[str, Rewrite]] = field(default_factory=dict)
    created: dict[Path, str] = field(default_factory=dict)
    cassettes: list[tuple[Conversion, Cassette | None, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    plan: Plan = field(default_factory=Plan)
    blocked: list[Blocked] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Report lines of the run itself (not of one file's rewrite)."""


def shown(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _diff(old: str, new: str, name: str, created: bool = False) -> list[str]:
    return list(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            "/dev/null" if created else f"a/{name}",
            f"b/{name}",
        )
    )


def print_diffs(outcome: Outcome, root: Path, out: TextIO) -> None:
    """The unified diff of every file created or rewritten."""
    for file, text in sorted(outcome.created.items()):
        out.writelines(_diff("", text, shown(file, root), created=True))
    for file, (old, rewrite) in sorted(outcome.rewrites.items()):
        out.writelines(_diff(old, rewrite.text, shown(file, root)))


def _requirement(line: str) -> str:
    """A requirement or config line without its comment (``#``, or ``;`` in an ini file)."""
    return _COMMENT.split(line, maxsplit=1)[0].strip()


def _config_mentions(root: Path, scan: Path) -> tuple[list[str], list[str]]:
    """pytest-recording options in ini files, and requirement lines naming it or vcrpy (a
    comment that merely mentions them is not one)."""
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
                where = f"{shown(file, root)}:{number}"
                content = _requirement(line)
                if is_ini:
                    for option, fix in _CLI_OPTIONS.items():
                        if option in content:
                            options.append(f"{where}: {option}: {fix}")
                if is_requirements and _PACKAGES.search(content):
                    requirements.append(f"{where}: {content}")
    return options, requirements


def _installed() -> list[str]:
    """Which of pytest-recording and vcrpy this environment has installed."""
    found = []
    for name in _DISTRIBUTIONS:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


def _print_cassettes(outcome: Outcome, root: Path, write: bool, out: TextIO) -> None:
    if not (outcome.cassettes or outcome.plan.unrecorded):
        return
    print("\ncassettes:", file=out)
    verb = "wrote" if write else "would write"
    for conversion, cassette, state in outcome.cassettes:
        sources = " + ".join(shown(s, root) for s in conversion.sources)
        target = shown(conversion.target, root)
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


def _print_sources(outcome: Outcome, root: Path, write: bool, out: TextIO) -> None:
    if not (outcome.rewrites or outcome.created):
        return
    print("\nsources:", file=out)
    for file in sorted(outcome.created):
        print(f"  {'created' if write else 'would create'} {shown(file, root)}", file=out)
    for file, (old, rewrite) in sorted(outcome.rewrites.items()):
        if rewrite.text != old:
            state = "rewrote" if write else "would rewrite"
            print(
                f"  {state} {shown(file, root)} ({rewrite.markers} marker(s), "
                f"{rewrite.fixtures} fixture(s))",
                file=out,
            )


def _print_blocked_section(outcome: Outcome, root: Path, out: TextIO) -> None:
    if not outcome.blocked:
        return
    tests = sum(len(b.tests) for b in outcome.blocked)
    print(
        f"\nblocked ({len(outcome.blocked)} cassette(s), {tests} test(s)): these tests stay "
        "on @pytest.mark.vcr until their cassette converts",
        file=out,
    )
    for blocked in outcome.blocked:
        what = "would still hold a secret after redaction" if blocked.secret else "cannot be read"
        print(f"  {shown(blocked.source, root)} {what}:", file=out)
        for reason in blocked.reasons:
            print(f"    - {reason}", file=out)
        for nodeid in blocked.tests:
            print(f"    {nodeid}", file=out)


def report(
    outcome: Outcome, probe: Probe, scan: Path, write: bool, out: TextIO
) -> tuple[int, bool]:
    """Print the report; returns the number of untranslated items and whether anything
    changes."""
    root = probe.rootdir
    changes = bool(outcome.created) or any(
        rewrite.text != old for old, rewrite in outcome.rewrites.values()
    )
    changes = changes or any(c[2] == "write" for c in outcome.cassettes)
    untranslated: list[str] = []
    notes: list[str] = list(outcome.notes)
    for file, (_, rewrite) in sorted(outcome.rewrites.items()):
        for finding in rewrite.findings:
            line = f"{shown(file, root)}:{finding.line}: {finding.text}"
            (untranslated if finding.untranslated else notes).append(line)
    options, requirements = _config_mentions(root, scan)
    untranslated.extend(options)
    untranslated.extend(outcome.plan.problems)
    mode = "" if write else " (dry run: nothing written; --write applies it)"
    print(f"pytest-toolnexus migrate {shown(scan, root) or '.'}{mode}", file=out)
    _print_cassettes(outcome, root, write, out)
    _print_sources(outcome, root, write, out)
    _print_blocked_section(outcome, root, out)
    if notes:
        print("\ntranslated:", file=out)
        for line in notes:
            print(f"  {line}", file=out)
    if untranslated:
        print(f"\nuntranslated ({len(untranslated)}): change these by hand", file=out)
        for line in untranslated:
            print(f"  {line}", file=out)
    if not changes and not outcome.blocked:
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
    _print_afterwards(outcome, requirements, out)
    return len(untranslated), changes


def _print_afterwards(outcome: Outcome, requirements: list[str], out: TextIO) -> None:
    installed = _installed()
    lines: list[str] = []
    if installed and outcome.blocked:
        lines.append(
            f"{' and '.join(installed)} {'is' if len(installed) == 1 else 'are'} still "
            "installed, and the blocked tests need pytest-recording until they are migrated."
        )
    elif installed:
        lines.append(
            f"{' and '.join(installed)} {'is' if len(installed) == 1 else 'are'} still "
            "installed. Run the suite with -p no:recording to check it, then: pip uninstall "
            f"{' '.join(installed)}."
        )
    if any(c[0].sources for c in outcome.cassettes):
        lines.append("The converted .yaml cassettes were kept; delete them when the suite passes.")
    if requirements:
        lines.append("These requirement lines still name pytest-recording or vcrpy:")
    if lines:
        print(f"\nafterwards: {' '.join(lines)}", file=out)
    for line in requirements:
        print(f"  remove from requirements: {line}", file=out)


def print_blocked(outcome: Outcome, root: Path, command: str, write: bool, err: TextIO) -> None:
    """The error lines for the blocked tests: how many, why, and the command that unblocks
    them."""
    tests = sum(len(b.tests) for b in outcome.blocked)
    kept = "stay" if write else "would stay"
    again = f"{command} --write" if write else command
    sources = ", ".join(shown(b.source, root) for b in outcome.blocked)
    print(
        f"error: {tests} test(s) {kept} on @pytest.mark.vcr, because {len(outcome.blocked)} "
        f"vcrpy cassette(s) cannot be converted: {sources} (the report above lists the tests "
        "and why); everything else " + ("was migrated." if write else "would be migrated."),
        file=err,
    )
    if any(b.secret for b in outcome.blocked):
        print(
            "error: to unblock a cassette that would hold a secret, remove the value from the "
            f"vcrpy file and run `{again}` again; or, if it is a known fake value, run "
            f"`{again} --allow-secret VALUE`.",
            file=err,
        )
    if not all(b.secret for b in outcome.blocked):
        print(
            "error: to unblock a cassette that cannot be read, fix the interaction the report "
            f"names in the vcrpy file and run `{again}` again.",
            file=err,
        )
