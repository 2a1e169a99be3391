"""A recording times each request from when it is sent, and nothing of the plugin's own work.

The recorder's own client (one a session makes when no live transport is given) is made before
the request is timed, and every such client shares one default TLS context per process, since
making one loads the certificate bundle (tens of milliseconds). Before this, a recording
session's first request paid for both inside its recorded times: a recorded time to the first
token was longer than the server's by that much (issue 26).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from pytest_toolnexus import CassetteSession, LiveTransport, TransportRequest
from pytest_toolnexus._bridges import live as live_module
from pytest_toolnexus._session import record as record_module
from tests.support.servers import Fixed, LoopbackServer

JSON = [("Content-Type", "application/json")]
SLOW_CLIENT = 10.0  # seconds a made client "takes" on the recorder's clock


class FakeClock:
    """The recorder's monotonic clock, moved only by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def slow_clients(monkeypatch):
    """Making an httpx client moves the recorder's clock by SLOW_CLIENT seconds; nothing else
    does, so a recorded time is at least that only if a client was made while it was timed."""
    clock = FakeClock()
    monkeypatch.setattr(record_module, "real_monotonic", clock)
    for cls in (httpx.Client, httpx.AsyncClient):
        made = cls.__init__

        def slow(self, *args, _made=made, **kwargs):
            _made(self, *args, **kwargs)
            clock.now += SLOW_CLIENT

        monkeypatch.setattr(cls, "__init__", slow)
    return clock


@pytest.fixture
def server():
    with LoopbackServer(Fixed(200, JSON, b'{"ok": true}')) as running:
        yield running


def test_a_recording_sessions_first_request_is_timed_without_making_its_client(
    tmp_path, server, slow_clients
):
    with CassetteSession(tmp_path / "c.msgpack", record="all") as session:
        session.transport(TransportRequest("POST", server.url("/v1/x"), body={"n": 1}))
        (interaction,) = session.recorded

    assert interaction.response is not None
    assert interaction.response.t_headers < SLOW_CLIENT * 1000  # ms
    assert interaction.response.body.value == {"ok": True}


def test_an_async_recording_is_timed_without_making_its_client(tmp_path, server, slow_clients):
    async def main():
        async with CassetteSession(tmp_path / "c.msgpack", record="all") as session:
            request = TransportRequest("POST", server.url("/v1/x"), body={"n": 1})
            await session.async_transport(request)
            return session.recorded

    (interaction,) = asyncio.run(main())

    assert interaction.response.t_headers < SLOW_CLIENT * 1000


def test_a_bridged_recording_is_timed_without_making_its_client(tmp_path, server, slow_clients):
    with CassetteSession(tmp_path / "c.msgpack", record="all") as session:
        bridge = session.http_transport()
        slow_clients.now = 0.0  # the clients made so far are not the recorder's
        with httpx.Client(transport=bridge) as client:
            assert client.post(server.url("/v1/x"), json={"n": 1}).json() == {"ok": True}
        (interaction,) = session.recorded

    assert interaction.response.t_headers < SLOW_CLIENT * 1000


def test_the_clients_a_live_transport_makes_share_one_tls_context(monkeypatch, server):
    made = []
    original = httpx.create_ssl_context

    def counting(*args, **kwargs):
        made.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(httpx, "create_ssl_context", counting)
    monkeypatch.setattr(live_module, "_tls_made", {})
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    request = TransportRequest("POST", server.url("/v1/x"), body={"n": 1})

    for _ in range(3):
        with LiveTransport() as transport:
            assert transport(request).status == 200

    assert len(made) == 1


def test_another_certificate_bundle_gets_a_context_of_its_own(monkeypatch, tmp_path):
    import certifi

    monkeypatch.setattr(live_module, "_tls_made", {})
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    default = live_module.default_tls()
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(Path(certifi.where()).read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))

    assert live_module.default_tls() is not default
    assert live_module.default_tls() is live_module.default_tls()
    monkeypatch.delenv("SSL_CERT_FILE")
    assert live_module.default_tls() is default


def test_a_live_transport_given_a_client_makes_none_when_prepared(server, monkeypatch):
    with httpx.Client() as given:
        transport = LiveTransport(given)

        def refused(*args, **kwargs):
            raise AssertionError("a LiveTransport given a client made one of its own")

        monkeypatch.setattr(httpx, "Client", refused)
        monkeypatch.setattr(httpx, "AsyncClient", refused)
        transport.prepare()
        transport.prepare(asynchronous=True)
        assert transport(TransportRequest("GET", server.url("/"))).status == 200


def test_a_session_that_may_record_makes_no_client_for_requests_it_replays(
    tmp_path, server, monkeypatch
):
    path = tmp_path / "c.msgpack"
    request = TransportRequest("POST", server.url("/v1/x"), body={"n": 1})
    with CassetteSession(path, record="all") as recording:
        recording.transport(request)

    def refused(*args, **kwargs):
        raise AssertionError("a client was made for a request the cassette answers")

    monkeypatch.setattr(httpx, "Client", refused)
    with CassetteSession(path, record="new") as session:
        assert session.transport(request).status == 200

    assert session.play_count == 1
