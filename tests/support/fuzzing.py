"""Sizes and reports for the fuzzers and properties.

The suite runs each at a size that keeps CI short. ``python3 .ci/dev.py fuzz`` sets
``TOOLNEXUS_FUZZ_SCALE`` to multiply every case count, and ``TOOLNEXUS_FUZZ_REPORT`` to a file
where each fuzzer appends one JSON line per class of cases: how many were tried, how each
ended, and how many failed.
"""

import functools
import json
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

SCALE = max(1, int(os.environ.get("TOOLNEXUS_FUZZ_SCALE", "1") or "1"))


def scaled(count: int) -> int:
    """``count`` at the suite's size, times the manual run's scale."""
    return count * SCALE


def report(test: str, kind: str, outcomes: Counter[str] | dict[str, int], failures: int) -> None:
    """Append one class's figures to the manual run's report, when one is being made."""
    target = os.environ.get("TOOLNEXUS_FUZZ_REPORT")
    if not target:
        return
    line = {
        "test": test,
        "class": kind,
        "cases": sum(outcomes.values()),
        "outcomes": dict(outcomes),
        "failures": failures,
        "scale": SCALE,
    }
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")


EXAMPLES: Counter[str] = Counter()


def counted(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Count the examples a property runs (put it under ``@given``), for :func:`report_examples`."""

    def wrap(test: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(test)
        def run(*args: Any, **kwargs: Any) -> Any:
            EXAMPLES[kind] += 1
            return test(*args, **kwargs)

        return run

    return wrap


def report_examples(test: str) -> None:
    """Report each counted property's examples (a failed property fails its test, which the
    manual run lists)."""
    for kind, count in sorted(EXAMPLES.items()):
        report(test, kind, {"examples": count}, 0)
    EXAMPLES.clear()
