"""The ``pytest-toolnexus`` command line: ``check`` a folder of cassettes, ``show`` one, ``diff``
two, ``import-vcr`` a vcrpy cassette, ``migrate`` a pytest-recording suite. docs/cli.md
describes each command.

This module holds the parser and the dispatch only. Each command's code lives in a module of
its own (``check``, ``show``, ``diff``, ``import_vcr``, ``migrate``), imported when the command
runs, so that ``--version`` and ``--help`` start in a few tens of milliseconds.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO

from pytest_toolnexus._version import __version__

if TYPE_CHECKING:
    from .import_vcr_fixture import AnsweredRequest

__all__ = ["PREVIEW", "main"]

PREVIEW: Final = 100
"""Characters of each stream row's text in ``show``, unless ``--width`` says otherwise (the
parser's default, which show.py is always given)."""

_SHOW_EXAMPLES: Final = """examples:
  pytest-toolnexus show cassettes/tests/test_chat/test_stream.msgpack
  pytest-toolnexus show --width 60 cassettes/tests/test_chat/test_stream.msgpack
  pytest-toolnexus show --json cassettes/tests/test_chat/test_stream.msgpack > timeline.json
  pytest-toolnexus show --html stream.html cassettes/tests/test_chat/test_stream.msgpack
  git config diff.toolnexus.textconv "pytest-toolnexus show --no-path"
"""

_DIFF_EXAMPLES: Final = """examples:
  pytest-toolnexus diff old.msgpack new.msgpack
  pytest-toolnexus diff --ignore-times -u old.msgpack new.msgpack
  git show HEAD:cassettes/tests/test_chat/test_reply.msgpack > /tmp/old.msgpack
  pytest-toolnexus diff /tmp/old.msgpack cassettes/tests/test_chat/test_reply.msgpack
"""


