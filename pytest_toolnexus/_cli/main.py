"""The ``pytest-toolnexus`` command line: ``check`` a folder of cassettes, ``show`` one, ``diff``
two, ``import-vcr`` a vcrpy cassette, ``migrate`` a pytest-recording suite. docs/cli.md
describes each command.

Why one module of over 400 lines: the parser and the runner of each command sit together so
that ``--help`` and the code it describes are read in one place. ``diff``, ``import-vcr`` and
``migrate`` do their work in their own modules; ``show``'s row rendering is still here, and
is the part to move out first if this module grows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._seam.errors import CassetteError
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._store.cassette import (
    Body,
    BytesBody,
    Cassette,
    ChunksBody,
    EmptyBody,
    EventStreamBody,
    JsonBody,
    NdjsonBody,
    SseBody,
    TextBody,
    load_cassette,
)
from pytest_toolnexus._version import __version__

if TYPE_CHECKING:
    from .import_vcr_fixture import AnsweredRequest
from pytest_toolnexus._answers.views import ViewError, dialect_of, stream_errors, view

__all__ = ["main"]

_PREVIEW = 100
_BAR = 40


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pytest-toolnexus",
        description="Inspect, compare, check and import pytest-toolnexus cassettes.",
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
        description="Print a cassette as text: its metadata, then each interaction with its "
        "headers, body and timing. With --no-path, suitable as a git textconv driver.",
    )
    show.add_argument("path", type=Path)
    show.add_argument(
        "--width",
        type=_width,
        default=_PREVIEW,
        metavar="N",
        help=f"characters of each stream row's text (default {_PREVIEW})",
    )
    show.add_argument(
        "--no-path",
        action="store_true",
        help="leave the file's path out of the first line (for a git textconv driver, which "
        "hands over a temporary file for the old side)",
    )
    diff = commands.add_parser(
        "diff",
        help="compare two cassettes, interaction by interaction",
        description="Compare two cassettes: each request (method, URL, headers, body) and "
        "response (status, headers, body, stream events and their times). Interactions are "
        "paired by method and URL, in order. Exits 0 when they are equal, 1 when they differ, "
        "2 when a file cannot be read.",
    )
    diff.add_argument("a", type=Path, metavar="A")
    diff.add_argument("b", type=Path, metavar="B")
    diff.add_argument(
        "--time-tolerance",
        type=_milliseconds,
        default=50.0,
        metavar="MS",
        help="ignore time differences of at most MS milliseconds (default: 50)",
    )
    diff.add_argument("--ignore-times", action="store_true", help="ignore every time difference")
    diff.add_argument(
        "--ignore-header",
        action="append",
        default=[],
        metavar="NAME",
        help="leave this header out of the comparison, in requests and responses (repeatable)",
    )
    diff.add_argument(
        "--meta", action="store_true", help="compare the cassettes' metadata too (off by default)"
    )
    diff.add_argument(
        "-u",
        "--unified",
        action="store_true",
        help="show each changed interaction as a unified diff of its text form",
    )
    diff.add_argument(
        "-q", "--quiet", action="store_true", help="print nothing; only the exit code tells"
    )
    vcr = commands.add_parser(
        "import-vcr",
        help="convert vcrpy cassettes (YAML or JSON, plain or .gz) into msgpack cassettes",
        description="Convert vcrpy cassettes into format-1 msgpack cassettes. Reads vcrpy's "
        "YAML and JSON serializers, gzip-compressed files (.yaml.gz, .json.gz), Ruby VCR, "
        "and parsed bodies (parsed_body). Bodies are decoded (gzip, deflate, br, base64; "
        "gzip also when the header is gone), JSON parsed, event streams split into SSE "
        "events and NDJSON into lines (all at t = 0: vcrpy keeps no timing), credentials "
        "redacted as a recording redacts them. A field import-vcr does not understand is an "
        "error naming the file, the interaction and the field: nothing is ever dropped or "
        "imported as an empty body. Nothing is written for a file with an error or a "
        "remaining secret. A response-only fixture ({status, headers, body}, no request) is "
        "imported only with --request, as the answer to that request. With one SRC file: "
        "SRC [DEST]. With folders, several SRC, or "
        "--out: each cassette is converted on its own and reported, and the exit code is 1 "
        "if any failed. Exits 0 when everything was written, 1 when something was refused, "
        "2 when a single SRC cannot be read or nothing was found.",
    )
    vcr.add_argument(
        "paths",
        type=Path,
        nargs="+",
        metavar="SRC",
        help="a vcrpy cassette, or a folder searched for *.yaml, *.yml, *.json (and .gz); "
        "with a single SRC file, a second argument ending in .msgpack is its DEST",
    )
    vcr.add_argument(
        "--out",
        type=Path,
        metavar="OUTDIR",
        help="write every cassette under OUTDIR, at its path relative to the SRC folder "
        "(default: beside each source, with the suffix .msgpack)",
    )
    vcr.add_argument("--force", action="store_true", help="overwrite a cassette that exists")
    vcr.add_argument(
        "--allow-secret",
        action="append",
        default=[],
        metavar="VALUE",
        help="a known fake value that is not a secret (repeatable)",
    )
    vcr.add_argument(
        "--request",
        type=_answered_request,
        metavar='"METHOD URL"',
        help="the request each response-only fixture ({status, headers, body}) answers, "
        'e.g. "POST https://api.anthropic.com/v1/messages"; it is stored with an any '
        "body, which matches whatever body is sent (vcrpy cassettes ignore it)",
    )
    migrate = commands.add_parser(
        "migrate",
        help="move a pytest-recording suite to pytest-toolnexus (a dry run unless --write)",
        description="Convert every vcrpy cassette of the suite under PATH into the file "
        "pytest-toolnexus looks up for its test, and rewrite @pytest.mark.vcr, vcr_config, "
        "vcr_cassette_dir and the vcr fixture. Prints a unified diff and a report of what "
        "was translated and what was not (with file and line); --write applies it. The suite "
        "is collected with pytest to learn its test names. Exits 0 when done (or nothing is "
        "left), 1 when a cassette cannot be converted (nothing is written), 2 when the suite "
        "cannot be collected. docs/migrating.md explains each translation.",
    )
    migrate.add_argument("path", type=Path, metavar="PATH", help="the suite: its rootdir or tests")
    migrate.add_argument("--write", action="store_true", help="apply the changes")
    migrate.add_argument(
        "--force", action="store_true", help="overwrite converted cassettes that differ"
    )
    migrate.add_argument(
        "--allow-secret",
        action="append",
        default=[],
        metavar="VALUE",
        help="a known fake value that is not a secret (repeatable)",
    )
    migrate.add_argument(
        "--pytest-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra argument for the pytest run that collects the suite (repeatable)",
    )
    return parser


def _width(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 10:
        raise argparse.ArgumentTypeError("the width must be at least 10 characters")
    return value


def _milliseconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of milliseconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError("the time tolerance must be 0 or more milliseconds")
    return value


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
        print(f"ok   {path} ({len(cassette.interactions)} interactions)", file=out)
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


def _short(value: Any, width: int = _PREVIEW) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: max(width - 3, 1)] + "..."


def _leaves(value: Any) -> dict[str, Any]:
    """A JSON value's scalar leaves by dotted path (``choices.0.delta.content``)."""
    found: dict[str, Any] = {}
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict) and item:
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in item.items())
        elif isinstance(item, list) and item:
            stack.extend((f"{path}.{i}" if path else str(i), v) for i, v in enumerate(item))
        else:
            found[path] = item
    return dict(sorted(found.items()))


