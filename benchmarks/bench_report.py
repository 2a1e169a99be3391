"""Benchmark 13: the HTML run report of a 1,000-test suite (issue 25, point 4).

The generated suite of benchmark 7 (one to five requests per test, about a fifth of them
streams of 10 to 40 chunks) runs with ``--cassette-report=report.html``. Measured:

- the file's size (goal: at most 5 MB), beside the suite's cassettes;
- the time headless Chromium takes to open it: from the start of navigation to the second
  animation frame after the ``load`` event (the page laid out and painted), median of
  ``OPENS`` fresh pages (goal: at most 2 s); beside it, in the same browser, ``about:blank``
  (the browser's own cost) and, as a ratio, a page of the same bytes that is only paragraphs
  of text (what any page of that size costs to read and lay out), and the time until every
  timeline is drawn (the page draws those off the screen while the browser is idle);
- the time the search box takes to filter the 1,000 rows and their timelines, in the page;
- the run's wall time with the report against the same run without it (the cost of gathering
  each test's data and writing the file), in interleaved runs.

Chromium is Debian's ``chromium`` package driven by playwright; where either is missing the
browser rows say so. Run alone: ``python benchmarks/bench_report.py``.
"""

from __future__ import annotations

import html
import shutil
from pathlib import Path
from typing import Any

from _common import Table, median, now, ratio, run_alone, verdict
from _projects import cassette_bytes, mixed_cases, run_pytest, write_project

TESTS = 1_000
ROUNDS = 3
OPENS = 5
GOAL_SECONDS = 2.0
GOAL_BYTES = 5_000_000  # 5 MB
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
_PAINTED = (
    "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => "
    "done(performance.now()))))"
)
_SEARCH = """() => {
  const box = document.getElementById("search");
  const started = performance.now();
  box.value = "test_0999";
  box.dispatchEvent(new Event("input"));
  document.body.getBoundingClientRect();
  const took = performance.now() - started;
  return [took, document.getElementById("shown").textContent];
}"""


def _open_times(url: str, browser: Any, *, drawn: list[float] | None = None) -> list[float]:
    """Seconds from navigation to the second frame after ``load``, for fresh pages; with
    ``drawn``, also to every timeline drawn (the report draws the ones off the screen while
    the browser is idle)."""
    times = []
    for _ in range(OPENS):
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        started = now()
        page.goto(url, wait_until="load")
        page.evaluate(_PAINTED)
        times.append(now() - started)
        if drawn is not None:
            page.wait_for_function("() => document.documentElement.dataset.drawn === 'all'")
            drawn.append(now() - started)
        page.close()
    return times


def _plain_text(report: Path) -> Path:
    """The floor: a page of the report's size that is nothing but paragraphs of its text."""
    text = html.escape(report.read_text())
    lines = [text[i : i + 100] for i in range(0, len(text), 100)]
    floor = report.with_name("plain.html")
    floor.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>floor</title></head><body>'
        + "".join(f"<p>{line}</p>" for line in lines)
        + "</body></html>"
    )
    return floor


def _browser_rows(report: Path, table: Table, figures: dict[str, float]) -> None:
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        table.add("open in Chromium", "-", "-", "-", "no playwright: skipped")
        return
    if executable is None:
        table.add("open in Chromium", "-", "-", "-", "no chromium on PATH: skipped")
        return
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=list(FLAGS))
        try:
            _open_times("about:blank", browser)  # warm-up: the first page starts a renderer
            blank = median(_open_times("about:blank", browser))
            drawn: list[float] = []
            opened = median(_open_times(report.resolve().as_uri(), browser, drawn=drawn))
            floor = median(_open_times(_plain_text(report).resolve().as_uri(), browser))
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(report.resolve().as_uri(), wait_until="load")
            took, shown = page.evaluate(_SEARCH)
            page.close()
        finally:
            browser.close()
    figures["open_s"] = opened
    table.add(
        "open in Chromium (to the painted page)",
        f"{opened:.3f} s",
        f"≤ {GOAL_SECONDS:.0f} s",
        verdict(opened <= GOAL_SECONDS),
        f"about:blank {blank * 1000:.0f} ms in the same browser",
    )
    table.add(
        "  over the same bytes as plain paragraphs",
        ratio(opened / floor),
        "",
        "info",
        f"the plain page opens in {floor:.3f} s",
    )
    table.add(
        "  every timeline drawn (idle, after the open)",
        f"{median(drawn):.3f} s",
        "",
        "info",
        "",
    )
    table.add(
        "search box: filter to one test",
        f"{took:.0f} ms",
        "",
        "info",
        f"{shown} row(s) left shown",
    )


def run(work: Path) -> tuple[list[Table], dict[str, float]]:
    cases = mixed_cases(TESTS)
    requests = sum(len(case.exchanges) for case in cases)
    project = write_project(work / "suite-report", cases, "toolnexus", shared_client=True)
    report = project / "report.html"
    run_pytest(project, "--collect-only")  # warm-up: compiles the test files
    plain: list[float] = []
    reported: list[float] = []
    for round_ in range(ROUNDS):
        order = (False, True) if round_ % 2 == 0 else (True, False)
        for with_report in order:
            args = ("--cassette-report", str(report)) if with_report else ()
            outcome = run_pytest(project, *args)
            assert outcome.all_passed(TESTS), outcome.tail
            (reported if with_report else plain).append(outcome.wall)
    size = report.stat().st_size
    table = Table(
        f"13. The HTML run report of {TESTS:,} tests ({requests:,} requests), "
        "pytest --cassette-report=report.html",
        ["figure", "value", "goal", "", "beside it"],
    )
    figures: dict[str, float] = {"bytes": float(size)}
    table.add(
        "report.html size",
        f"{size / 1e6:.2f} MB",
        "≤ 5 MB",
        verdict(size <= GOAL_BYTES),
        f"the suite's cassettes: {cassette_bytes(project) / 1e6:.2f} MB",
    )
    _browser_rows(report, table, figures)
    cost = median(reported) / median(plain)
    figures["run_ratio"] = cost
    table.add(
        "pytest run with the report / without",
        ratio(cost),
        "",
        "info",
        f"{median(reported):.2f} s against {median(plain):.2f} s (median of {ROUNDS})",
    )
    return [table], figures


if __name__ == "__main__":
    run_alone(run)
