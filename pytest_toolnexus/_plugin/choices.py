"""The values the plugin's options accept, apart from the code that applies them, so that
``pytest_addoption`` can list them without importing the cassette machinery."""

from __future__ import annotations

from typing import Final

from pytest_toolnexus._session.modes import RECORD_MODES, TIMING_MODES

__all__ = [
    "EXPIRY_POLICIES",
    "RECORD_MODES",
    "TIMING_MODES",
    "UNSERVED_POLICIES",
    "UNUSED_POLICIES",
    "VCRPY_RECORD_MODES",
]

UNUSED_POLICIES: Final = ("warn", "fail", "ignore")
UNSERVED_POLICIES: Final = ("fail", "warn")
EXPIRY_POLICIES: Final = ("warn", "fail", "rerecord")
VCRPY_RECORD_MODES: Final = {
    "none": "none",
    "once": "once",
    "new_episodes": "new",
    "all": "all",
    "rewrite": "all",
}
"""vcrpy's record modes (pytest-recording's ``--record-mode``), each with the native one."""