def _frame_name(frame: Any) -> str:
    """What an event stream frame is: its ``:event-type`` (or ``:exception-type``)."""
    for name, _, value in frame.get("headers", []):
        if name in (":event-type", ":exception-type"):
            return str(value)
    return "frame"


def _distinct(payloads: list[Any], width: int) -> list[str]:
    """One row of text per stream piece. JSON pieces show only the leaves that are not the
    same in every piece (an OpenAI chunk's ``id``, ``model`` and ``created`` repeat; its
    delta does not), so the rows tell the pieces apart."""
    flat = [_leaves(p) if isinstance(p, dict | list) else None for p in payloads]
    structured = [f for f in flat if f is not None]
    constant: set[str] = set()
    if len(structured) >= 2:
        first = structured[0]
        constant = {
            path
            for path, value in first.items()
            if all(path in other and other[path] == value for other in structured[1:])
        }
    rows = []
    for payload, leaves in zip(payloads, flat, strict=True):
        if leaves is None:
            rows.append(_short(payload, width))
            continue
        shown = ", ".join(
            f"{path}={json.dumps(value, ensure_ascii=False)}"
            for path, value in leaves.items()
            if path not in constant
        )
        rows.append(_short(shown or "(the same as every other piece)", width))
    return rows


def _body_lines(
    body: Body, t_end: float, headers: Headers | None = None, width: int = _PREVIEW
) -> Iterator[str]:
    if isinstance(body, EmptyBody):
        length = None if headers is None else headers.get("content-length")
        if length is None or length.strip() == "0":
            yield "  (no body)"
        else:
            yield f"  (none sent: a bodiless answer; content-length {length} is as recorded)"
    elif isinstance(body, JsonBody):
        text = json.dumps(body.value, indent=2, ensure_ascii=False)
        yield from ("  " + line for line in text.splitlines())
    elif isinstance(body, TextBody):
        yield from ("  " + line for line in body.text.splitlines())
    elif isinstance(body, BytesBody):
        yield f"  ({len(body.data)} bytes of binary)"
    elif isinstance(body, SseBody | NdjsonBody | ChunksBody | EventStreamBody):
        rows: list[tuple[float, str]] = []
        if isinstance(body, SseBody):
            labels = [f"{e['event']}: " if e.get("event") else "" for e in body.events]
            texts = _distinct([e.get("data", e.get("text", "")) for e in body.events], width)
            for event, label, text in zip(body.events, labels, texts, strict=True):
                rows.append((float(event.get("t", 0.0)), label + text))
        elif isinstance(body, NdjsonBody):
            texts = _distinct([line.get("value", line.get("text")) for line in body.lines], width)
            for line, text in zip(body.lines, texts, strict=True):
                rows.append((float(line.get("t", 0.0)), text))
        elif isinstance(body, EventStreamBody):
            labels = [f"{_frame_name(frame)}: " for frame in body.frames]
            payloads = [
                f.get("payload", f.get("text", f"{len(f.get('data', b''))} bytes"))
                for f in body.frames
            ]
            for frame, label, text in zip(
                body.frames, labels, _distinct(payloads, width), strict=True
            ):
                rows.append((float(frame.get("t", 0.0)), label + text))
        else:
            for chunk in body.chunks:
                rows.append((float(chunk.get("t", 0.0)), f"{len(chunk.get('data', b''))} bytes"))
        span = max(t_end, max((t for t, _ in rows), default=0.0), 1.0)
        yield f"  {len(rows)} {body.kind} piece(s) over {span:.1f} ms"
        for t, text in rows:
            at = int(t / span * _BAR)
            bar = "." * at + "|" + " " * (_BAR - at)
            yield f"  {t:9.1f} ms {bar} {text}"


