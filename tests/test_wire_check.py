"""The wire check: a request body no JSON encoder would send is refused before it is matched.

NaN, Infinity, -Infinity and integers beyond 2**53 (at any depth) raise ``WireCheckError``
naming the path in the body and the fix. ``wire_check=False`` turns the check off, and the
request then replays or misses like any other. 2**53 itself is fine.
"""

import asyncio
import math

import pytest

from pytest_toolnexus import (
    Cassette,
    CassetteMissError,
    CassetteSession,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    TransportRequest,
    TransportResponse,
    WireCheckError,
)
from pytest_toolnexus._store.cassette import JsonBody

URL = "https://api.example.invalid/v1/chat/completions"
JSON = Headers([("content-type", "application/json")])


def interaction(body, answer):
    return Interaction(
        RecordedRequest("POST", URL, JSON, JsonBody(body)),
        RecordedResponse(200, JSON, JsonBody(answer)),
    )


@pytest.fixture
def path(tmp_path):
    path = tmp_path / "wire.msgpack"
    Cassette(
        path,
        [
            interaction({"model": "m", "temperature": 0.5}, {"n": "ok"}),
            interaction({"model": "m", "seed": 2**60}, {"n": "big"}),
            interaction({"model": "m", "temperature": math.nan}, {"n": "nan"}),
            interaction({"model": "m", "seed": 2**53, "floor": -(2**53)}, {"n": "edge"}),
        ],
    ).save()
    return path


def post(transport, body, url=URL):
    return transport(TransportRequest("POST", url, JSON, body)).body


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (math.nan, "nan"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (2**53 + 1, str(2**53 + 1)),
        (-(2**53) - 1, str(-(2**53) - 1)),
        (2**64, str(2**64)),
    ],
)
def test_a_value_no_wire_carries_is_refused_with_its_path_and_the_fix(path, value, shown):
    replay_session = CassetteSession(path, on_unused="ignore")
    replay = replay_session.transport

    with pytest.raises(WireCheckError) as caught:
        post(replay, {"model": "m", "temperature": value})

    message = str(caught.value)
    assert f"root['temperature'] is {shown}" in message
    assert ("not JSON" in message) if isinstance(value, float) else ("beyond 2**53" in message)
    assert "Fix the value, or turn the check off with wire_check=False" in message
    assert f"POST {URL}" in message
    assert isinstance(caught.value, ValueError)
    # Refused before matching: nothing was played, so the good request still replays.
    assert replay_session.requests == []
    assert post(replay, {"model": "m", "temperature": 0.5}) == {"n": "ok"}


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (
            {"messages": [{"content": "x", "logprobs": [0.1, math.nan]}]},
            "root['messages'][0]['logprobs'][1]",
        ),
        ({"tools": [{"parameters": {"max": 2**53 + 1}}]}, "root['tools'][0]['parameters']['max']"),
        ([1, [2, [3, -math.inf]]], "root[1][1][1]"),
        (math.inf, "root"),
    ],
)
def test_nested_values_are_found_and_named(path, body, where):
    replay_session = CassetteSession(path, on_unused="ignore")
    replay = replay_session.transport

    with pytest.raises(WireCheckError, match=r"cannot be sent: ") as caught:
        post(replay, body)

    assert f"{where} is " in str(caught.value)


def test_the_url_in_the_message_is_redacted(path):
    replay_session = CassetteSession(path, on_unused="ignore")
    replay = replay_session.transport
    key = "AIza" + "w" * 35

    with pytest.raises(WireCheckError) as caught:
        post(replay, {"temperature": math.nan}, url=f"{URL}?key={key}")

    assert key not in str(caught.value)
    assert "key=REDACTED" in str(caught.value)


def test_two_to_the_53_itself_passes(path):
    replay_session = CassetteSession(path, on_unused="ignore")
    replay = replay_session.transport

    assert post(replay, {"model": "m", "seed": 2**53, "floor": -(2**53)}) == {"n": "edge"}


@pytest.mark.parametrize("body", [{"seed": 2**53 - 7}, {"flag": True}, {"x": 1e308}, [-0.0]])
def test_values_a_wire_carries_pass_the_check_and_then_miss_normally(path, body):
    replay_session = CassetteSession(path, on_unused="ignore")
    replay = replay_session.transport

    with pytest.raises(CassetteMissError):
        post(replay, body)


def test_wire_check_off_lets_the_request_replay(path):
    replay_session = CassetteSession(path, on_unused="ignore", wire_check=False)
    replay = replay_session.transport

    assert post(replay, {"model": "m", "seed": 2**60}) == {"n": "big"}
    assert post(replay, {"model": "m", "temperature": math.nan}) == {"n": "nan"}


def test_wire_check_off_lets_an_unrecorded_request_miss_normally(path):
    replay_session = CassetteSession(path, on_unused="ignore", wire_check=False)
    replay = replay_session.transport

    with pytest.raises(CassetteMissError) as caught:
        post(replay, {"model": "m", "temperature": math.inf})

    assert "No recorded interaction matches POST" in str(caught.value)


def test_a_recording_session_refuses_before_the_network(tmp_path):
    calls = []

    def live(request):
        calls.append(request)
        return TransportResponse(200, JSON, {"ok": True})

    session = CassetteSession(tmp_path / "rec.msgpack", record="all", live=live, timing="instant")
    with pytest.raises(WireCheckError, match=r"root\['top_p'\] is nan"):
        post(session.transport, {"top_p": math.nan})
    session.close()

    assert calls == []
    assert not (tmp_path / "rec.msgpack").exists()


def test_the_async_transport_checks_too(path):
    session = CassetteSession(path, record="none", on_unused="ignore")

    async def send(body):
        request = TransportRequest("POST", URL, JSON, body)
        return (await session.async_transport(request)).body

    with pytest.raises(WireCheckError, match=r"root\['n'\] is 9007199254740993"):
        asyncio.run(send({"n": 2**53 + 1}))
    assert asyncio.run(send({"model": "m", "temperature": 0.5})) == {"n": "ok"}
