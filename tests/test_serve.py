"""``pytest-toolnexus serve``: cassettes replayed over loopback HTTP, matched as in pytest.

Each test starts the command as a process of its own and talks to it over loopback with a
plain HTTP client, as a client in another language would.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from pytest_toolnexus import CassetteMissError, CassetteSession, build
from pytest_toolnexus._seam.transport import TransportRequest
from tests.support.serve_cli import log_file, serving, start_serve

CHAT = "https://api.openai.com/v1/chat/completions"
ASKED = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}
MISS_STATUS = 490


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder of built cassettes: a chat answer, a stream, an Ollama NDJSON stream."""
    root = tmp_path / "cassettes"
    build.build_cassette(
        root / "chat" / "hello.msgpack",
        [build.openai_chat("Hello there.", stream=False, request_body=ASKED)],
    )
    build.build_cassette(
        root / "chat" / "bye.msgpack",
        [build.openai_chat("Goodbye.", stream=False, request_body=ASKED)],
    )
    build.build_cassette(
        root / "stream.msgpack",
        [
            build.openai_chat(
                "one two three four", cadence=build.Cadence(ttft=0.3, gap=0.2), request_body=None
            )
        ],
    )
    build.build_cassette(
        root / "ollama.msgpack",
        [build.ollama_chat("a b c", cadence=build.Cadence(ttft=0.1, gap=0.1))],
    )
    return root


def _sse_data(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]


def test_the_url_is_printed_on_one_line_written_to_the_url_file_and_sigint_stops_it(
    folder: Path, tmp_path: Path
):
    url_file = tmp_path / "run" / "url"
    served = start_serve([folder], "--url-file", str(url_file))

    assert url_file.read_text() == served.url + "\n"
    assert served.url.startswith("http://127.0.0.1:")
    assert httpx.get(served.url + "/_toolnexus/health").json() == {"ok": True, "cassettes": 4}
    code, _ = served.stop(signal.SIGINT)
    assert code == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(served.url + "/_toolnexus/health")


def test_a_cassette_is_chosen_by_path_prefix_or_by_header(folder: Path):
    with serving([folder]) as served:
        by_path = httpx.post(f"{served.url}/c/chat/hello/v1/chat/completions", json=ASKED)
        by_header = httpx.post(
            f"{served.url}/v1/chat/completions",
            json=ASKED,
            headers={"x-toolnexus-cassette": "chat/bye"},
        )

    assert by_path.status_code == 200
    assert by_path.json()["choices"][0]["message"]["content"] == "Hello there."
    assert by_path.headers["content-type"] == "application/json"
    assert by_header.json()["choices"][0]["message"]["content"] == "Goodbye."


def test_each_interaction_plays_once_unless_repeats_are_allowed(folder: Path):
    with serving([folder / "chat" / "hello.msgpack"]) as served:
        url = f"{served.url}/c/hello/v1/chat/completions"
        first, second = httpx.post(url, json=ASKED), httpx.post(url, json=ASKED)
    with serving([folder / "chat" / "hello.msgpack"], "--allow-repeats") as served:
        url = f"{served.url}/c/hello/v1/chat/completions"
        repeated = [httpx.post(url, json=ASKED).status_code for _ in range(3)]

    assert first.status_code == 200
    assert second.status_code == MISS_STATUS
    assert "already played" in second.json()["error"]["message"]
    assert repeated == [200, 200, 200]


def test_a_miss_answers_490_with_the_message_pytest_gives_and_logs_it(folder: Path):
    sent = {**ASKED, "messages": [{"role": "user", "content": "Bye"}]}
    with serving([folder]) as served:
        answer = httpx.post(f"{served.url}/c/chat/hello/v1/chat/completions", json=sent)
        code, err = served.stop()
    session = CassetteSession(folder / "chat" / "hello.msgpack")
    with pytest.raises(CassetteMissError) as in_pytest:
        session.transport(TransportRequest("POST", CHAT, body=sent))

    assert answer.status_code == MISS_STATUS
    assert answer.headers["x-should-retry"] == "false"
    error = answer.json()["error"]
    assert error["type"] == "toolnexus_miss"
    assert error["cassette"] == "chat/hello"
    assert error["message"] == str(in_pytest.value)
    assert "root['messages'][0]['content']: recorded 'Hi', sent 'Bye'" in error["message"]
    assert code == 0
    assert "No recorded interaction matches POST " + CHAT in err


