"""Three small suites written for pytest-recording, as its users write them, for the migrate
proof: each is recorded against the loopback emulator, replayed by pytest-recording, migrated,
and replayed again by pytest-toolnexus alone. The emulator's URL comes from EMULATOR_URL."""

# Suite 1: the openai SDK. A conftest vcr_config, chat and SSE streams, a class, parametrized
# ids, a test without a request, one that takes the vcr fixture, and one that replays another
# test's cassette by naming it.
OPENAI = {
    "conftest.py": """
import os

import openai
import pytest


@pytest.fixture(scope="module")
def vcr_config():
    return {
        "filter_headers": ["authorization"],
        "decode_compressed_response": True,
        "record_mode": "once",
    }


@pytest.fixture
def client():
    base_url = os.environ["EMULATOR_URL"] + "/v1"
    return openai.OpenAI(api_key="test-key", base_url=base_url, max_retries=0)
""",
    "tests/test_chat.py": """
import pytest


def ask(client, text, **extra):
    return client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": text}], **extra
    )


@pytest.mark.vcr
def test_reply(client):
    assert ask(client, "hello").choices[0].message.content


@pytest.mark.vcr
def test_stream(client):
    chunks = [c for c in ask(client, "stream me", stream=True) if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in chunks)


@pytest.mark.vcr
@pytest.mark.parametrize("word", ["alpha", "two words"])
def test_words(client, word):
    assert ask(client, word).choices[0].message.content


class TestConversation:
    @pytest.mark.vcr
    def test_first(self, client):
        assert ask(client, "first").choices[0].finish_reason == "stop"


@pytest.mark.vcr
def test_no_request():
    assert "nothing" != "sent"


@pytest.mark.vcr
def test_counts(client, vcr):
    ask(client, "counted")
    assert len(vcr.requests) == 1


@pytest.mark.vcr("test_reply.yaml")
def test_replays_the_reply(client, vcr):
    assert ask(client, "hello").choices[0].message.content
    assert vcr.play_count == 1
""",
}

# Suite 2: the anthropic SDK. Markers with record_mode, a vcr_cassette_dir override, a class
# marker over parametrized methods, pytestmark, and two named cassettes on one test.
ANTHROPIC = {
    "conftest.py": """
import os

import anthropic
import pytest


@pytest.fixture
def client():
    base_url = os.environ["EMULATOR_URL"]
    return anthropic.Anthropic(api_key="test-key", base_url=base_url, max_retries=0)
""",
    "tests/test_messages.py": """
import os

import pytest

pytestmark = pytest.mark.vcr(record_mode="once")


@pytest.fixture(scope="module")
def vcr_cassette_dir(request):
    return os.path.join(os.path.dirname(request.module.__file__), "recorded")


def say(client, text, stream=False):
    return client.messages.create(
        model="claude", max_tokens=64, messages=[{"role": "user", "content": text}], stream=stream
    )


@pytest.mark.vcr(record_mode="new_episodes", allow_playback_repeats=True)
def test_message(client):
    assert say(client, "hi").content[0].text
    assert say(client, "hi").content[0].text


def test_stream(client):
    events = list(say(client, "stream", stream=True))
    assert events[-1].type == "message_stop"


@pytest.mark.vcr
class TestTopics:
    @pytest.mark.parametrize("topic", ["cats", "dogs"])
    def test_topic(self, client, topic):
        assert say(client, topic).stop_reason == "end_turn"


@pytest.mark.vcr("test_message.yaml", "test_stream.yaml", record_mode="none")
def test_both(client):
    assert say(client, "hi").content[0].text
    assert list(say(client, "stream", stream=True))[-1].type == "message_stop"
""",
}

# Suite 3: plain httpx, gzip bodies kept compressed in the YAML, and a cassette recorded by an
# "older SDK" whose request body differs from what the code sends today (vcrpy never matched
# bodies). No conftest at all: migrate creates one for cassette_config.
HTTPX = {
    "tests/test_gzip.py": """
import os

import httpx
import pytest

URL = os.environ["EMULATOR_URL"] + "/v1/chat/completions"
MAX_TOKENS = int(os.environ.get("SDK_MAX_TOKENS", "256"))


def post(text):
    body = {"model": "m", "max_tokens": MAX_TOKENS, "messages": [{"role": "user", "content": text}]}
    with httpx.Client() as client:
        response = client.post(URL, json=body, headers={"accept-encoding": "gzip"})
    assert response.status_code == 200
    return response.json()["choices"][0]["message"]["content"]


@pytest.mark.vcr(record_mode="once", match_on=["method", "uri"])
def test_gzip(vcr):
    assert post("zipped")
    assert len(vcr.requests) == 1


@pytest.mark.vcr
def test_old_sdk_body():
    assert post("today's body")


@pytest.mark.vcr
def test_stream_gzip():
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "s"}]}
    with httpx.Client() as client:
        with client.stream("POST", URL, json=body) as response:
            lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
""",
}

SUITES = {"openai": OPENAI, "anthropic": ANTHROPIC, "httpx": HTTPX}
