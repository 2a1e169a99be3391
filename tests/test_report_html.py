"""The HTML run report as a person sees it: a pytester project runs with
``--cassette-report=report.html`` (and under xdist), and headless Chromium opens the file: the
expected tests are in its table, each timeline has as many marks as the cassettes' pieces and
the deliveries the tests made, the filters and the search box work, the console is clean and
nothing is fetched from the network. ``show --html`` draws one cassette the same way."""

import html
import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_toolnexus import Cassette
from pytest_toolnexus._report.anchor import anchor_of
from pytest_toolnexus._report.page import run_page
from tests.support.browser import launched, open_page
from tests.support.report_project import (
    FAKE_KEY,
    make_project,
    stream_interaction,
    timed_out,
    too_many,
)

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["test_stream", "test_retry_then_stream", "test_miss", "test_recorded"]
# Per test, per lane: recorded pieces, deliveries, header ticks, end bars (tests/support/
# report_project.py: a three-event stream; a 429 read whole, then that stream; a miss, which
# answers nothing; one JSON answer recorded from the emulator).
STREAM = {"rec": 3, "del": 3, "hdr": 1, "end": 1, "err": 0}
WHOLE = {"rec": 1, "del": 1, "hdr": 1, "end": 1, "err": 0}
MARKS = {
    "test_stream": [STREAM],
    "test_retry_then_stream": [WHOLE, STREAM],
    "test_miss": [],
    "test_recorded": [WHOLE],
}

COUNT_MARKS = """() => Array.from(document.querySelectorAll("section.test")).map((section) => ({
  name: section.querySelector("h3").textContent.split("::").pop(),
  lanes: Array.from(section.querySelectorAll("g.lane:not(.sleeps)")).map((lane) => {
    const counts = {};
    for (const kind of ["rec", "del", "hdr", "end", "err"]) {
      counts[kind] = lane.querySelectorAll(".mark." + kind).length;
    }
    return counts;
  }),
  sleeps: section.querySelectorAll(".mark.sleep").length,
}))"""

