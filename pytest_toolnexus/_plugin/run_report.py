"""``--cassette-report=PATH``: gather what each test did with its cassette, and write the run
report at the end (HTML, or the run document as JSON for a path ending in ``.json``).

An xdist worker gathers its own tests and hands them to the controller through
``workeroutput``; the controller merges them and writes one report. Only pytest and json are
imported here; the session and the drawing are imported when a test notes its cassette and
when the report is written.
"""

from __future__ import annotations

import datetime
import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from pytest_toolnexus._session.session import CassetteSession

__all__ = ["REPORT", "RunReport", "note_test"]

_WORKER_KEY: Final = "toolnexus_report"


class RunReport:
    """The run's report being gathered: one ``test`` object of docs/report.md per test that
    used a cassette, and each test's outcome from its reports."""

    def __init__(self, config: pytest.Config, target: str) -> None:
        self._config = config
        path = Path(os.path.expanduser(target))
        self.target = path if path.is_absolute() else config.invocation_params.dir / path
        self.tests: dict[str, dict[str, Any]] = {}
        self.outcomes: dict[str, str] = {}
        self.written: Path | None = None
        self.unwritten: str | None = None

    @property
    def _worker(self) -> bool:
        return getattr(self._config, "workerinput", None) is not None

    def note(self, nodeid: str, entry: dict[str, Any]) -> None:
        """Keep one test's ``entry`` (a rerun's replaces the one before)."""
        self.tests[nodeid] = {"nodeid": nodeid, **entry}

    # -- hooks ----------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcome = self.outcomes.get(report.nodeid)
        if report.when == "setup":
            outcome = "error" if report.failed else "skipped" if report.skipped else "passed"
        elif report.when == "call":
            xfail = hasattr(report, "wasxfail")
            if report.failed:
                outcome = "failed"
            elif report.skipped:
                outcome = "xfailed" if xfail else "skipped"
            else:
                outcome = "xpassed" if xfail else "passed"
        elif report.failed and outcome in (None, "passed", "skipped", "xfailed"):
            outcome = "error"  # a teardown check failed (a hidden miss, an unused interaction)
        if outcome is not None:
            self.outcomes[report.nodeid] = outcome

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        text = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
        if text:
            for entry in json.loads(text):
                self.tests[entry["nodeid"]] = entry

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self._worker:
            gathered = [self._with_outcome(entry) for entry in self.tests.values()]
            self._config.workeroutput[_WORKER_KEY] = json.dumps(gathered, default=repr)  # type: ignore[attr-defined]
            return
        try:
            self.written = self.write()
        except OSError as exc:
            self.unwritten = (
                f"pytest-toolnexus: error: cannot write the cassette report to {self.target}: "
                f"{exc.strerror or exc}; give --cassette-report a path that can be written"
            )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.written is not None:
            terminalreporter.write_line(f"pytest-toolnexus: cassette report {self.written}")
        if self.unwritten is not None:
            terminalreporter.write_line(self.unwritten, red=True, bold=True)

    # -- the document ---------------------------------------------------------------------

    def _with_outcome(self, entry: dict[str, Any]) -> dict[str, Any]:
        outcome = self.outcomes.get(entry["nodeid"], entry.get("outcome", "unknown"))
        return {**entry, "outcome": outcome}

    def document(self) -> dict[str, Any]:
        """The run document: the tests in the order their outcomes were reported."""
        from pytest_toolnexus._report.timeline import SCHEMA_VERSION

        order = {nodeid: number for number, nodeid in enumerate(self.outcomes)}
        tests = sorted(self.tests.values(), key=lambda e: order.get(e["nodeid"], len(order)))
        return {
            "schema": "pytest-toolnexus/run",
            "version": SCHEMA_VERSION,
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "rootdir": str(self._config.rootpath),
            "tests": [self._with_outcome(entry) for entry in tests],
        }

    def write(self) -> Path:
        """Write the report (the run document as JSON where the target ends in ``.json``)."""
        from pytest_toolnexus._report.page import run_page
        from pytest_toolnexus._report.timeline import dumps

        text = dumps(self.document())
        if self.target.suffix.lower() != ".json":
            text = run_page(json.loads(text))
        self.target.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.target.with_name(f".{self.target.name}.{os.getpid()}.tmp")
        try:
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, self.target)
        except BaseException:
            temporary.unlink(missing_ok=True)  # nothing half-written is left beside the report
            raise
        return self.target


REPORT: Final = pytest.StashKey[RunReport]()


def note_test(
    item: pytest.Item, session: CassetteSession, where: str, *, wall: float, shared: bool
) -> None:
    """Note what ``item`` did with its cassette, when the run writes a report."""
    run = item.config.stash.get(REPORT, None)
    if run is None:
        return
    from pytest_toolnexus._report.run import run_entry

    try:
        entry = run_entry(session, cassette=where, wall=wall, shared=shared)
    except Exception as exc:  # the report's data must never decide the test's outcome
        # Only the error's type is shown: its message may quote what the cassette holds.
        warnings.warn(
            pytest.PytestWarning(
                f"{item.nodeid}: pytest-toolnexus could not note its cassette {where} for the "
                f"run report ({type(exc).__name__}), so the report leaves this test out; the "
                "test's outcome is its own. Please report this as a bug."
            ),
            stacklevel=1,
        )
        return
    run.note(item.nodeid, entry)
