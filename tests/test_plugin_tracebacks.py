"""The answer first: a cassette miss is reported at the line of the project's code that sent the
request, with the message straight after it, and no frame of the plugin's own source between.

Each project replays a built cassette with a request it does not hold, through httpx, the
openai SDK (httpx2 underneath) and requests (urllib3, whose ``urlopen`` alone is 200 lines of
source). A bug of the plugin's own still shows its frames, and ``--full-trace`` and
``--tb=native`` still show every frame.
"""

import re

# Imported once here, so that pytester's in-process runs find them loaded.
import openai  # noqa: F401
import pytest
import requests  # noqa: F401

from pytest_toolnexus import build

ASKED = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}

PROJECT = """
import httpx
import openai
import pytest
import requests

SENT = {"model": "m", "messages": [{"role": "user", "content": "something else"}]}
URL = "https://api.openai.com/v1/chat/completions"


@pytest.fixture
def answer():
    # A project helper between the test and the library: the report ends here.
    return httpx.post(URL, json=SENT)


@pytest.mark.cassette("chat.msgpack")
def test_httpx():
    httpx.post(URL, json=SENT)


@pytest.mark.cassette("chat.msgpack")
def test_openai():
    openai.OpenAI(api_key="sk-test", max_retries=2).chat.completions.create(**SENT)


@pytest.mark.cassette("chat.msgpack")
def test_requests():
    requests.post(URL, json=SENT)


@pytest.mark.cassette("chat.msgpack")
def test_in_a_fixture(answer):
    pass


@pytest.mark.cassette("chat.msgpack")
def test_plugin_bug(monkeypatch):
    from pytest_toolnexus._session.route import RequestPath

    def broken(self, request):
        raise ZeroDivisionError("a bug in the plugin")

    monkeypatch.setattr(RequestPath, "_miss", broken)
    httpx.post(URL, json=SENT)
"""


@pytest.fixture
def project(pytester):
    """A project whose one cassette holds an answer to a request no test sends."""
    pytester.makepyfile(test_miss=PROJECT)
    build.build_cassette(
        pytester.path / "cassettes" / "test_miss" / "chat.msgpack",
        [build.openai_chat("Hello.", stream=False, request_body=ASKED)],
    )
    return pytester


def run(project, *args):
    return project.runpytest("-p", "no:randomly", "-p", "no:hypothesispytest", *args)


def failure(result, test):
    """The lines of one test's section in the FAILURES part of the report."""
    text = result.stdout.str()
    header = rf"_{{3,}} (?:ERROR at setup of )?{test} _{{3,}}\n"
    found = re.search(header + r"(.*?)(?=\n_{3,} |\n={3,} )", text, re.S)
    assert found, f"no failure section for {test} in:\n{text}"
    return found.group(1).splitlines()


def plugin_frames(lines):
    return [line for line in lines if "pytest_toolnexus/" in line]


@pytest.mark.parametrize(
    ("test", "sent_by"),
    [
        ("test_httpx", "    httpx.post(URL, json=SENT)"),
        ("test_openai", "    openai.OpenAI(api_key="),
        ("test_requests", "    requests.post(URL, json=SENT)"),
        ("test_in_a_fixture", "    return httpx.post(URL, json=SENT)"),
    ],
    ids=["httpx", "openai", "requests", "fixture"],
)
def test_a_miss_is_reported_at_the_line_that_sent_the_request(project, test, sent_by):
    # Given a project whose request misses its cassette, through one client or another
    # When it runs
    result = run(project, "-k", test)

    # Then the report ends at the line that sent it, and the message comes next
    result.assert_outcomes(**({"errors": 1} if test == "test_in_a_fixture" else {"failed": 1}))
    lines = failure(result, test)
    assert plugin_frames(lines) == []
    sent = next(i for i, line in enumerate(lines) if line.startswith(">") and sent_by in line)
    message = next(i for i, line in enumerate(lines) if "CassetteMissError: No recorded" in line)
    between = lines[sent + 1 : message]
    assert all(set(line.strip()) <= {"^"} for line in between), "\n".join(lines)
    assert lines[message].startswith("E ")
    # and the whole message is there, with its fixes, in a report of a few dozen lines
    assert any("Nearest recorded request: #0 POST" in line for line in lines)
    assert any("ignore_body=['messages.0.content']" in line for line in lines)
    assert len(lines) < 30, "\n".join(lines)


def test_a_bug_of_the_plugin_shows_the_plugin_frames(project):
    # Given a request whose miss the plugin fails to build, because of a bug of its own
    result = run(project, "-k", "test_plugin_bug")

    # Then the frames where it happened are in the report
    result.assert_outcomes(failed=1)
    lines = failure(result, "test_plugin_bug")
    assert any("ZeroDivisionError: a bug in the plugin" in line for line in lines)
    assert any("pytest_toolnexus/_session/route.py" in line for line in plugin_frames(lines))


@pytest.mark.parametrize("option", ["--full-trace", "--tb=native"])
def test_every_frame_is_there_when_asked_for(project, option):
    # Given a miss, and an option that asks pytest for every frame
    result = run(project, "-k", "test_httpx", option)

    # Then the plugin's and the library's frames are shown, and the message still comes last
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "pytest_toolnexus/_session/route.py" in text
    assert "httpx/_client.py" in text
    assert "CassetteMissError: No recorded interaction matches POST" in text


def test_tb_long_hides_the_same_frames(project):
    result = run(project, "-k", "test_httpx", "--tb=long")

    result.assert_outcomes(failed=1)
    lines = failure(result, "test_httpx")
    assert plugin_frames(lines) == []
    assert not any("httpx/_client.py" in line for line in lines)