VISIBLE_ROWS = """() => Array.from(document.querySelectorAll("tr.test"))
  .filter((row) => !row.hidden && row.offsetParent !== null)
  .map((row) => row.querySelector("a").textContent.split("::").pop())"""


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium, or a skip naming what is missing."""
    yield from launched()


@pytest.fixture
def report(pytester, emulator):
    make_project(pytester.path)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--cassette-report=report.html")
    result.assert_outcomes(passed=3, failed=1)
    return pytester.path / "report.html"


def png_size(path):
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


def test_chromium_shows_every_test_with_its_timeline_marks(report, browser, tmp_path):
    opened = open_page(browser, report)
    page = opened.page

    rows = page.evaluate(VISIBLE_ROWS)
    assert rows == NAMES
    outcomes = page.eval_on_selector_all(
        "tr.test td:first-child", "cells => cells.map(c => c.textContent)"
    )
    assert outcomes == ["passed", "passed", "failed", "passed"]
    drawn = {entry["name"]: entry for entry in page.evaluate(COUNT_MARKS)}
    assert {name: entry["lanes"] for name, entry in drawn.items()} == MARKS
    assert {name: entry["sleeps"] for name, entry in drawn.items()} == {
        "test_stream": 0,
        "test_retry_then_stream": 1,
        "test_miss": 0,
        "test_recorded": 0,
    }
    stream, _, miss = (f"#{anchor_of(f'test_app.py::{name}')}" for name in NAMES[:3])
    page.hover(f"{stream} .mark.rec >> nth=1")
    assert page.inner_text("#tip") == "480.5 ms: delta: choices.0.delta.content=lo"
    message = page.inner_text(f"{miss} .miss pre")
    assert "root['q']: recorded 'hello', sent 'something else entirely'" in message

    assert [m for m in opened.console if m[0] in ("error", "warning")] == []
    assert opened.errors == []
    assert opened.requests == []

    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    width, height = png_size(shot)
    assert width == 1200
    assert height > 900  # the table and four timelines do not fit one screen
    assert shot.stat().st_size > 30_000  # drawn, not a blank page


def test_the_filters_and_the_search_box_narrow_the_tests(report, browser):
    page = open_page(browser, report).page

    page.check("#only-failed")
    assert page.evaluate(VISIBLE_ROWS) == ["test_miss"]
    assert page.is_hidden(f"#{anchor_of('test_app.py::test_stream')}")
    assert page.is_visible(f"#{anchor_of('test_app.py::test_miss')}")
    page.uncheck("#only-failed")
    page.check("#only-missed")
    assert page.evaluate(VISIBLE_ROWS) == ["test_miss"]
    page.uncheck("#only-missed")
    page.check("#only-recorded")
    assert page.evaluate(VISIBLE_ROWS) == ["test_recorded"]
    page.uncheck("#only-recorded")
    page.fill("#search", "RETRY")
    assert page.evaluate(VISIBLE_ROWS) == ["test_retry_then_stream"]
    assert page.inner_text("#shown") == "1"
    page.fill("#search", "example.invalid stream")
    assert page.evaluate(VISIBLE_ROWS) == ["test_stream", "test_retry_then_stream"]
    page.fill("#search", "")
    assert page.evaluate(VISIBLE_ROWS) == NAMES


def test_the_report_is_one_file_that_loads_nothing_and_masks_secrets(report):
    text = report.read_text()

    assert FAKE_KEY not in text
    assert "[secret]" in text
    assert re.findall(r"<(?:script|img|iframe)[^>]*\ssrc=", text) == []
    assert re.findall(r"<link\b", text) == []
    assert "@import" not in text
    assert "url(" not in text
    assert re.findall(r'href="(?!#)', text) == []
    assert text.count('<tr class="test"') == 4


def test_an_xdist_run_writes_one_report_with_every_workers_tests(pytester, emulator):
    make_project(pytester.path)

    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-n", "2", "--cassette-report=report.html"
    )

    result.assert_outcomes(passed=3, failed=1)
    text = (pytester.path / "report.html").read_text()
    rows = re.findall(r'<tr class="test".*?<a href="#t-\w+">test_app.py::(\w+)</a>', text)
    assert sorted(rows) == sorted(NAMES)
    sections = re.split(r'<section class="test"', text)[1:]
    for section in sections:
        name = re.search(r"test_app.py::(\w+)</h3>", section).group(1)
        lanes = re.findall(r'<g class="lane" (.*?)</g>', section)
        counted = [
            {
                kind: lane.count(f'class="mark {kind}"')
                for kind in ("rec", "del", "hdr", "end", "err")
            }
            for lane in lanes
        ]
        assert counted == MARKS[name], name
    # Each worker gathered its own: the controller wrote one file, and no worker wrote one.
    assert sorted(p.name for p in pytester.path.glob("*.html")) == ["report.html"]


def test_show_html_draws_one_cassette(tmp_path, browser):
    path = tmp_path / "retry.msgpack"
    Cassette(path, [too_many(), stream_interaction(), timed_out()], {"source": "a test"}).save(
        unsafe_verbatim=True
    )
    out = tmp_path / "page" / "retry.html"

    done = subprocess.run(
        [sys.executable, "-m", "pytest_toolnexus", "show", "--html", str(out), str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr == f"wrote {out}\n"
    assert FAKE_KEY not in out.read_text()
    opened = open_page(browser, out)
    lanes = opened.page.evaluate(COUNT_MARKS)[0]["lanes"]
    # Nothing was delivered: a cassette alone has only its recorded times.
    assert lanes == [
        WHOLE | {"del": 0},
        STREAM | {"del": 0},
        {"rec": 0, "del": 0, "hdr": 0, "end": 0, "err": 1},
    ]
    assert "ConnectTimeout at 5,000.0 ms: timed out" in opened.page.inner_html("#t0")
    assert "source: a test" in opened.page.inner_text("body")
    assert opened.errors == []
    assert opened.requests == []
    assert [m for m in opened.console if m[0] == "error"] == []


def test_every_timeline_is_drawn_once_however_the_reader_scrolls(pytester, emulator, browser):
    # Given the run document of the project, its tests copied to make a long report
    make_project(pytester.path)
    pytester.runpytest_subprocess("-p", "no:randomly", "--cassette-report=run.json")
    document = json.loads((pytester.path / "run.json").read_text())
    document["tests"] = [
        {**test, "nodeid": f"{test['nodeid']}[{copy}]"}
        for copy in range(60)
        for test in document["tests"]
    ]
    page_path = pytester.path / "long.html"
    page_path.write_text(run_page(document))

    # When the reader jumps through the page while the timelines are being drawn
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(page_path.as_uri(), wait_until="commit")
    for fraction in (1.0, 0.5, 0.2, 0.9, 0.0):
        page.evaluate(f"() => window.scrollTo(0, document.body.scrollHeight * {fraction})")
    page.wait_for_function("() => document.documentElement.dataset.drawn === 'all'")

    # Then every test keeps its section, with one drawing and nothing left to draw
    drawn = page.evaluate(
        """() => Array.from(document.querySelectorAll("section.test")).map(
            (section) => section.querySelectorAll("svg.timeline").length)"""
    )
    expected = [0 if "test_miss" in t["nodeid"] else 1 for t in document["tests"]]
    assert drawn == expected
    assert page.eval_on_selector_all("script.draw", "scripts => scripts.length") == 0


def test_pytest_html_gets_a_cassette_column_and_a_link_to_each_timeline(pytester, emulator):
    pytest.importorskip("pytest_html", reason="pytest-html is not installed")
    make_project(pytester.path)

    result = pytester.runpytest_subprocess(
        "-p",
        "no:randomly",
        "--html=html/tests.html",
        "--self-contained-html",
        "--cassette-report=timelines/report.html",
    )

    result.assert_outcomes(passed=3, failed=1)
    page = (pytester.path / "html" / "tests.html").read_text()
    blob = re.search(r'data-jsonblob="([^"]*)"', page).group(1)
    data = json.loads(html.unescape(blob))
    assert '<th class="sortable" data-column-type="cassette">Cassette</th>' in page
    rows = {name.split("::")[1]: test for name, test in data["tests"].items()}
    stream = rows["test_stream"][0]
    assert (
        '<td class="col-cassette">cassettes/test_app/test_stream.msgpack: 1 replayed</td>'
        in stream["resultsTableRow"]
    )
    miss = rows["test_miss"][0]
    assert (
        '<td class="col-cassette">cassettes/test_app/test_miss.msgpack: 0 replayed, 1 missed, '
        "1 unused</td>" in miss["resultsTableRow"]
    )
    # The link goes from pytest-html's page to the timeline's section in the run report.
    (link,) = [e for e in stream["extras"] if e["name"] == "cassette timeline"]
    target = f"../timelines/report.html#{anchor_of('test_app.py::test_stream')}"
    assert link["content"] == target
    report = (pytester.path / "timelines" / "report.html").read_text()
    assert f'id="{target.split("#")[1]}"' in report