def test_a_request_that_names_no_served_cassette_is_told_which_are(folder: Path):
    with serving([folder]) as served:
        nowhere = httpx.post(f"{served.url}/c/chat/nope/v1/chat/completions", json=ASKED)
        unnamed = httpx.post(f"{served.url}/v1/chat/completions", json=ASKED)

    assert nowhere.status_code == unnamed.status_code == MISS_STATUS
    message = nowhere.json()["error"]["message"]
    assert "the path /c/chat/nope/v1/chat/completions names no served cassette" in message
    assert "chat/bye, chat/hello, ollama, stream" in message
    assert "the request names no cassette" in unnamed.json()["error"]["message"]


def test_a_key_in_the_query_of_a_request_that_names_no_cassette_reaches_nothing(
    folder: Path, tmp_path: Path
):
    key = "sk-query-0123456789abcdef"
    report_file = tmp_path / "report.json"
    with serving([folder], "--report-file", str(report_file)) as served:
        answers = [
            httpx.post(f"{served.url}/c/chat/nope/v1/chat/completions?key={key}", json=ASKED),
            httpx.post(f"{served.url}/v1/chat/completions?key={key}&alt=sse", json=ASKED),
            httpx.post(
                f"{served.url}/v1/chat/completions?api_key={key}",
                json=ASKED,
                headers={"x-toolnexus-cassette": "chat/nope"},
            ),
        ]
        report = httpx.get(f"{served.url}/_toolnexus/report").text
        code, err = served.stop()

    assert [a.status_code for a in answers] == [MISS_STATUS] * 3
    assert (
        "POST /v1/chat/completions?key=REDACTED&alt=sse: the request names no cassette"
        in (answers[1].json()["error"]["message"])
    )
    assert code == 0
    assert err.count("names no") + err.count("header names") == 3
    assert json.loads(report)["unrouted"] == json.loads(report_file.read_text())["unrouted"]
    assert len(json.loads(report)["unrouted"]) == 3
    for where in (*(a.text for a in answers), err, report, report_file.read_text()):
        assert key not in where


def _arrivals(url: str, body: object) -> list[tuple[float, str]]:
    """Each non-empty line of a streamed answer with the seconds since the request was sent."""
    start = time.perf_counter()
    found = []
    with httpx.stream("POST", url, json=body, timeout=30) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line:
                found.append((time.perf_counter() - start, line))
    return found


def test_a_stream_arrives_at_the_recorded_offsets_divided_by_speed(folder: Path):
    recorded = [0.3, 0.5, 0.7, 0.9]  # the four words; then the finish, usage and [DONE]
    with serving([folder]) as served:
        real = _arrivals(f"{served.url}/c/stream/v1/chat/completions", ASKED)
    with serving([folder], "--speed", "4") as served:
        fast = _arrivals(f"{served.url}/c/stream/v1/chat/completions", ASKED)
    with serving([folder], "--timing", "instant") as served:
        instant = _arrivals(f"{served.url}/c/stream/v1/chat/completions", ASKED)

    words = [json.loads(line[6:])["choices"][0]["delta"].get("content") for _, line in real[1:5]]
    assert words == ["one ", "two ", "three ", "four"]
    # Judged so that a loaded machine cannot fail it (how late is a speed figure, for
    # benchmarks/): never early, in order, and each pace told apart by a wide margin.
    for arrivals, speed in ((real, 1.0), (fast, 4.0)):
        times = [t for t, _ in arrivals[1:5]]
        for got, due in zip(times, recorded, strict=True):
            assert got >= due / speed - 0.005, (speed, times)  # never early
        assert times == sorted(times), (speed, times)
    words_at = [t for t, _ in real[1:5]]
    # Spread out, not held back and sent together: the first word came before the last was due.
    assert words_at[0] < recorded[-1], words_at
    # --speed 4 and instant end before recorded pace lets the last word go (0.9 s): neither is
    # paced as real is.
    assert fast[4][0] < recorded[-1], fast
    assert instant[-1][0] < recorded[-1], instant
    assert [line for _, line in instant] == [line for _, line in real]


def test_ndjson_lines_go_out_one_by_one(folder: Path):
    with serving([folder]) as served:
        lines = _arrivals(f"{served.url}/c/ollama/api/chat", {"model": "llama3.2"})

    texts = [json.loads(line)["message"]["content"] for _, line in lines[:-1]]
    assert "".join(texts) == "a b c"
    times = [got for got, _ in lines]
    for got, due in zip(times, [0.1, 0.2, 0.3, 0.4], strict=True):
        assert got >= due - 0.005, lines  # never early (how late is for benchmarks/)
    assert times == sorted(times), lines
    assert times[0] < 0.4, lines  # one by one: the first came before the last was due


