"""``pytest-toolnexus show PATH --json`` and ``--html OUT``: a cassette's timeline as the
documented JSON (docs/report.md), or drawn as one self-contained HTML page."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TextIO

from pytest_toolnexus._report.page import cassette_page
from pytest_toolnexus._report.timeline import cassette_timeline, dumps
from pytest_toolnexus._seam.errors import CassetteError
from pytest_toolnexus._store.cassette import load_cassette

__all__ = ["show_timeline"]


def show_timeline(
    path: Path, stream: TextIO, err: TextIO, *, as_json: bool, html: Path | None
) -> int:
    """Print the timeline of the cassette at ``path`` as JSON on ``stream`` (``as_json``),
    and write its HTML page to ``html``; returns the exit code."""
    try:
        cassette = load_cassette(path)
        cassette.decode()
        document = cassette_timeline(path, cassette.meta, cassette.interactions)
    except CassetteError as exc:
        print(f"error: {exc}", file=err)
        return 1
    text = dumps(document, indent=2 if as_json else None)
    if as_json:
        print(text, file=stream)
    if html is not None:
        temporary = html.with_name(f".{html.name}.{os.getpid()}.tmp")
        try:
            html.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(cassette_page(json.loads(text)), encoding="utf-8")
            os.replace(temporary, html)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
            reason = exc.strerror or exc
            print(f"error: cannot write the page of {path} to {html}: {reason}", file=err)
            return 2
        print(f"wrote {html}", file=err)
    return 0
