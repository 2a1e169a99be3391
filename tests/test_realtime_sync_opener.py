"""websockets 17.1 and later open every sync connection in ``reconnect.connect``: the
``connect`` function, a ``reconnect`` subclass entered directly (as the openai SDK connects
from 3.63 on), the reconnecting form (``legacy=False``) and a ``connect`` bound by name before
the cassette was in use all go through it, and all are served from the cassette: no socket
opens (the replay-only tripwire would refuse it), and the first server frame arrives at its
recorded offset."""

import json
import warnings

import pytest
import websockets.sync.client as sync_client
from websockets.sync.client import connect as bound_before_the_cassette

from pytest_toolnexus import use_cassette
from tests.support import realtime_cassette as rt

pytestmark = pytest.mark.skipif(
    not hasattr(sync_client, "reconnect"), reason="websockets before 17.1 has no sync reconnect"
)


@pytest.fixture
def recorded(tmp_path):
    return rt.write(tmp_path / "realtime.msgpack")


def first_event(connection):
    return json.loads(connection.recv())["type"]


def served(path, talk):
    """``talk``'s first server event through a replay-only cassette, and the connection's log."""
    with warnings.catch_warnings():
        # The client leaves after the first frame: the session's other frames are left over.
        warnings.simplefilter("ignore")
        with use_cassette(path) as cassette:
            kind = talk()
    (log,) = cassette.websockets
    return kind, log


def assert_replayed(kind, log):
    assert kind == "session.created"
    assert log.replayed
    assert log.url == rt.URL
    assert log.received[0].t == rt.SERVER_T[0]  # at its recorded offset, to the ms


def test_a_reconnect_subclass_entered_directly_is_served(recorded):
    class SdkConnect(sync_client.reconnect):
        """As the openai SDK connects from 3.63 on."""

        def process_redirect(self, exc):
            return exc

    def talk():
        connection = SdkConnect(rt.URL, additional_headers={"Authorization": "Bearer x"})
        opened = connection.__enter__()
        try:
            return first_event(opened)
        finally:
            opened.close()

    assert_replayed(*served(recorded, talk))


def test_a_connect_bound_before_the_cassette_is_served(recorded):
    def talk():
        with bound_before_the_cassette(rt.URL) as connection:
            return first_event(connection)

    assert_replayed(*served(recorded, talk))


def test_the_reconnecting_form_is_served(recorded):
    def talk():
        with sync_client.connect(rt.URL, legacy=False) as connection:
            return first_event(connection)

    assert_replayed(*served(recorded, talk))


def test_the_opener_is_the_librarys_own_again_after_the_cassette(recorded):
    own = sync_client.reconnect.__dict__["connect"]

    def talk():
        assert sync_client.reconnect.__dict__["connect"] is not own
        with sync_client.connect(rt.URL) as connection:
            return first_event(connection)

    assert_replayed(*served(recorded, talk))
    assert sync_client.reconnect.__dict__["connect"] is own
