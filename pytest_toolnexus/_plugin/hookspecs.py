"""Hooks that a ``conftest.py`` or plugin can implement to shape how cassettes work.

Every hook is called with keyword arguments; implement only the arguments you need.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_toolnexus._seam.transport import TransportRequest
    from pytest_toolnexus._store.cassette import Cassette, Interaction, RecordedRequest

__all__ = [
    "pytest_toolnexus_before_write",
    "pytest_toolnexus_cassette_path",
    "pytest_toolnexus_match",
    "pytest_toolnexus_redact",
]


@pytest.hookspec(firstresult=True)
def pytest_toolnexus_redact(interaction: Interaction, item: pytest.Item) -> Interaction | None:
    """Return a redacted copy of a just-recorded ``interaction``, or None to keep it as it is.

    Runs before the built-in redaction (credential headers and query parameters), before the
    interaction is kept in memory or written. The first non-None result wins.
    """


@pytest.hookspec(firstresult=True)
def pytest_toolnexus_match(
    request: TransportRequest, recorded: RecordedRequest, item: pytest.Item
) -> bool | None:
    """Decide whether the ``recorded`` request answers the live ``request``.

    Return True or False to decide, or None to leave it to the built-in rules (method,
    normalised URL, semantic body). The first non-None result wins. Implementing this hook
    switches the cassette from its hash index to a scan, so keep it cheap.
    """


@pytest.hookspec(firstresult=True)
def pytest_toolnexus_cassette_path(item: pytest.Item, default: Path) -> Path | str | None:
    """Return the cassette file for ``item``, or None to use ``default``.

    A relative path is taken from the cassette directory (``--cassette-dir``).
    """


@pytest.hookspec
def pytest_toolnexus_before_write(cassette: Cassette, item: pytest.Item) -> None:
    """Inspect or change ``cassette`` (its ``interactions`` and ``meta``) just before it is
    written. Every implementation runs."""
