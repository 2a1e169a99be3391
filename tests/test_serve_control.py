"""``serve``'s control API, and many clients on one server.

The server runs as its own process; the tests talk to it as a client in another language
would, over loopback.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import httpx
import pytest

from pytest_toolnexus import build, faults
from pytest_toolnexus._serve import fault_spec
from pytest_toolnexus._serve.app import write_atomically
from tests.support.serve_cli import serving

ASKED = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}
CHAT = "/v1/chat/completions"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "cassettes"
    build.build_cassette(
        root / "a.msgpack", [build.openai_chat("From a.", stream=False, request_body=ASKED)]
    )
    build.build_cassette(
        root / "b.msgpack", [build.openai_chat("From b.", stream=False, request_body=ASKED)]
    )
    build.build_cassette(
        root / "stream.msgpack",
        [build.openai_chat("one two three", cadence=build.Cadence(ttft=0.05, gap=0.05))],
    )
    return root


def _text(response: httpx.Response) -> str:
    content: str = response.json()["choices"][0]["message"]["content"]
    return content


def test_the_report_lists_what_was_played_left_unused_and_missed(folder: Path):
    with serving([folder]) as served:
        httpx.post(f"{served.url}/c/a{CHAT}", json=ASKED)
        httpx.post(f"{served.url}/c/a{CHAT}", json=ASKED)  # already played: a miss
        report = httpx.get(f"{served.url}/_toolnexus/report", params={"cassette": "a"}).json()
        listed = httpx.get(f"{served.url}/_toolnexus/cassettes").json()["cassettes"]

    assert report["played"] == 1
    assert report["unused"] == []
    assert len(report["misses"]) == 1
    assert "already played" in report["misses"][0]
    assert [(r["status"], r["replayed"]) for r in report["requests"]] == [(200, True)]
    b = next(c for c in listed if c["name"] == "b")
    assert b["unused"] == ["#0 POST https://api.openai.com/v1/chat/completions"]
    assert b["played"] == 0


def test_reset_plays_a_cassette_from_the_start_and_leaves_the_others_alone(folder: Path):
    with serving([folder]) as served:
        for name in ("a", "b"):
            httpx.post(f"{served.url}/c/{name}{CHAT}", json=ASKED)
        reset = httpx.post(f"{served.url}/_toolnexus/reset", json={"cassette": "a"})
        again_a = httpx.post(f"{served.url}/c/a{CHAT}", json=ASKED)
        again_b = httpx.post(f"{served.url}/c/b{CHAT}", json=ASKED)
        unknown = httpx.post(f"{served.url}/_toolnexus/reset", json={"cassette": "zz"})

    assert reset.json() == {"reset": ["a"]}
    assert again_a.status_code == 200
    assert _text(again_a) == "From a."
    assert again_b.status_code == 490
    assert unknown.status_code == 404
    assert "no cassette 'zz' is served; served: a, b, stream" in unknown.json()["error"]


def test_load_serves_more_cassettes_while_running(folder: Path, tmp_path: Path):
    extra = tmp_path / "more" / "c.msgpack"
    build.build_cassette(extra, [build.openai_chat("From c.", stream=False)])
    with serving([folder / "a.msgpack"]) as served:
        before = httpx.post(f"{served.url}/c/c{CHAT}", json=ASKED)
        loaded = httpx.post(f"{served.url}/_toolnexus/load", json={"paths": [str(extra)]})
        after = httpx.post(f"{served.url}/c/c{CHAT}", json=ASKED)
        clash = httpx.post(
            f"{served.url}/_toolnexus/load",
            json={"paths": [str(folder / "b.msgpack"), str(tmp_path / "b.msgpack")]},
        )
        missing = httpx.post(f"{served.url}/_toolnexus/load", json={"paths": [str(tmp_path / "x")]})

    assert before.status_code == 490
    assert loaded.json() == {"loaded": ["c"]}
    assert _text(after) == "From c."
    assert missing.status_code == 400
    assert "is neither a cassette file nor a folder" in missing.json()["error"]
    assert clash.status_code == 400


def test_a_prepended_429_derived_from_the_recording_then_the_recorded_answer(folder: Path):
    with serving([folder]) as served:
        asked = httpx.post(
            f"{served.url}/_toolnexus/faults",
            json={
                "cassette": "a",
                "faults": [{"kind": "prepend", "status": 429, "retry_after": "1"}],
            },
        )
        first = httpx.post(f"{served.url}/c/a{CHAT}", json=ASKED)
        second = httpx.post(f"{served.url}/c/a{CHAT}", json=ASKED)
        report = httpx.get(f"{served.url}/_toolnexus/report", params={"cassette": "a"}).json()

    assert asked.status_code == 200
    assert first.status_code == 429
    assert first.headers["retry-after"] == "1"
    assert first.json() == faults.error_body(429, "https://api.openai.com/v1/chat/completions")
    assert _text(second) == "From a."
    assert [r["faults"] for r in report["requests"]] == [["prepended 429, Retry-After: 1"], []]


def test_a_disconnect_fault_closes_the_connection_mid_stream(folder: Path):
    with serving([folder]) as served:
        httpx.post(
            f"{served.url}/_toolnexus/faults",
            json={"cassette": "stream", "faults": [{"kind": "disconnect", "after_event": 2}]},
        )
        got: list[str] = []

        def read() -> None:
            with httpx.stream("POST", f"{served.url}/c/stream{CHAT}", json=ASKED) as response:
                got.extend(line for line in response.iter_lines() if line)

        with pytest.raises(httpx.RemoteProtocolError):
            read()
        after = httpx.post(f"{served.url}/c/a{CHAT}", json=ASKED)

    assert len(got) == 2
    assert after.status_code == 200  # the server goes on serving


@pytest.mark.parametrize(
    ("faults", "said"),
    [
        ([{"kind": "explode"}], "no fault is called 'explode'"),
        ([{"kind": "prepend", "status": 700}], "status 700 is not an HTTP status"),
        ([{"kind": "prepend", "nth": None}], "nth must be a whole number, got None"),
        ([{"kind": "prepend", "status": "429"}], "(prepend): status must be a whole number"),
        ([{"kind": "prepend", "headers": {"x": 1}}], "headers must be a mapping of strings"),
        ([{"kind": "stall"}], "fault 0 (stall) needs seconds"),
        ([{"kind": "disconnect", "after_event": 1, "when": 2}], "takes no when; it takes "),
        ([{"kind": "rechunk", "mode": "words"}], "rechunk mode 'words'"),
        ([{"kind": "stall", "seconds": "2"}], "seconds must be a number of seconds, got '2'"),
        ([{"kind": "read_timeout", "after_event": 1.5}], "after_event must be a whole number"),
        ([{"kind": "error_event", "after_event": 0, "style": "x"}], "style 'x' is not one of"),
        ([{"kind": "prepend"}, {"kind": "rechunk", "size": 0}], "fault 1 (rechunk): size"),
        ([], "non-empty list"),
    ],
)
def test_a_fault_that_cannot_be_made_is_refused_saying_why(folder: Path, faults: object, said: str):
    with serving([folder / "a.msgpack"]) as served:
        refused = httpx.post(
            f"{served.url}/_toolnexus/faults", json={"cassette": "a", "faults": faults}
        )
        still = httpx.post(f"{served.url}/c/a{CHAT}", json=ASKED)

    assert refused.status_code == 400
    assert said in refused.json()["error"]
    assert still.status_code == 200


def test_a_fault_asked_for_as_json_is_the_python_function_s_with_its_defaults(folder: Path):
    # rechunk's nth is None by default (every request it targets), as faults.rechunk() has it.
    made = fault_spec.faults_from(
        [{"kind": "rechunk", "mode": "bytes"}, {"kind": "stall", "seconds": 1}]
    )
    assert made == [faults.rechunk("bytes"), faults.stall(1)]

    with serving([folder], "--allow-repeats", "--timing", "instant") as served:
        httpx.post(
            f"{served.url}/_toolnexus/faults",
            json={"cassette": "stream", "faults": [{"kind": "rechunk", "mode": "bytes"}]},
        ).raise_for_status()
        for _ in range(2):
            httpx.post(f"{served.url}/c/stream{CHAT}", json=ASKED).raise_for_status()
        report = httpx.get(f"{served.url}/_toolnexus/report", params={"cassette": "stream"})

    assert [r["faults"] for r in report.json()["requests"]] == [["re-chunked (bytes)"]] * 2


def test_an_unknown_control_endpoint_lists_the_known_ones(folder: Path):
    with serving([folder]) as served:
        answer = httpx.get(f"{served.url}/_toolnexus/nothing")

    assert answer.status_code == 404
    assert "GET /_toolnexus/report" in answer.json()["error"]


def test_two_clients_on_two_cassettes_see_no_crosstalk(folder: Path):
    async def client(url: str, name: str, rounds: int) -> list[str]:
        seen = []
        async with aiohttp.ClientSession() as session:
            for _ in range(rounds):
                await session.post(f"{url}/_toolnexus/reset", json={"cassette": name})
                async with session.post(f"{url}/c/{name}{CHAT}", json=ASKED) as response:
                    seen.append((await response.json())["choices"][0]["message"]["content"])
        return seen

    async def both(url: str) -> tuple[list[str], list[str]]:
        a, b = await asyncio.gather(client(url, "a", 30), client(url, "b", 30))
        return a, b

    with serving([folder]) as served:
        seen_a, seen_b = asyncio.run(both(served.url))

    assert seen_a == ["From a."] * 30
    assert seen_b == ["From b."] * 30


def test_a_thousand_concurrent_short_requests_are_all_answered(folder: Path):
    async def flood(url: str) -> list[tuple[int, str]]:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def one(i: int) -> tuple[int, str]:
                name = "a" if i % 2 else "b"
                async with session.post(f"{url}/c/{name}{CHAT}", json=ASKED) as response:
                    body = await response.json()
                    return response.status, body["choices"][0]["message"]["content"]

            return await asyncio.gather(*(one(i) for i in range(1000)))

    with serving([folder], "--allow-repeats") as served:
        answers = asyncio.run(flood(served.url))
        report = httpx.get(f"{served.url}/_toolnexus/report").json()

    assert len(answers) == 1000
    assert answers.count((200, "From a.")) == 500
    assert answers.count((200, "From b.")) == 500
    played = {c["name"]: len(c["requests"]) for c in report["cassettes"]}
    assert played == {"a": 500, "b": 500, "stream": 0}


def test_a_write_that_fails_leaves_no_temporary_file_beside_its_target(tmp_path: Path):
    target = tmp_path / "report.json"
    target.mkdir()  # a folder where the file should go: the replace fails

    with pytest.raises(IsADirectoryError):
        write_atomically(target, "{}\n")

    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    assert target.is_dir()
