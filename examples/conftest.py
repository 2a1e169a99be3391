"""Shared set-up for the example suite.

The examples talk to ``EMULATOR_URL``. In a normal run nothing listens there: every request is
answered from the committed cassettes under ``cassettes/examples/``. When the suite runs with
``--cassette-record=...``, the loopback emulator from ``tests/support/emulator.py`` is started
on that address so the real SDKs have a server to record against.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.emulator import Emulator

EMULATOR_PORT = 18089
EMULATOR_URL = f"http://127.0.0.1:{EMULATOR_PORT}"
API_KEY = "test-key-not-a-secret"


def _recording(config: pytest.Config) -> bool:
    return config.getoption("cassette_record") not in (None, "none")


@pytest.fixture(scope="session")
def emulator(request: pytest.FixtureRequest) -> Iterator[Emulator | None]:
    """The loopback emulator while recording; None while replaying (nothing to talk to)."""
    if not _recording(request.config):
        yield None
        return
    with Emulator(port=EMULATOR_PORT, events=20, delay=0.05, first_event_delay=0.2) as emu:
        yield emu


@pytest.fixture
def tolerance(emulator: Emulator | None) -> float:
    """How exactly timing must match: to the millisecond on replay's virtual clock, loosely
    while recording on real time against the emulator."""
    return 0.001 if emulator is None else 0.1


@pytest.fixture
def cassette_config() -> dict[str, Any]:
    """Every example cassette says where it was recorded."""
    return {
        "meta": {
            "source": "recorded against the loopback emulator in tests/support/emulator.py, "
            "not a real provider",
        }
    }
