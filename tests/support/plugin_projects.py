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


def stored_times(path) -> list[float]:
    """The recorded time of each piece of the one interaction in the cassette at ``path``, in
    seconds from when its request was sent: what a replay must deliver each piece at.

    Compare a replay with these, not with the deliveries the recording session saw: those
    count from the session's reading when the request went out, which a loaded machine puts
    milliseconds before the recorder's own start, the origin of the stored times.
    """
    from pytest_toolnexus import load_cassette

    (interaction,) = load_cassette(path).interactions
    assert interaction.response is not None
    return [t / 1000 for t, _ in interaction.response.body.pieces()]
