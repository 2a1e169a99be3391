"""What the plugin's pytester tests share: a project conftest whose ``chat`` fixture talks to
the emulator with a plain httpx client, and the ``emulator`` fixture that serves it."""

from collections.abc import Iterator

import pytest

from tests.support.emulator import Emulator

CHAT_CONFTEST = """
import os

import httpx
import pytest

BASE = os.environ["EMULATOR_URL"]


@pytest.fixture
def chat():
    def send(text, **extra):
        body = {"model": "m", "messages": [{"role": "user", "content": text}], **extra}
        with httpx.Client() as client:
            response = client.post(BASE + "/v1/chat/completions", json=body)
        assert response.status_code == 200
        return response.json()["choices"][0]["message"]["content"]

    return send
"""


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulator]:
    """A running emulator whose URL the project's conftest reads from EMULATOR_URL."""
    monkeypatch.delenv("CI", raising=False)
    with Emulator() as emu:
        monkeypatch.setenv("EMULATOR_URL", emu.base_url)
        yield emu
