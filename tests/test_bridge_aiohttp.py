"""aiohttp served through the seam: google-genai's async client, unmodified, with aiohttp installed.

Each test runs a pytester project twice, as a user would: once recording against the loopback
emulator, then, with the emulator stopped, replaying. The project's test writes what it saw
(each chunk's text and arrival, on the virtual clock and on the real one) to a file, and the
assertions here compare the two runs with each other and with what the emulator sent.
"""

import json

import pytest

from tests.support.emulator import Emulator
from tests.support.plugin_projects import stored_times
from tests.support.realtime import assert_did_not_sleep, assert_stamped_in_flight

pytest_plugins = ["pytester"]

GENAI_TESTS = """
import asyncio
import json
import os
import time

import pytest
from google import genai

BASE = os.environ["EMULATOR_URL"]


def wall():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def client():
    made = genai.Client(api_key="test-key", http_options={"base_url": BASE})
    assert made._api_client._use_aiohttp(), "google-genai chose httpx, not aiohttp"
    return made


def report(name, cassette, **seen):
    sent = cassette.requests[0]
    seen.update(
        url=sent.url,
        replayed=sent.replayed,
        deliveries=[d - sent.sent_at for d in sent.deliveries],
        complete=sent.complete,
        requests=len(cassette.requests),
    )
    with open(os.environ["SEEN"], "a") as out:
        out.write(json.dumps({"test": name, **seen}) + "\\n")


@pytest.mark.cassette
def test_generate_content(cassette):
    async def main():
        reply = await client().aio.models.generate_content(model="gemini-test", contents="Hi")
        return reply.text, reply.candidates[0].finish_reason.name

    text, finish = asyncio.run(main())
    report("generate", cassette, texts=[text], finish=finish)


@pytest.mark.cassette
def test_generate_content_stream(cassette):
    async def main():
        texts, virtual, real, read_at = [], [], [], []
        before = wall()
        stream = await client().aio.models.generate_content_stream(
            model="gemini-test", contents="Count"
        )
        start, start_wall = time.monotonic(), wall()
        async for chunk in stream:
            virtual.append(time.monotonic() - start)
            read_at.append(wall())
            real.append(read_at[-1] - start_wall)
            texts.append(chunk.text)
        return texts, virtual, real, read_at, before

    texts, virtual, real, read_at, before = asyncio.run(main())
    report(
        "stream",
        cassette,
        texts=texts,
        virtual=virtual,
        real=real,
        read_at=read_at,
        before=before,
    )
"""


def seen_by(path):
    return {entry["test"]: entry for entry in map(json.loads, path.read_text().splitlines())}


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_genai=GENAI_TESTS)
    return pytester


def record_then_replay(project, monkeypatch, emulator):
    """Run the project recording against ``emulator``, stop it, run it again replaying;
    returns what each run's tests saw."""
    recorded_file = project.path / "recorded.jsonl"
    replayed_file = project.path / "replayed.jsonl"
    monkeypatch.setenv("EMULATOR_URL", emulator.base_url)
    monkeypatch.setenv("SEEN", str(recorded_file))
    recording = project.runpytest_subprocess("--cassette-record=once", "-p", "no:randomly")
    recording.assert_outcomes(passed=2)
    emulator.stop()
    monkeypatch.setenv("SEEN", str(replayed_file))
    replaying = project.runpytest_subprocess("-p", "no:randomly")
    replaying.assert_outcomes(passed=2)
    replaying.stdout.fnmatch_lines(["*cassettes: 2 used, 2 replayed, 0 recorded, 0 written*"])
    return seen_by(recorded_file), seen_by(replayed_file)


DELAY = 0.5
EVENTS = 5


def test_genai_async_over_aiohttp_records_then_replays_offline_on_the_recorded_times(
    project, monkeypatch
):
    emulator = Emulator(events=EVENTS, delay=DELAY).start()
    try:
        recorded, replayed = record_then_replay(project, monkeypatch, emulator)
        sent = emulator.responses
    finally:
        emulator.stop()

    # Recording reached the emulator once per test, and wrote a cassette for each.
    assert sorted(r.path.rsplit(":", 1)[1] for r in sent) == [
        "generateContent",
        "streamGenerateContent",
    ]
    assert sorted(p.name for p in project.path.glob("cassettes/test_genai/*.msgpack")) == [
        "test_generate_content.msgpack",
        "test_generate_content_stream.msgpack",
    ]
    for name in ("generate", "stream"):
        assert recorded[name]["replayed"] is False
        assert replayed[name]["replayed"] is True
        assert replayed[name]["texts"] == recorded[name]["texts"]
        assert replayed[name]["url"] == recorded[name]["url"]
        assert recorded[name]["complete"]
        assert replayed[name]["complete"]
    assert recorded["generate"]["finish"] == replayed["generate"]["finish"] == "STOP"
    (stream,) = [r for r in sent if r.path.endswith(":streamGenerateContent")]
    deltas = [json.loads(e.data.decode()[len("data: ") :]) for e in stream.events]
    words = [d["candidates"][0]["content"]["parts"][0]["text"] for d in deltas]
    live, again = recorded["stream"], replayed["stream"]
    assert live["texts"] == words
    assert live["url"].endswith(":streamGenerateContent?alt=sse")

    # While recording, each chunk was stamped when it passed the recorder: after the emulator
    # began writing it, before the client had it. Stamps count from when the request was sent,
    # between ``before`` and the emulator's ``received_at``; both processes read
    # CLOCK_MONOTONIC, so on any machine, however loaded:
    # ``began - received_at <= stamp <= read - before``.
    began = [event.started_at for event in stream.events]
    stamps = live["deliveries"]
    read = live["read_at"]
    assert len(stamps) == EVENTS
    assert_stamped_in_flight(
        [b - stream.received_at for b in began],
        stamps,
        [r - live["before"] for r in read],
        what="recording the gemini stream",
    )
    # And the client had the first chunk while the emulator still held the last one back,
    # seconds later: a bridge that buffered the stream would hand over nothing until the end.
    assert read[0] < began[-1], (read[0], began[-1])
    # Replayed, each chunk reached the client at its recorded offset on the virtual clock ...
    stored = stored_times(
        project.path / "cassettes/test_genai/test_generate_content_stream.msgpack"
    )
    assert again["deliveries"] == pytest.approx(stored, abs=1e-3)
    # ... the client saw each then, on its virtual clock: the stored times, which the recording
    # session's own deliveries may miss by the ms a loaded machine puts between stamping a piece
    # and handing it on ...
    start = stored[0] - again["virtual"][0]
    assert [start + t for t in again["virtual"]] == pytest.approx(stored, abs=1e-3)
    # ... and the two seconds of gaps were not slept.
    assert_did_not_sleep(again["real"][-1], stored[-1], what="replaying the stream")


