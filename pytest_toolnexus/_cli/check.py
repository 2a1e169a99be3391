"""``pytest-toolnexus check``: every cassette under the given paths must load, validate, hold
no secret, and have provider answers that their provider's view can read."""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from pytest_toolnexus._answers.views import ViewError, dialect_of, stream_errors, view
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._seam.errors import CassetteError
from pytest_toolnexus._store.cassette import Interaction, WebSocketBody, check_bodies
from pytest_toolnexus._store.place import link_message, link_out, project_root
from pytest_toolnexus._store.streamed import StreamedCassette, read_streamed

__all__ = ["check"]


def _cassettes(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if os.path.isdir(path):  # False, not an error, for a name no file can have
            yield from _under(path)
        else:
            yield path


def _under(top: Path) -> list[Path]:
    """Every ``*.msgpack`` under ``top``, sorted. A symlinked folder is entered (a shared
    cassette store linked into the cassette folder is checked like the rest), and each real
    folder once, so a link loop ends."""
    found: list[Path] = []
    seen: set[str] = set()
    for folder, folders, files in os.walk(top, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            folders.clear()
            continue
        seen.add(real)
        found += (Path(folder, name) for name in fnmatch.filter([*folders, *files], "*.msgpack"))
    return sorted(found)


def _say_link_out(path: Path, err: TextIO) -> None:
    """Say, on ``err``, when ``path`` leads out of the current project through a symlink."""
    found = link_out(path, project_root())
    if found is not None:
        print(f"warning: {link_message(found, records=False, shown=str(path))}", file=err)


def check(
    paths: Sequence[Path], allow: Sequence[str], out: TextIO, err: TextIO | None = None
) -> int:
    """Check every cassette under ``paths``, printing a line for each on ``out`` (and a
    warning on ``err`` for each that leads out of the project through a symlink); returns
    the exit code."""
    scanner = SecretScanner(allow=allow)
    checked = problems = 0
    for path in _cassettes(paths):
        checked += 1
        _say_link_out(path, sys.stderr if err is None else err)
        if not _check_one(path, scanner, out):
            problems += 1
    if checked == 0:
        print("no cassettes found", file=out)
        return 1
    print(f"{checked} cassette(s) checked, {problems} with problems", file=out)
    return 1 if problems else 0


def _check_one(path: Path, scanner: SecretScanner, out: TextIO) -> bool:
    """Check one file, reading its interactions one at a time (so the memory it takes follows
    its largest interaction, not its size), and say what was found; False on a problem.

    Damage is reported before secrets, and secrets before unreadable answers, whichever
    interaction comes first: each one is validated, scanned and read as it is reached, and
    the report is made at the end."""
    unreadable: list[str] = []
    notes: list[str] = []

    def validated(streamed: StreamedCassette) -> Iterator[Interaction]:
        for number, interaction in enumerate(streamed):
            interaction.request  # noqa: B018  (reading each part decodes it, raising on damage)
            interaction.response  # noqa: B018
            interaction.error  # noqa: B018
            check_bodies(interaction, path, number)
            _read_answer(number, interaction, unreadable, notes)
            yield interaction

    try:
        streamed = read_streamed(path)
        try:
            hits = scanner.scan_cassette(streamed.meta, validated(streamed))
        finally:
            streamed.close()
    except CassetteError as exc:
        print(f"FAIL {path}: {exc}", file=out)
        return False
    if hits:
        print(f"FAIL {path}: {len(hits)} secret(s)", file=out)
        for hit in hits:
            print(f"  - {hit}", file=out)
        return False
    if unreadable:
        print(f"FAIL {path}: {len(unreadable)} provider answer(s) do not parse", file=out)
        for line in unreadable:
            print(f"  - {line}", file=out)
        return False
    count = streamed.count
    print(f"ok   {path} ({count} interaction{'' if count == 1 else 's'})", file=out)
    for line in notes:
        print(f"  info: {line}", file=out)
    return True


def _read_answer(
    number: int, interaction: Interaction, problems: list[str], notes: list[str]
) -> None:
    """A successful answer from a known provider's API (a realtime API's WebSocket session
    among them) that its provider view cannot read goes to ``problems``; an answer that
    reports an error inside a 2xx (an ``event: error`` in a stream, a Responses
    ``response.failed``) to ``notes``: a test may record one on purpose, so it is
    information, not a failure."""
    response = interaction.response
    if response is None:
        return
    if not (200 <= response.status < 300 or isinstance(response.body, WebSocketBody)):
        return
    dialect = dialect_of(interaction)
    if dialect is None:
        return
    errors = stream_errors(interaction)
    if errors:
        said = "; ".join(errors[:3])
        notes.append(
            f"interaction #{number} ({dialect.name}) carries an error in its answer: {said}"
        )
        return
    try:
        view(interaction)
    except ViewError as exc:
        problems.append(f"interaction #{number} ({dialect.name}): {exc}")