class _Masked:
    """A text stream that masks every secret in what is written through it: ``show`` prints
    a cassette that may hold one (an old file, or one written before a hook redacted it)."""

    def __init__(self, out: TextIO, scanner: SecretScanner) -> None:
        self._out = out
        self._scanner = scanner

    def write(self, text: str) -> int:
        return self._out.write(self._scanner.mask(text))

    def flush(self) -> None:
        self._out.flush()


def _show(path: Path, stream: TextIO, *, with_path: bool = True, width: int = _PREVIEW) -> int:
    out: Any = _Masked(stream, SecretScanner())
    try:
        return _render(path, out, with_path=with_path, width=width)
    except RecursionError:
        # A body the loader accepts may be nested up to msgpack's limit, deeper than printing
        # can go; replay refuses such a body too.
        print(
            f"\nerror: cassette {path} holds a value nested deeper than Python's recursion "
            "limit, which cannot be shown (or replayed); restore the file from version control "
            "or record it again",
            file=out,
        )
        return 1


def _render(path: Path, out: TextIO, *, with_path: bool = True, width: int = _PREVIEW) -> int:
    try:
        cassette = load_cassette(path)
    except CassetteError as exc:
        print(f"error: {exc}", file=out)
        return 1
    print(
        f"cassette {path} (format version 1)" if with_path else "cassette (format version 1)",
        file=out,
    )
    for key, value in sorted(cassette.meta.items()):
        if key == "versions" and isinstance(value, dict):
            listed = ", ".join(f"{name} {version}" for name, version in sorted(value.items()))
            print(f"  recorded by: {listed or '(no client library recorded)'}", file=out)
            continue
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
            for line in _body_lines(response.body, response.t_end, response.headers, width):
                print(line, file=out)
        except (TypeError, ValueError, AttributeError) as exc:
            print(f"  (body cannot be shown: {exc})", file=out)
        if response.error is not None:
            error = response.error
            print(f"  !! {error.kind} at {error.t:.1f} ms: {error.message}", file=out)
    return 0


