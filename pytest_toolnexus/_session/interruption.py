"""Which exceptions end a recording before its code was done with it.

A ``with use_cassette(...)`` block left by Ctrl-C (``KeyboardInterrupt``), ``SystemExit``, a
cancelled task (``asyncio.CancelledError``, ``trio.Cancelled``) or ``pytest.exit()`` may have
stopped in the middle of a stream: what it recorded is kept beside the cassette, never written
over it. An ordinary exception (``Exception``) is the code's own failure after whole
interactions, and so are pytest's test outcomes (``pytest.fail``, ``pytest.skip``) and the
library's own ``CassetteMissError``: not an interruption (the plugin, and ``use_cassette``, write
nothing for a failure unless ``record_on_error=True``, then write as usual).

pytest is not imported: its outcome types are looked up only when pytest is already loaded.
"""

from __future__ import annotations

import sys

from pytest_toolnexus._seam.errors import CassetteMissError

__all__ = ["interruption"]


def interruption(error: BaseException | None) -> str | None:
    """Why ``error`` cut a recording short (``"KeyboardInterrupt"``), or None when it did not."""
    if error is None or isinstance(error, GeneratorExit | CassetteMissError):
        return None
    outcomes = sys.modules.get("_pytest.outcomes")
    pytest_exit = getattr(outcomes, "Exit", None)
    if isinstance(pytest_exit, type) and isinstance(error, pytest_exit):
        return "pytest.exit()"
    if isinstance(error, Exception):
        return None
    outcome = getattr(outcomes, "OutcomeException", None)
    if isinstance(outcome, type) and isinstance(error, outcome):
        return None
    return type(error).__name__