def test_the_matching_options_are_the_markers(folder: Path):
    other = {**ASKED, "messages": [{"role": "user", "content": "Something else"}]}
    url_of = "{}/c/chat/hello/v1/chat/completions".format
    with serving([folder]) as served:
        strict = httpx.post(url_of(served.url), json=other)
    with serving([folder], "--ignore-body", "messages.0.content") as served:
        ignored = httpx.post(url_of(served.url), json=other)
    with serving([folder], "--match-on", "vcrpy") as served:
        by_url = httpx.post(url_of(served.url), json={"anything": True})

    assert strict.status_code == MISS_STATUS
    assert "ignore_body=['messages.0.content']" in strict.json()["error"]["message"]
    assert ignored.json()["choices"][0]["message"]["content"] == "Hello there."
    assert by_url.json()["choices"][0]["message"]["content"] == "Hello there."


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "example.com"])
@pytest.mark.parametrize("command", ["serve", "record"])
def test_a_host_other_machines_reach_is_refused_without_allow_remote(
    folder: Path, tmp_path: Path, command: str, host: str
):
    given = [str(folder)] if command == "serve" else ["--upstream", "http://127.0.0.1:9"]
    if command == "record":
        given += ["--out", str(tmp_path / "out.msgpack")]
    done = subprocess.run(
        [sys.executable, "-m", "pytest_toolnexus", command, *given, "--host", host],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("usage: ")
    assert f"{command}: --host {host} is not a loopback address" in done.stderr
    assert "POST /_toolnexus/load" in done.stderr
    assert "pass --allow-remote" in done.stderr


def test_allow_remote_lets_serve_listen_beyond_loopback_and_loopback_names_need_nothing(
    folder: Path,
):
    with serving([folder], "--host", "0.0.0.0", "--allow-remote") as served:
        port = served.url.rsplit(":", 1)[1]
        remote = httpx.get(f"http://127.0.0.1:{port}/_toolnexus/health").json()
    with serving([folder], "--host", "localhost") as served:
        local = httpx.get(served.url + "/_toolnexus/health").json()

    assert remote == local == {"ok": True, "cassettes": 4}


def _imported_by(command: list[str], asks: Callable[[str], None]) -> set[str]:
    """The modules a ``pytest-toolnexus`` process imported from its launch through ``asks``
    (given its URL) to its shutdown, as ``python -X importtime`` lists them."""
    log = log_file()
    with log.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "pytest_toolnexus", *command],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://"), log.read_text()
        asks(url)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0, log.read_text()
    lines = log.read_text().splitlines()
    shutil.rmtree(log.parent)
    return {line.split("|")[2].strip() for line in lines if line.startswith("import time:")}


def test_serve_imports_neither_httpx_nor_the_recorder_from_launch_through_its_answers(
    folder: Path,
):
    # A replay-only server never sends a request, writes a cassette or patches a clock, so
    # none of the modules that do are worth their start-up time (docs/serve.md, "Launch").
    def asks(url: str) -> None:
        with urllib.request.urlopen(f"{url}/_toolnexus/health") as health:
            assert json.load(health)["ok"]
        chat = f"{url}/c/chat/hello/v1/chat/completions"
        request = urllib.request.Request(
            chat, data=json.dumps(ASKED).encode(), headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(request) as answer:
            assert json.load(answer)["choices"][0]["message"]["content"] == "Hello there."
        stream = f"{url}/c/stream/v1/chat/completions"
        with urllib.request.urlopen(urllib.request.Request(stream, data=b"{}")) as streamed:
            assert b"data: [DONE]" in streamed.read()

    imported = _imported_by(["serve", str(folder)], asks)

    assert "pytest_toolnexus._session.session" in imported  # it did replay
    unneeded = {
        "httpx",
        "httpx2",
        "pytest_toolnexus._bridges.live",
        "pytest_toolnexus._session.record",
        "pytest_toolnexus._store.recording",
        "pytest_toolnexus._timing.timepatch",
        "anyio._backends._asyncio",
    }
    assert imported & unneeded == set()


def test_record_forwards_through_aiohttp_s_client_not_httpx(tmp_path: Path):
    # The recording proxy's own client is aiohttp's, already loaded by its server: httpx's
    # async client cost milliseconds before each first byte (benchmark 11c).
    imported = _imported_by(
        ["record", "--upstream", "http://127.0.0.1:9", "--out", str(tmp_path / "o.msgpack")],
        lambda url: None,
    )

    assert "pytest_toolnexus._session.record" in imported
    assert imported & {"httpx", "httpx2", "pytest_toolnexus._bridges.live"} == set()