class _ExamplesFormatter(argparse.HelpFormatter):
    """Wraps the description as usual, and prints an ``examples:`` epilog line by line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


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
        epilog=_SHOW_EXAMPLES,
        formatter_class=_ExamplesFormatter,
    )
    show.add_argument(
        "path",
        type=Path,
        metavar="PATH",
        help="a .msgpack cassette (cassettes/<test file path>/<test name>.msgpack under the "
        "rootdir, for a test's own cassette)",
    )
    show.add_argument(
        "--width",
        type=_width,
        default=PREVIEW,
        metavar="N",
        help=f"characters of each stream row's text (default {PREVIEW})",
    )
    show.add_argument(
        "--no-path",
        action="store_true",
        help="leave the file's path out of the first line (for a git textconv driver, which "
        "hands over a temporary file for the old side)",
    )
    show.add_argument(
        "--json",
        action="store_true",
        help="print the timeline data (each interaction's recorded arrivals, headers, end and "
        "error) as JSON in the schema of docs/report.md, instead of the text",
    )
    show.add_argument(
        "--html",
        type=Path,
        default=None,
        metavar="OUT",
        help="write the cassette's timeline as a self-contained HTML page to OUT",
    )
    diff = commands.add_parser(
        "diff",
        help="compare two cassettes, interaction by interaction",
        description="Compare two cassettes: each request (method, URL, headers, body) and "
        "response (status, headers, body, stream events or WebSocket frames both ways, and "
        "their times). Interactions are "
        "paired by method and URL, in order. Exits 0 when they are equal, 1 when they differ, "
        "2 when a file cannot be read.",
        epilog=_DIFF_EXAMPLES,
        formatter_class=_ExamplesFormatter,
    )
    diff.add_argument("a", type=Path, metavar="A", help="the old cassette (.msgpack)")
    diff.add_argument(
        "b", type=Path, metavar="B", help="the new cassette (.msgpack), compared with A"
    )
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
        "left), 1 when some tests stay on @pytest.mark.vcr because their cassette cannot be "
        "converted (a secret would remain, say: everything else is migrated, and the error "
        "names the command that unblocks them), 2 when the suite cannot be collected. "
        "docs/migrating.md explains each translation.",
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
    _add_serve(commands)
    _add_record(commands)
    return parser


def _add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="replay cassettes over loopback HTTP to a client in any language",
        description="Serve the cassettes under each PATH (files or folders) on loopback HTTP, "
        "matched as in pytest. A client picks a cassette by a path prefix "
        "(BASE/c/<name>/v1/chat/completions) or the x-toolnexus-cassette header. Prints the "
        "base URL on one line; a control API answers under BASE/_toolnexus/. Stops cleanly on "
        "SIGINT or SIGTERM. docs/serve.md describes it.",
    )
    serve.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    serve.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="let --host be an address other machines reach (the control API loads any file)",
    )
    serve.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    serve.add_argument(
        "--timing",
        choices=("real", "instant"),
        default="real",
        help="real: each piece at its recorded offset (default); instant: all at once",
    )
    serve.add_argument(
        "--speed", type=_speed, default=1.0, metavar="X", help="divide recorded offsets by X"
    )
    serve.add_argument("--url-file", type=Path, metavar="F", help="also write the base URL to F")
    _add_tls(serve)
    serve.add_argument(
        "--report-file",
        type=Path,
        metavar="F",
        help="at shutdown, write what each cassette played, left unused and missed to F (JSON)",
    )
    serve.add_argument(
        "--allow-repeats", action="store_true", help="an interaction may play more than once"
    )
    serve.add_argument(
        "--match-on", default="default", metavar="PARTS", help="as the marker's match_on"
    )
    for option, what in (
        ("--ignore-body", "a body path to ignore"),
        ("--ignore-query", "a query parameter to ignore"),
        ("--ignore-header", "a header to ignore"),
        ("--match-header", "a header to compare"),
    ):
        serve.add_argument(option, action="append", default=[], metavar="NAME", help=what)


def _add_record(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    record = commands.add_parser(
        "record",
        help="a recording proxy: clients point their base URL at it, it writes a cassette",
        description="Forward every request to --upstream (with its path and query) and tee "
        "each answer back as it arrives, recording it as pytest does; on SIGINT or SIGTERM "
        "write the cassette to --out through the same redaction and secret scan, atomically. "
        "Prints its base URL on one line. docs/serve.md describes it.",
    )
    record.add_argument("--upstream", required=True, metavar="URL", help="where requests go")
    record.add_argument("--out", required=True, type=Path, metavar="PATH", help="the cassette")
    record.add_argument(
        "--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)"
    )
    record.add_argument(
        "--allow-remote",
        action="store_true",
        help="let --host be an address other machines reach (the control API loads any file)",
    )
    record.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    record.add_argument("--url-file", type=Path, metavar="F", help="also write the base URL to F")
    _add_tls(record)
    record.add_argument(
        "--allow-secret",
        action="append",
        default=[],
        metavar="VALUE",
        help="a known fake value that is not a secret (repeatable)",
    )


def _add_tls(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--tls-cert",
        type=Path,
        metavar="PEM",
        help="answer HTTPS and WSS with this certificate (chain), for clients that insist on "
        "TLS (google-genai's Live, the openai npm package's Realtime); needs --tls-key",
    )
    command.add_argument(
        "--tls-key", type=Path, metavar="PEM", help="the private key of --tls-cert"
    )


def _tls(args: argparse.Namespace) -> tuple[Path, Path] | None:
    """The certificate and key given, or None; exits 2 when only one of them is."""
    if args.tls_cert is None and args.tls_key is None:
        return None
    if args.tls_cert is None or args.tls_key is None:
        print("error: --tls-cert and --tls-key go together: give both", file=sys.stderr)
        raise SystemExit(2)
    return args.tls_cert, args.tls_key


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError("the speed must be a positive number")
    return value


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


def _diff(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from pytest_toolnexus._seam.errors import CassetteError
    from pytest_toolnexus._store.cassette import load_cassette

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


def _remote(host: str) -> str | None:
    """Why ``host`` is refused without ``--allow-remote`` (None for a loopback address): a
    server another machine reaches lets it load any file this user can read."""
    if host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host.strip("[]")).is_loopback:
            return None
    except ValueError:
        pass
    return (
        f"--host {host} is not a loopback address (127.0.0.1, ::1 or localhost): other "
        "machines could reach the server, whose control API (POST /_toolnexus/load) loads "
        "any file this user can read and whose answers are the cassettes. Listen on "
        "127.0.0.1, or pass --allow-remote to mean it (on a network you trust)."
    )


def _serve(args: argparse.Namespace) -> int:
    try:
        from pytest_toolnexus._serve.app import run
    except ImportError as exc:
        print(
            f"error: serve runs on aiohttp's web server, which cannot be imported ({exc}); "
            "install it with: pip install 'pytest-toolnexus[serve]'",
            file=sys.stderr,
        )
        return 2
    from pytest_toolnexus._serve.catalog import ServeOptions

    options = ServeOptions(
        timing=args.timing,
        speed=args.speed,
        allow_repeats=args.allow_repeats,
        match_on=args.match_on,
        ignore_body=tuple(args.ignore_body),
        ignore_query=tuple(args.ignore_query),
        ignore_headers=tuple(args.ignore_header),
        match_headers=tuple(args.match_header),
    )
    return run(
        args.paths,
        options,
        host=args.host,
        port=args.port,
        url_file=args.url_file,
        report_file=args.report_file,
        tls=_tls(args),
    )


def _record(args: argparse.Namespace) -> int:
    try:
        from pytest_toolnexus._serve.proxy import record
    except ImportError as exc:
        print(
            f"error: record runs on aiohttp's web server, which cannot be imported ({exc}); "
            "install it with: pip install 'pytest-toolnexus[serve]'",
            file=sys.stderr,
        )
        return 2
    return record(
        args.upstream,
        args.out,
        host=args.host,
        port=args.port,
        url_file=args.url_file,
        allow_secrets=args.allow_secret,
        tls=_tls(args),
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
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command in ("serve", "record") and not args.allow_remote:
        refused = _remote(args.host)
        if refused:
            parser.error(f"{args.command}: {refused}")
    # Each command imports what it needs when it runs: --help and --version import none of it.
    if args.command == "check":
        from .check import check

        return check(args.paths, args.allow_secret, sys.stdout, sys.stderr)
    if args.command == "show" and (args.json or args.html is not None):
        from .show_timeline import show_timeline

        return show_timeline(args.path, sys.stdout, sys.stderr, as_json=args.json, html=args.html)
    if args.command == "show":
        from .show import show

        return show(
            args.path, sys.stdout, with_path=not args.no_path, width=args.width, err=sys.stderr
        )
    if args.command == "diff":
        return _diff(args, sys.stdout, sys.stderr)
    if args.command == "import-vcr":
        return _import_vcr(args, sys.stdout, sys.stderr)
    if args.command == "serve":
        return _serve(args)
    if args.command == "record":
        return _record(args)
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
