"""The conformance kit's findings in the end-of-run summary: one line by default, each finding
under ``-v``, with what to do about each departure from RFC 9110 or ADR 0027.

The kit records a finding in its test's ``user_properties`` (``finding:<case>`` holds what the
client did, ``finding-fix:<case>`` what to do when that departs), so they are read here from the
test reports, which xdist brings back from its workers with everything else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Finding", "findings_of", "summarize_findings"]

FINDING = "finding:"
FIX = "finding-fix:"


@dataclass(frozen=True)
class Finding:
    where: str  # the kit's test class: "examples/test_conformance_openai.py::TestOpenAI..."
    case: str
    observed: str
    fix: str | None


def findings_of(reports: Iterable[Any]) -> list[Finding]:
    """The findings the kit's tests recorded, in report order, each once."""
    found: dict[tuple[str, str], Finding] = {}
    for report in reports:
        if getattr(report, "when", None) != "call":
            continue
        properties = dict(getattr(report, "user_properties", ()))
        where = str(report.nodeid).split("[", 1)[0].rsplit("::", 1)[0]
        for name, observed in properties.items():
            if isinstance(name, str) and name.startswith(FINDING):
                case = name[len(FINDING) :]
                fix = properties.get(FIX + case)
                found[(where, case)] = Finding(where, case, str(observed), fix)
    return list(found.values())


def summarize_findings(terminalreporter: Any) -> None:
    """Write the findings' section of the summary, when the run recorded any."""
    reports = [r for group in terminalreporter.stats.values() for r in group]
    found = findings_of(reports)
    if not found:
        return
    departures = [f for f in found if f.fix is not None]
    verbose = terminalreporter.config.getoption("verbose", 0) > 0
    write = terminalreporter.write_line
    terminalreporter.section("conformance findings")
    where = {f.where for f in found}
    write(
        f"{len(found)} finding(s) in {len(where)} client suite(s), {len(departures)} of them "
        "departing from RFC 9110 or ADR 0027"
        + ("" if verbose else " (-v lists them, with what to do)")
    )
    if not verbose:
        return
    for suite in sorted(where):
        write(suite)
        for finding in found:
            if finding.where != suite:
                continue
            write(f"  {finding.case}: {finding.observed}")
            if finding.fix is not None:
                write(f"    departs; to conform: {finding.fix}")