# -- openai and anthropic with DefaultAioHttpClient: httpx clients over an aiohttp transport ----

AIOHTTP_CLIENT_TESTS = """
import asyncio
import json
import os
import time

import anthropic
import openai
import pytest

BASE = os.environ["EMULATOR_URL"]
MESSAGES = [{"role": "user", "content": "Count."}]


def wall():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def report(name, cassette, **seen):
    sent = cassette.requests[0]
    seen.update(
        replayed=sent.replayed,
        deliveries=[d - sent.sent_at for d in sent.deliveries],
        complete=sent.complete,
        requests=len(cassette.requests),
    )
    with open(os.environ["SEEN"], "a") as out:
        out.write(json.dumps({"test": name, **seen}) + "\\n")


async def timed(stream, text_of):
    texts, virtual = [], []
    start = time.monotonic()
    async for item in stream:
        text = text_of(item)
        if text:
            virtual.append(time.monotonic() - start)
            texts.append(text)
    return texts, virtual


@pytest.mark.cassette
def test_openai(cassette):
    async def main():
        http = openai.DefaultAioHttpClient()
        assert type(http._transport).__name__ == "AiohttpTransport"
        async with openai.AsyncOpenAI(
            api_key="sk-test", base_url=BASE + "/v1", http_client=http, max_retries=0
        ) as client:
            stream = await client.chat.completions.create(
                model="m", messages=MESSAGES, stream=True
            )
            return await timed(
                stream, lambda c: c.choices[0].delta.content if c.choices else None
            )

    texts, virtual = asyncio.run(main())
    report("openai", cassette, texts=texts, virtual=virtual)


@pytest.mark.cassette
def test_anthropic(cassette):
    async def main():
        http = anthropic.DefaultAioHttpClient()
        assert type(http._transport).__name__ == "AiohttpTransport"
        async with anthropic.AsyncAnthropic(
            api_key="sk-ant-test", base_url=BASE, http_client=http, max_retries=0
        ) as client:
            stream = await client.messages.create(
                model="claude-test", max_tokens=64, messages=MESSAGES, stream=True
            )
            return await timed(
                stream,
                lambda e: e.delta.text if e.type == "content_block_delta" else None,
            )

    texts, virtual = asyncio.run(main())
    report("anthropic", cassette, texts=texts, virtual=virtual)
"""

SHORT_DELAY = 0.15
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def test_openai_and_anthropic_default_aiohttp_clients_record_then_replay(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_sdks=AIOHTTP_CLIENT_TESTS)
    emulator = Emulator(events=EVENTS, delay=SHORT_DELAY).start()
    try:
        recorded, replayed = record_then_replay(pytester, monkeypatch, emulator)
        responses = list(emulator.responses)
        paths = sorted(r.path for r in responses)
    finally:
        emulator.stop()

    assert paths == ["/v1/chat/completions", "/v1/messages"]
    for name in ("openai", "anthropic"):
        live, again = recorded[name], replayed[name]
        assert (live["replayed"], again["replayed"]) == (False, True)
        assert live["requests"] == again["requests"] == 1
        assert len(live["texts"]) == EVENTS
        assert again["texts"] == live["texts"]
        assert live["complete"]
        assert again["complete"]
        # Recorded as the deltas came: no piece is stamped before the emulator began writing
        # it (a recorder that stamped on completion, or not at all, puts them all at the end or
        # at zero), and the replay delivered each on its recorded offset.
        written = next(r for r in responses if r.path == PATHS[name])
        began = [event.started_at - written.received_at for event in written.events]
        stamps = live["deliveries"]
        assert len(stamps) == len(began), (name, stamps, began)
        early = [(n, t, b) for n, (t, b) in enumerate(zip(stamps, began, strict=True)) if t < b]
        assert early == [], (name, early)
        assert stamps[-1] >= (EVENTS - 1) * SHORT_DELAY, (name, stamps)
        stored = stored_times(pytester.path / f"cassettes/test_sdks/test_{name}.msgpack")
        assert again["deliveries"] == pytest.approx(stored, abs=1e-3), name
        spread = again["virtual"][-1] - again["virtual"][0]
        assert 0 < spread <= stamps[-1], (name, spread)
