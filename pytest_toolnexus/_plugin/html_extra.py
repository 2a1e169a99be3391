"""pytest-html beside the run report: a ``cassette`` column in pytest-html's table and, on each
test that used a cassette, an extra linking to its timeline in ``--cassette-report``'s file.

Registered only when pytest-html is loaded and a run report is asked for; it imports
pytest-html's ``extras`` when a test ends, and nothing of the cassette machinery.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from html import escape
from pathlib import Path
from typing import Any, Final

import pytest

from pytest_toolnexus._report.anchor import anchor_of

from .run_report import RunReport

__all__ = ["HtmlExtras"]

_SUMMARY: Final = "toolnexus_cassette"
"""The report attribute that carries a test's cassette summary (xdist sends it with the report
from the worker that ran the test)."""


class HtmlExtras:
    """The hooks pytest-html calls, and the extra put on each test's teardown report."""

    def __init__(self, config: pytest.Config, run: RunReport) -> None:
        self._run = run
        given = config.getoption("htmlpath", None)
        page = Path(os.path.expanduser(given)) if given else None
        if page is not None and not page.is_absolute():
            page = config.invocation_params.dir / page
        folder = page.parent if page is not None else config.invocation_params.dir
        self._link = Path(os.path.relpath(run.target, folder)).as_posix()
        self._summaries: dict[str, str] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        entry = self._run.tests.get(item.nodeid)
        if report.when == "teardown" and entry is not None:
            from pytest_html import extras

            setattr(report, _SUMMARY, _summary(entry))
            link = extras.url(f"{self._link}#{anchor_of(item.nodeid)}", name="cassette timeline")
            report.extras = [*getattr(report, "extras", []), link]  # type: ignore[attr-defined]
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Before pytest-html, which draws every phase's row when the teardown report comes.
        summary = getattr(report, _SUMMARY, None)
        if summary is not None:
            self._summaries[report.nodeid] = summary

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells.insert(2, '<th class="sortable" data-column-type="cassette">Cassette</th>')

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report: Any, cells: list[str]) -> None:
        summary = self._summaries.get(report.nodeid, "")
        cells.insert(2, f'<td class="col-cassette">{escape(summary)}</td>')


def _summary(entry: dict[str, Any]) -> str:
    """One test's cassette in a few words: ``cassettes/x.msgpack: 2 replayed, 1 miss``."""
    said = [f"{entry['replayed']} replayed"]
    if entry["recorded"]:
        said.append(f"{entry['recorded']} recorded")
    if entry["misses"]:
        said.append(f"{len(entry['misses'])} missed")
    if entry["unused"]:
        said.append(f"{len(entry['unused'])} unused")
    return f"{entry['cassette']}: {', '.join(said)}"
