"""``pytest-toolnexus check``: every cassette under the given paths must load, validate, hold
no secret, and have provider answers that their provider's view can read."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from pytest_toolnexus._answers.views import ViewError, dialect_of, stream_errors, view
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._seam.errors import CassetteError
from pytest_toolnexus._store.cassette import Cassette, load_cassette

__all__ = ["check"]


def _cassettes(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(path.rglob("*.msgpack"))
        else:
            yield path


def check(paths: Sequence[Path], allow: Sequence[str], out: TextIO) -> int:
    scanner = SecretScanner(allow=allow)
    checked = problems = 0
    for path in _cassettes(paths):
        checked += 1
        try:
            cassette = load_cassette(path, validate=True)
        except CassetteError as exc:
            problems += 1
            print(f"FAIL {path}: {exc}", file=out)
            continue
        hits = scanner.scan_cassette(cassette.meta, cassette.interactions)
        if hits:
            problems += 1
            print(f"FAIL {path}: {len(hits)} secret(s)", file=out)
            for hit in hits:
                print(f"  - {hit}", file=out)
            continue
        unreadable, notes = _read_answers(cassette)
        if unreadable:
            problems += 1
            print(f"FAIL {path}: {len(unreadable)} provider answer(s) do not parse", file=out)
            for line in unreadable:
                print(f"  - {line}", file=out)
            continue
        count = len(cassette.interactions)
        print(f"ok   {path} ({count} interaction{'' if count == 1 else 's'})", file=out)
        for line in notes:
            print(f"  info: {line}", file=out)
    if checked == 0:
        print("no cassettes found", file=out)
        return 1
    print(f"{checked} cassette(s) checked, {problems} with problems", file=out)
    return 1 if problems else 0


def _read_answers(cassette: Cassette) -> tuple[list[str], list[str]]:
    """Successful answers from a known provider's API that its provider view cannot read,
    and notes on answers that report an error inside a 2xx (an ``event: error`` in a stream, a
    Responses ``response.failed``): a test may record one on purpose, so it is information,
    not a failure."""
    problems: list[str] = []
    notes: list[str] = []
    for number, interaction in enumerate(cassette.interactions):
        response = interaction.response
        if response is None or not 200 <= response.status < 300:
            continue
        dialect = dialect_of(interaction)
        if dialect is None:
            continue
        errors = stream_errors(interaction)
        if errors:
            said = "; ".join(errors[:3])
            notes.append(
                f"interaction #{number} ({dialect.name}) carries an error in its answer: {said}"
            )
            continue
        try:
            view(interaction)
        except ViewError as exc:
            problems.append(f"interaction #{number} ({dialect.name}): {exc}")
    return problems, notes
