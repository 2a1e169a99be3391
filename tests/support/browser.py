"""Headless Chromium for the report's tests: Debian's ``chromium`` package (``python3
.ci/dev.py test`` installs it where it can), driven by Playwright with the system browser;
Playwright's own browser download is never used. Where either is missing, the tests that ask
for :func:`browser` skip and say which."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Opened:
    """A page loaded from a file, with what its console said and what it asked the network
    for (anything but the file itself)."""

    page: Any
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def launched() -> Iterator[Any]:
    """A headless Chromium, or a skip naming what is missing (for a fixture to yield from)."""
    executable = chromium()
    if executable is None:
        pytest.skip(
            "no chromium on PATH: install Debian's chromium package (python3 .ci/dev.py test "
            "does, as root) to run the report's browser tests"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e .[dev])"
    )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=list(FLAGS))
        try:
            yield launched
        finally:
            launched.close()


def open_page(browser: Any, path: Path, *, width: int = 1200) -> Opened:
    """``path`` loaded in a fresh page, its console and page errors and its requests noted,
    once every timeline is drawn."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    opened = Opened(page)
    page.on("console", lambda message: opened.console.append((message.type, message.text)))
    page.on("pageerror", lambda error: opened.errors.append(str(error)))
    own = path.resolve().as_uri()
    page.on("request", lambda request: request.url != own and opened.requests.append(request.url))
    page.goto(own, wait_until="load")
    # The report draws each timeline as it nears the screen and the rest while idle.
    page.wait_for_function("() => document.documentElement.dataset.drawn === 'all'", timeout=30_000)
    return opened
