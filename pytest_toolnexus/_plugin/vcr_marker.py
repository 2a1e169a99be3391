"""pytest-recording's ``vcr`` marker when no plugin serves it: an error, never a live run."""

from __future__ import annotations

from typing import Final

import pytest

__all__ = ["VCR_PLUGINS", "register_vcr_marker", "unserved_vcr_marker"]

VCR_PLUGINS: Final = ("recording", "vcr")
"""The pytest plugin names of pytest-recording and pytest-vcr, which serve ``vcr``."""

_VCR_MODULES: Final = ("pytest_recording", "pytest_vcr")
_OURS: Final = (
    "vcr: pytest-recording's marker; without pytest-recording a test that carries it fails "
    "(run `pytest-toolnexus migrate` to turn it into @pytest.mark.cassette)"
)


def _served(config: pytest.Config) -> bool:
    """Whether something else serves ``vcr``: pytest-recording or pytest-vcr, however they
    were loaded (entry point, ``-p``, ``pytest_plugins``), or a suite of its own that
    declares the marker in its ini file or defines a ``vcr`` fixture."""
    manager = config.pluginmanager
    if any(manager.hasplugin(name) for name in VCR_PLUGINS):
        return True
    for plugin in manager.get_plugins():
        name = getattr(plugin, "__name__", "") or ""
        if name.split(".")[0] in _VCR_MODULES:
            return True
    declared = [line for line in config.getini("markers") if line != _OURS]
    return any(line.split(":")[0].split("(")[0].strip() == "vcr" for line in declared)


def register_vcr_marker(config: pytest.Config) -> None:
    """Declare ``vcr`` when nothing else does, so the test fails with our sentence instead of
    running with an unknown-mark warning (or a --strict-markers collection error)."""
    if not _served(config):
        config.addinivalue_line("markers", _OURS)


def unserved_vcr_marker(item: pytest.Item) -> str | None:
    """The reason ``item`` cannot run, when it carries ``vcr`` and no plugin serves it."""
    if item.get_closest_marker("vcr") is None or _served(item.config):
        return None
    return (
        f"{item.nodeid} is marked @pytest.mark.vcr, but neither pytest-recording nor "
        "pytest-vcr is active, so nothing would serve its cassette and it would reach the "
        "network. Run `pytest-toolnexus migrate .` to rewrite vcr markers and fixtures as "
        "cassette ones (see docs/migrating.md), or mark it @pytest.mark.cassette yourself."
    )
