"""The ``cassette_server`` fixture: this test's cassette served by ``pytest-toolnexus serve``,
for code under test that runs in another process (a CLI, a worker, a client in another
language).

The server is a process of its own, not a thread of the test's: the test process may run on
the virtual clock, and a served stream must keep real time. The fixture reads the test's
options as the ``cassette`` fixture does (ini, ``cassette_config``, the marker, the command
line) and hands the server those it understands; at teardown it stops the server and fails
the test on a miss the code under test may have swallowed, and warns (or fails, as ``unused``
says) of interactions nothing played.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import pytest

from pytest_toolnexus._session.session import UnusedInteractionsWarning

from .item_options import options_of
from .serve import cassette_path
from .settings import CassetteOptions
from .shared import shown

__all__ = ["cassette_server"]

_START: Final = 30.0
"""Seconds the server may take to print its URL (a loaded machine imports slowly)."""


def _arguments(options: CassetteOptions) -> list[str]:
    """The ``serve`` options that say what the test's options say."""
    match_on = options.match_on
    arguments = [
        "--timing",
        "instant" if options.timing == "instant" else "real",
        "--speed",
        repr(options.speed),
        "--match-on",
        match_on if isinstance(match_on, str) else ",".join(match_on),
    ]
    if options.allow_repeats:
        arguments.append("--allow-repeats")
    for flag, values in (
        ("--ignore-body", options.ignore_body),
        ("--ignore-query", options.ignore_query),
        ("--ignore-header", options.ignore_headers),
        ("--match-header", options.match_headers),
    ):
        for value in values:
            arguments += [flag, value]
    return arguments


def cassette_server(
    request: pytest.FixtureRequest, cassette_config: Mapping[str, Any]
) -> Iterator[str]:
    """The fixture's body: start the server on the test's cassette, yield its base URL
    (``http://127.0.0.1:PORT/c/<name>``), then stop it and report."""
    item = request.node
    assert isinstance(item, pytest.Item)
    options, _ = options_of(item, cassette_config)
    path = cassette_path(item, options)
    where = shown(item.config, path)
    if options.faults:
        raise pytest.UsageError(
            f"{item.nodeid}: cassette_server cannot take faults from the marker or "
            "cassette_config; ask the server for them over its control API (POST "
            "/_toolnexus/faults, docs/serve.md)"
        )
    if not path.is_file():
        pytest.fail(
            f"cassette_server: the cassette {where} does not exist. The server replays only: "
            "record it first (a test with the cassette marker and --cassette-record=once, or "
            "pytest-toolnexus record), or name an existing one with @pytest.mark.cassette(NAME).",
            pytrace=False,
        )
    with tempfile.TemporaryDirectory(prefix="toolnexus-serve-") as scratch:
        report_file = Path(scratch) / "report.json"
        command = [
            sys.executable,
            "-m",
            "pytest_toolnexus",
            "serve",
            str(path),
            "--report-file",
            str(report_file),
            *_arguments(options),
        ]
        # The server's log goes to a file, read at teardown: a pipe nobody reads until then
        # fills (about 64 KB of miss messages) and blocks the server mid-answer.
        log_file = Path(scratch) / "serve.log"
        with log_file.open("w") as log:
            process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        try:
            base = _url_of(process, where, log_file)
            name = path.name.removesuffix(".msgpack")
            yield f"{base}/c/{name}"
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
            err = log_file.read_text(errors="replace")
            _report(item, options, report_file, where, process.returncode, err)


def _url_of(process: subprocess.Popen[str], where: str, log_file: Path) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], _START)
    line = process.stdout.readline() if ready else ""
    if not line.startswith("http"):
        process.kill()
        process.communicate()
        err = log_file.read_text(errors="replace")
        pytest.fail(f"cassette_server: serving {where} failed to start:\n{err}", pytrace=False)
    return line.strip()


def _report(
    item: pytest.Item,
    options: CassetteOptions,
    report_file: Path,
    where: str,
    code: int | None,
    err: str,
) -> None:
    if code != 0 or not report_file.is_file():
        pytest.fail(f"cassette_server: the server for {where} exited {code}:\n{err}", pytrace=False)
    report = json.loads(report_file.read_text())
    [served] = report["cassettes"]
    if served["misses"]:
        shown_misses = "\n\n".join(served["misses"][:3])
        pytest.fail(
            f"cassette_server: {len(served['misses'])} request(s) to {where} matched no "
            "recording (an HTTP request is answered 490; a WebSocket frame closes its "
            f"connection with 4490):\n\n{shown_misses}",
            pytrace=False,
        )
    # What the code under test left: interactions never played, and what WebSocket clients
    # left unsent or unread of the sessions they opened.
    left = list(served.get("websocket_leftovers", []))
    if served["unused"]:
        unused = "; ".join(served["unused"][:10])
        left.insert(
            0,
            f"{len(served['unused'])} recorded interaction(s) were never played through the "
            f"server: {unused}",
        )
    if left and options.unused != "ignore":
        message = f"cassette {where}: " + "; ".join(left)
        if options.unused == "fail":
            pytest.fail(message, pytrace=False)
        warnings.warn(UnusedInteractionsWarning(message), stacklevel=1)
