"""The ``cassette_server`` fixture: a test's cassette served to code under test in another
process, in pytester projects run as a user's suite is."""

from __future__ import annotations

import pytest

from pytest_toolnexus import build
from tests.support import realtime_cassette

ASKED = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}

# The code under test: a process of its own that posts to the base URL it is given.
CHILD = """
import json, sys, urllib.error, urllib.request

url, body = sys.argv[1], sys.argv[2]
request = urllib.request.Request(
    url + "/v1/chat/completions", data=body.encode(), headers={"content-type": "application/json"}
)
try:
    with urllib.request.urlopen(request) as answer:
        print(json.load(answer)["choices"][0]["message"]["content"])
except urllib.error.HTTPError as error:
    print("failed with", error.code)  # swallowed, as code under test may
"""

TESTS = """
import json, subprocess, sys

import pytest

ASKED = json.dumps({asked!r})


def run(url, body=ASKED):
    done = subprocess.run([sys.executable, "child.py", url, body], capture_output=True, text=True)
    return done.stdout.strip()


def test_served(cassette_server):
    assert cassette_server.startswith("http://127.0.0.1:")
    assert cassette_server.endswith("/c/test_served")
    assert run(cassette_server) == "Hello there."


def test_swallowed_miss(cassette_server):
    assert run(cassette_server, json.dumps({{"model": "other"}})) == "failed with 490"


@pytest.mark.cassette("shared", allow_repeats=True)
def test_named_with_options(cassette_server):
    assert [run(cassette_server) for _ in range(2)] == ["From shared."] * 2


def test_unplayed(cassette_server):
    pass


def test_no_cassette(cassette_server):
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    folder = pytester.path / "cassettes" / "test_project"
    for name, text in (
        ("test_served", "Hello there."),
        ("test_swallowed_miss", "Hello there."),
        ("shared", "From shared."),
        ("test_unplayed", "Never asked."),
    ):
        build.build_cassette(
            folder / f"{name}.msgpack", [build.openai_chat(text, stream=False, request_body=ASKED)]
        )
    pytester.makepyfile(child=CHILD)
    pytester.makepyfile(test_project=TESTS.format(asked=ASKED))
    return pytester


def test_the_fixture_serves_the_tests_cassette_and_reports_at_teardown(project: pytest.Pytester):
    result = project.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rA")

    result.assert_outcomes(passed=4, errors=2, warnings=1)
    outcomes = {r.nodeid.split("::")[1]: r.outcome for r in []}
    assert outcomes == {}
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_swallowed_miss*",
            "*cassette_server: 1 request(s) to cassettes/test_project/test_swallowed_miss.msgpack"
            " matched no recording (an HTTP request is answered 490*",
            "*No recorded interaction matches POST https://api.openai.com/v1/chat/completions*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*cassette_server: the cassette cassettes/test_project/test_no_cassette.msgpack does "
            "not exist. The server replays only*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*UnusedInteractionsWarning: cassette cassettes/test_project/test_unplayed.msgpack: 1 "
            "recorded interaction(s) were never played through the server: "
            "#0 POST https://api.openai.com/v1/chat/completions*"
        ]
    )


MANY_MISSES = """
import json, urllib.error, urllib.request


def test_many_misses(cassette_server):
    statuses = set()
    for n in range(300):
        body = {{"model": "gpt-4o-mini", "messages": [{{"role": "user", "content": "x" * 400}}]}}
        request = urllib.request.Request(
            cassette_server + f"/v1/chat/completions?n={{n}}",
            data=json.dumps(body).encode(),
            headers={{"content-type": "application/json"}},
        )
        try:
            urllib.request.urlopen(request, timeout=15)
        except urllib.error.HTTPError as error:
            statuses.add(error.code)
    assert statuses == {{490}}
"""


def test_a_server_that_logs_more_than_a_pipe_holds_keeps_answering(pytester: pytest.Pytester):
    build.build_cassette(
        pytester.path / "cassettes" / "test_many" / "test_many_misses.msgpack",
        [build.openai_chat("Hello there.", stream=False, request_body=ASKED)],
    )
    pytester.makepyfile(test_many=MANY_MISSES.format())

    result = pytester.runpytest_subprocess("-p", "no:randomly")

    # Every miss was answered (none timed out behind a full stderr pipe), and the teardown
    # reports them all from the server's report.
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*300 request(s) to *test_many_misses.msgpack matched no*"])
    result.stdout.no_fnmatch_line("*TimeoutError*")
    result.stdout.no_fnmatch_line("*timed out*")


# The code under test for a realtime session: a process of its own that holds the recorded
# conversation over the WebSocket at the base URL it is given (websockets' sync client).
WS_CHILD = """
import json, sys
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

url, session, item, first = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
seen = []
with connect(url.replace("http://", "ws://") + "/v1/realtime?model=gpt-realtime") as ws:
    try:
        for message in ws:
            event = json.loads(message)
            seen.append(event["type"])
            if event["type"] == "session.created":
                if first == "leave":
                    break
                update = {"type": "session.update", "session": json.loads(session)}
                if first == "wrong":
                    update["session"]["voice"] = "ballad"
                ws.send(json.dumps(update))
            elif event["type"] == "session.updated":
                ws.send(json.dumps({"type": "conversation.item.create", "item": json.loads(item)}))
                ws.send(json.dumps({"type": "response.create"}))
            elif event["type"] == "response.done":
                break
    except ConnectionClosed as closed:
        seen.append(f"closed {closed.rcvd.code}")
print(" ".join(seen))
"""

WS_TESTS = """
import json, subprocess, sys

SESSION, ITEM = json.dumps({session!r}), json.dumps({item!r})


def talk(url, first="right"):
    done = subprocess.run(
        [sys.executable, "ws_child.py", url, SESSION, ITEM, first], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_talks(cassette_server):
    assert talk(cassette_server)[-1] == "response.done"


def test_wrong_frame(cassette_server):
    assert talk(cassette_server, "wrong") == ["session.created", "closed", "4490"]


def test_leaves_early(cassette_server):
    assert talk(cassette_server, "leave") == ["session.created"]
"""


def test_the_fixture_serves_a_realtime_session_to_a_process_and_reports_it(
    pytester: pytest.Pytester,
):
    folder = pytester.path / "cassettes" / "test_realtime"
    for name in ("test_talks", "test_wrong_frame", "test_leaves_early"):
        realtime_cassette.write(folder / f"{name}.msgpack")
    pytester.makepyfile(ws_child=WS_CHILD)
    pytester.makepyfile(
        test_realtime=WS_TESTS.format(
            session=realtime_cassette.SESSION, item=realtime_cassette.ITEM
        )
    )

    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rA")

    # Each test passes its own checks; the server's report then fails the miss at teardown and
    # warns of what the early leaver left.
    result.assert_outcomes(passed=3, errors=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_wrong_frame*",
            "*1 request(s) to cassettes/test_realtime/test_wrong_frame.msgpack matched no "
            "recording*WebSocket frame closes its connection with 4490*",
            "*voice*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*UnusedInteractionsWarning: cassette "
            "cassettes/test_realtime/test_leaves_early.msgpack: WebSocket "
            "ws://127.0.0.1:9/v1/realtime?model=gpt-realtime: 3 recorded client "
            "frame(s) were never sent*",
        ]
    )
