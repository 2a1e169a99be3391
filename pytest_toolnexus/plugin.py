"""The pytest plugin, loaded through the ``pytest11`` entry point."""

from __future__ import annotations

import pytest

__all__ = ["pytest_configure"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cassette(name=None, **options): serve this test's HTTP traffic from a "
        "pytest-toolnexus cassette",
    )
