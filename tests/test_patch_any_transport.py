"""httpx and httpx2 clients built with any transport are served; in-process ones are left alone."""

from tests.support.plugin_projects import emulator  # noqa: F401  (a fixture)

pytest_plugins = ["pytester"]

TESTS = """
import os

import httpx
import httpx2
import pytest

BASE = os.environ["EMULATOR_URL"]
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class Subclass(httpx2.HTTPTransport):
    def handle_request(self, request):
        request.headers["x-custom"] = "1"
        return super().handle_request(request)


class Wrapper(httpx.AsyncBaseTransport):
    def __init__(self):
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request):
        return await self._inner.handle_async_request(request)


@pytest.mark.cassette
def test_a_subclass_overriding_handle_request(cassette):
    with httpx2.Client(transport=Subclass()) as client:
        reply = client.post(BASE + "/v1/chat/completions", json=BODY)
    assert reply.status_code == 200
    assert len(cassette.requests) == 1


@pytest.mark.cassette
@pytest.mark.anyio
async def test_a_transport_of_its_own(cassette):
    async with httpx.AsyncClient(transport=Wrapper()) as client:
        reply = await client.post(BASE + "/v1/chat/completions", json=BODY)
    assert reply.json()["object"] == "chat.completion"
    assert len(cassette.requests) == 1


@pytest.mark.cassette
def test_a_mock_transport_is_left_alone(cassette):
    mock = httpx.MockTransport(lambda request: httpx.Response(200, json={"mocked": True}))
    with httpx.Client(transport=mock) as client:
        assert client.get(BASE + "/anything").json() == {"mocked": True}
    assert cassette.requests == []


@pytest.fixture
def anyio_backend():
    return "asyncio"
"""


def test_any_transport_records_then_replays_and_mock_transport_stays_mocked(
    pytester,
    emulator,  # noqa: F811
):
    pytester.makepyfile(test_any=TESTS)

    recorded = pytester.runpytest_subprocess("--cassette-record=once", "-p", "no:randomly")
    recorded.assert_outcomes(passed=3)
    assert len(emulator.requests) == 2
    assert emulator.requests[0].header("x-custom") == "1"  # the subclass's own send recorded
    emulator.stop()
    replayed = pytester.runpytest_subprocess("-p", "no:randomly")

    replayed.assert_outcomes(passed=3)
    replayed.stdout.fnmatch_lines(["*cassettes: 3 used, 2 replayed, 0 recorded*"])
