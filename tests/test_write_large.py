"""Recording ``new`` into a large cassette (issue 23, row 7): what it held is written back byte
for byte, the new interaction after it, and nothing secret.

The write merges what the session read when it opened instead of reading the file again, and
encodes the cassette as it writes it; ``check`` reads a file one interaction at a time. What a
user sees must not change: the old interactions' bytes, another writer's interactions written
meanwhile, a secret already in the file refused at the write and by ``check``. What this costs
in memory and time is measured in benchmarks/bench_write.py (benchmark 9), not here.
"""

import io
import json
import random

import msgpack
import pytest

from pytest_toolnexus import (
    Cassette,
    CassetteSession,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    SecretFoundError,
    TransportRequest,
    build,
    load_cassette,
)
from pytest_toolnexus._cli.check import check
from pytest_toolnexus._store.cassette import JsonBody
from tests.support.servers import Fixed, LoopbackServer

OLD = 1_500
URL = "https://api.openai.com/v1/chat/completions"
KEY = "sk-proj-" + "Vq3Lm8Zr2Tx6" * 4
WORDS = ["alpha", "bravo", "cache", "delta", "kernel", "matrix", "orbit", "quorum", "replay"]


def old_interactions():
    """Chat answers of a few KB, each request distinct, and three long streams among them."""
    rng = random.Random(7)
    made = []
    for i in range(OLD):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(200, 500)))
        made.append(
            Interaction(
                RecordedRequest(
                    "POST",
                    URL,
                    Headers([("content-type", "application/json")]),
                    JsonBody({"model": "gpt-4o-mini", "messages": [{"content": f"Q{i}"}]}),
                ),
                RecordedResponse(
                    200,
                    Headers([("x-request-id", f"req_{i:032x}")]),
                    JsonBody({"id": f"c{i}", "choices": [{"message": {"content": text}}]}),
                    250.0,
                    251.5,
                ),
            )
        )
    for n, at in enumerate((10, 700, 1400)):
        words = " ".join(rng.choice(WORDS) for _ in range(1_500))
        made.insert(at, build.openai_chat(words, request_body={"stream": True, "n": n}))
    return made


def stored(data):
    """The bytes of each interaction in an encoded cassette, as they lie in it."""
    unpacker = msgpack.Unpacker(io.BytesIO(data), raw=False, max_buffer_size=len(data))
    for _ in range(unpacker.read_map_header()):
        if unpacker.unpack() != "interactions":
            unpacker.skip()
            continue
        pieces = []
        for _ in range(unpacker.read_array_header()):
            start = unpacker.tell()
            unpacker.skip()
            pieces.append(data[start : unpacker.tell()])
        return pieces
    raise AssertionError("no interactions")


@pytest.fixture(scope="module")
def made():
    return old_interactions()


@pytest.fixture
def server():
    body = json.dumps({"id": "new", "choices": [{"message": {"content": "the newest"}}]})
    with LoopbackServer(Fixed(200, [("Content-Type", "application/json")], body.encode())) as up:
        yield up


PROJECT_TEST = """
import os

import httpx
import pytest


@pytest.mark.cassette
def test_one_more(cassette):
    with httpx.Client() as client:
        answer = client.post(
            os.environ["MODEL_URL"],
            headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
            json={"model": "gpt-4o-mini", "messages": [{"content": "one more"}]},
        )
    assert answer.json()["choices"][0]["message"]["content"] == "the newest"
    assert not cassette.requests[0].replayed
"""


def test_recording_new_into_a_large_cassette_keeps_every_old_interaction_byte_for_byte(
    pytester, monkeypatch, made, server
):
    # Given a cassette of 1,503 interactions, and a key in the environment
    path = pytester.path / "cassettes" / "test_more" / "test_one_more.msgpack"
    Cassette(path, made, {"clock_epoch": 1732000000.0}).save()
    before = path.read_bytes()
    monkeypatch.setenv("MODEL_URL", server.url("/v1/chat/completions"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    pytester.makepyfile(test_more=PROJECT_TEST)

    # When a test records one more request into it
    result = pytester.runpytest("--cassette-record=new", "-p", "no:randomly")

    # Then it is written after the old ones, which are byte for byte what they were
    result.assert_outcomes(passed=1)
    after = path.read_bytes()
    old, new = stored(before), stored(after)
    assert len(new) == OLD + 4
    assert new[:-1] == old
    (added,) = load_cassette(path).interactions[-1:]
    assert added.request.body.value == {
        "model": "gpt-4o-mini",
        "messages": [{"content": "one more"}],
    }
    assert added.request.headers["authorization"] == "REDACTED"
    # and the key is nowhere in the file, which check passes
    assert KEY.encode() not in after
    out = io.StringIO()
    assert check([path], [], out) == 0, out.getvalue()
    assert f"({OLD + 4} interactions)" in out.getvalue()


def ask(session, server, question):
    session.transport(
        TransportRequest(
            "POST",
            server.url("/v1/chat/completions"),
            headers={"content-type": "application/json"},
            body={"q": question},
        )
    )


def test_what_another_writer_added_while_a_session_recorded_is_kept(tmp_path, made, server):
    path = tmp_path / "shared.msgpack"
    Cassette(path, made[:200]).save()
    first = CassetteSession(path, record="new", timing="instant", on_unused="ignore")
    ask(first, server, "first")
    # Another session opens the same file, records and writes before the first one does.
    other = CassetteSession(path, record="new", timing="instant", on_unused="ignore")
    ask(other, server, "other")
    other.close()
    first.close()
    questions = [i.request.body.value.get("q") for i in load_cassette(path).interactions[200:]]
    assert questions == ["other", "first"]
    assert stored(path.read_bytes())[:200] == stored(Cassette(path, made[:200]).to_bytes())


def test_a_secret_already_in_a_large_cassette_refuses_the_write_and_check_names_it(
    tmp_path, made, server
):
    # A file written without the gate (by hand, by another tool, by an older rule set)
    path = tmp_path / "leaky.msgpack"
    leaky = list(made)
    leaky[900] = Interaction(
        leaky[900].request,
        RecordedResponse(200, Headers(), JsonBody({"note": f"the key is {KEY}"})),
    )
    Cassette(path, leaky).save(unsafe_verbatim=True)
    before = path.read_bytes()

    session = CassetteSession(path, record="new", timing="instant", on_unused="ignore")
    ask(session, server, "more")
    with pytest.raises(SecretFoundError) as raised:
        session.close()
    assert "interaction #900, response.body.value['note']" in str(raised.value)
    assert KEY not in str(raised.value)
    assert path.read_bytes() == before

    out = io.StringIO()
    assert check([path], [], out) == 1
    assert "interaction #900, response.body.value['note']" in out.getvalue()
    assert KEY not in out.getvalue()
