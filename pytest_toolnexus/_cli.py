"""The ``pytest-toolnexus`` command line: ``check`` a folder of cassettes, ``show`` one."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from ._cassette import (
    Body,
    BytesBody,
    ChunksBody,
    EmptyBody,
    JsonBody,
    NdjsonBody,
    SseBody,
    TextBody,
    load_cassette,
)
from ._errors import CassetteError
from ._secrets import SecretScanner
from ._version import __version__

__all__ = ["main"]

_PREVIEW = 100
_BAR = 40


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pytest-toolnexus",
        description="Inspect and check pytest-toolnexus cassettes.",
    )
    parser.add_argument("--version", action="version", version=f"pytest-toolnexus {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    check = commands.add_parser(
        "check",
        help="check that cassettes load, are valid, and hold no secrets",
        description="Check every *.msgpack cassette under each PATH: it must load, every "
        "stream must be well formed, and no string in it may look like a secret or equal "
        "the value of a credential-like environment variable. Exits 1 on any problem.",
    )
    check.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    check.add_argument(
        "--allow-secret",
        action="append",
        default=[],
        metavar="VALUE",
        help="a known fake value that is not a secret (repeatable)",
    )
    show = commands.add_parser(
        "show",
        help="print a cassette as text, with a timeline of stream arrivals",
        description="Print a cassette as text. Suitable as a git textconv driver.",
    )
    show.add_argument("path", type=Path)
    return parser


def _cassettes(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(path.rglob("*.msgpack"))
        else:
            yield path


def _check(paths: Sequence[Path], allow: Sequence[str], out: TextIO) -> int:
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
        hits = scanner.scan(cassette.interactions)
        if hits:
            problems += 1
            print(f"FAIL {path}: {len(hits)} secret(s)", file=out)
            for hit in hits:
                print(f"  - {hit}", file=out)
            continue
        print(f"ok   {path} ({len(cassette.interactions)} interactions)", file=out)
    if checked == 0:
        print("no cassettes found", file=out)
        return 1
    print(f"{checked} cassette(s) checked, {problems} with problems", file=out)
    return 1 if problems else 0


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 3] + "..."


def _body_lines(body: Body, t_end: float) -> Iterator[str]:
    if isinstance(body, EmptyBody):
        yield "  (no body)"
    elif isinstance(body, JsonBody):
        yield from ("  " + line for line in json.dumps(body.value, indent=2).splitlines())
    elif isinstance(body, TextBody):
        yield from ("  " + line for line in body.text.splitlines())
    elif isinstance(body, BytesBody):
        yield f"  ({len(body.data)} bytes of binary)"
    elif isinstance(body, SseBody | NdjsonBody | ChunksBody):
        rows: list[tuple[float, str]] = []
        if isinstance(body, SseBody):
            for event in body.events:
                label = f"{event.get('event') or 'message'}: " if event.get("event") else ""
                payload = event.get("data", event.get("text", ""))
                rows.append((float(event.get("t", 0.0)), label + _short(payload)))
        elif isinstance(body, NdjsonBody):
            for line in body.lines:
                rows.append(
                    (float(line.get("t", 0.0)), _short(line.get("value", line.get("text"))))
                )
        else:
            for chunk in body.chunks:
                rows.append((float(chunk.get("t", 0.0)), f"{len(chunk.get('data', b''))} bytes"))
        span = max(t_end, max((t for t, _ in rows), default=0.0), 1.0)
        yield f"  {len(rows)} {body.kind} piece(s) over {span:.1f} ms"
        for t, text in rows:
            at = int(t / span * _BAR)
            bar = "." * at + "|" + " " * (_BAR - at)
            yield f"  {t:9.1f} ms {bar} {text}"


def _show(path: Path, out: TextIO) -> int:
    try:
        cassette = load_cassette(path)
    except CassetteError as exc:
        print(f"error: {exc}", file=out)
        return 1
    print(f"cassette {path} (format version 1)", file=out)
    for key, value in sorted(cassette.meta.items()):
        print(f"  {key}: {value}", file=out)
    for number, interaction in enumerate(cassette.interactions):
        request = interaction.request
        print(f"\n#{number} {request.method} {request.url}", file=out)
        for name, value in request.headers.multi_items():
            print(f"  {name}: {value}", file=out)
        for line in _body_lines(request.body, 0.0):
            print(line, file=out)
        if interaction.error is not None:
            error = interaction.error
            print(f"-> {error.kind} at {error.t:.1f} ms: {error.message}", file=out)
            continue
        response = interaction.response
        assert response is not None
        state = "" if response.complete else ", closed early by the client"
        print(
            f"-> {response.status} (headers at {response.t_headers:.1f} ms, "
            f"end at {response.t_end:.1f} ms{state})",
            file=out,
        )
        for name, value in response.headers.multi_items():
            print(f"  {name}: {value}", file=out)
        try:
            for line in _body_lines(response.body, response.t_end):
                print(line, file=out)
        except (TypeError, ValueError, AttributeError) as exc:
            print(f"  (body cannot be shown: {exc})", file=out)
        if response.error is not None:
            error = response.error
            print(f"  !! {error.kind} at {error.t:.1f} ms: {error.message}", file=out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    args = _parser().parse_args(argv)
    if args.command == "check":
        return _check(args.paths, args.allow_secret, sys.stdout)
    if args.command == "show":
        return _show(args.path, sys.stdout)
    print(f"pytest-toolnexus {__version__}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