def _diff(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .diff import diff_cassettes, render

    cassettes = []
    for path in (args.a, args.b):
        try:
            cassettes.append(load_cassette(path, validate=True))
        except CassetteError as exc:
            print(f"error: {exc}", file=err)
            return 2
    result = diff_cassettes(
        cassettes[0],
        cassettes[1],
        tolerance=math.inf if args.ignore_times else args.time_tolerance,
        ignore_headers=args.ignore_header,
        include_meta=args.meta,
        a_name=str(args.a),
        b_name=str(args.b),
    )
    if not args.quiet:
        for line in render(result, unified=args.unified):
            print(line, file=out)
    return 0 if result.equal else 1


def _answered_request(text: str) -> AnsweredRequest:
    """``--request``'s value as the request a response-only fixture answers."""
    from .import_vcr_fixture import AnsweredRequest

    try:
        return AnsweredRequest.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _import_vcr(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .import_vcr import import_vcr
    from .import_vcr_batch import import_many

    paths: list[Path] = args.paths
    single = args.out is None and not paths[0].is_dir()
    one_file = single and (len(paths) == 1 or (len(paths) == 2 and paths[1].suffix == ".msgpack"))
    if one_file:
        return import_vcr(
            paths[0],
            paths[1] if len(paths) == 2 else None,
            force=args.force,
            allow_secrets=args.allow_secret,
            out=out,
            err=err,
            request=args.request,
        )
    if args.out is not None and any(path.suffix == ".msgpack" for path in paths):
        print("error: give either --out OUTDIR or one SRC with its DEST, not both", file=err)
        return 2
    return import_many(
        paths,
        args.out,
        force=args.force,
        allow_secrets=args.allow_secret,
        out=out,
        err=err,
        request=args.request,
    )


_BROKEN_PIPE = 141
"""The exit code of a command whose reader went away (``show FILE | head``): 128 + SIGPIPE,
as a shell reports a command that SIGPIPE ended."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    try:
        code = _run(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader closed the pipe (``| head``): stop quietly. Point stdout at /dev/null so
        # the interpreter's last flush at exit does not complain about the same pipe again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return _BROKEN_PIPE
    return code


def _run(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check":
        return _check(args.paths, args.allow_secret, sys.stdout)
    if args.command == "show":
        return _show(args.path, sys.stdout, with_path=not args.no_path, width=args.width)
    if args.command == "diff":
        return _diff(args, sys.stdout, sys.stderr)
    if args.command == "import-vcr":
        return _import_vcr(args, sys.stdout, sys.stderr)
    if args.command == "migrate":
        from .migrate import migrate

        return migrate(
            args.path,
            write=args.write,
            force=args.force,
            allow_secrets=args.allow_secret,
            pytest_args=args.pytest_arg,
            out=sys.stdout,
            err=sys.stderr,
        )
    print(f"pytest-toolnexus {__version__}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
