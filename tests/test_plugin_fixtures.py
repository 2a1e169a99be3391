"""The marker and the fixtures, as users meet them: ``pytest --fixtures``, the seam transports,
shared cassette names, per-test options, unmodified SDK clients, the install undone after a
failure, where cassettes are written by default, and async tests under anyio.

Each test writes a small project with ``pytester``. The loopback emulator belongs to the outer
test, so the outer test counts what reached the server.
"""

import hashlib
import re

# Imported once here, so that pytester's in-process runs find them loaded instead of importing
# them again on every run.
import anthropic  # noqa: F401
import httpx  # noqa: F401
import httpx2  # noqa: F401
import ollama  # noqa: F401
import openai  # noqa: F401
import pytest

from pytest_toolnexus import load_cassette
from tests.support.plugin_projects import CHAT_CONFTEST

CONFTEST = CHAT_CONFTEST


@pytest.fixture
def project(pytester, emulator):
    pytester.makeconftest(CONFTEST)
    return pytester


def run(pytester, *args):
    return pytester.runpytest("-p", "no:hypothesispytest", *args)


def literal(text):
    """``text`` as an fnmatch pattern that matches only itself."""
    return re.sub(r"([\[*?])", r"[\1]", text)


def sent_texts(emulator):
    return [r.body["messages"][0]["content"] for r in emulator.requests]


# -- the fixtures -------------------------------------------------------------------------------


def test_pytest_fixtures_lists_each_fixture_with_its_docstring(project):
    result = run(project, "--fixtures")

    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*-- fixtures defined from pytest_toolnexus.plugin --*",
            "cassette_config -- *pytest_toolnexus/plugin.py:*",
            "    Default cassette options for a module or conftest; override it to return a dict.",
            "cassette -- *pytest_toolnexus/plugin.py:*",
            "    This test's cassette: serves its HTTP traffic and records what was sent and when.",
            "cassette_transport -- *pytest_toolnexus/plugin.py:*",
            "    A sync seam Transport served by this test's cassette, for clients that take one.",
            "cassette_async_transport -- *pytest_toolnexus/plugin.py:*",
            "    An async seam Transport served by this test's cassette, for clients that take "
            "one.",
        ]
    )
    result.stdout.no_fnmatch_line("*_toolnexus_marker*")


def test_seam_transports_record_and_replay_a_seam_client(project, emulator):
    project.makepyfile(
        test_seam="""
        import os

        import pytest

        from pytest_toolnexus import TransportRequest

        URL = os.environ["EMULATOR_URL"] + "/v1/chat/completions"


        def request(text):
            body = {"model": "m", "messages": [{"role": "user", "content": text}]}
            return TransportRequest("POST", URL, body=body)


        @pytest.fixture
        def anyio_backend():
            return "asyncio"


        def test_sync(cassette_transport, cassette):
            response = cassette_transport(request("sync"))
            assert response.status == 200
            assert response.body["object"] == "chat.completion"
            assert [r.body for r in cassette.requests] == [request("sync").body]


        @pytest.mark.anyio
        async def test_async(cassette_async_transport, cassette):
            response = await cassette_async_transport(request("async"))
            assert response.status == 200
            assert response.body["object"] == "chat.completion"
            assert len(cassette.requests) == 1
        """
    )

    recorded = run(project, "--cassette-record=once")
    replayed = run(project)

    recorded.assert_outcomes(passed=2)
    recorded.stdout.fnmatch_lines(["cassettes: 2 used, 0 replayed, 2 recorded, 2 written"])
    replayed.assert_outcomes(passed=2)
    replayed.stdout.fnmatch_lines(["cassettes: 2 used, 2 replayed, 0 recorded, 0 written"])
    assert sorted(sent_texts(emulator)) == ["async", "sync"]


# -- the marker ---------------------------------------------------------------------------------


def test_a_named_cassette_is_shared_by_the_tests_that_name_it(project, emulator):
    project.makepyfile(
        test_shared="""
        import pytest


        @pytest.mark.cassette("conversation")
        def test_first(chat):
            assert chat("first")


        @pytest.mark.cassette("conversation")
        def test_second(chat):
            assert chat("second")
        """
    )

    recorded = run(project, "--cassette-record=once")
    replayed = run(project)

    recorded.assert_outcomes(passed=2)
    recorded.stdout.fnmatch_lines(
        [
            "cassettes: 1 used, 0 replayed, 1 recorded, 1 written",
            "  written: cassettes/test_shared/conversation.msgpack",
        ]
    )
    replayed.assert_outcomes(passed=2)
    replayed.stdout.fnmatch_lines(["cassettes: 1 used, 1 replayed, 0 recorded, 0 written"])
    assert sorted(sent_texts(emulator)) == ["first", "second"]
    # Then the shared cassette holds both tests' interactions, in the order they were sent
    cassette = load_cassette(project.path / "cassettes" / "test_shared" / "conversation.msgpack")
    assert [
        i.request.body.value["messages"][0]["content"] for i in cassette.interactions
    ] == sent_texts(emulator)
    assert sorted(p.name for p in (project.path / "cassettes" / "test_shared").iterdir()) == [
        "conversation.msgpack"
    ]


def test_marker_options_apply_to_their_test_only(project, emulator):
    project.makepyfile(
        test_options="""
        import pytest


        @pytest.mark.cassette
        def test_ignore(chat):
            chat("hi", metadata={"request_id": "r-1"})


        @pytest.mark.cassette
        def test_repeat(chat):
            chat("again")
        """
    )
    run(project, "--cassette-record=once").assert_outcomes(passed=2)
    # Given the tests now vary a field and repeat a request; two twins without the options
    project.makepyfile(
        test_options="""
        import pytest


        @pytest.mark.cassette(ignore_body=["metadata.request_id"], timing="instant")
        def test_ignore(chat, cassette):
            chat("hi", metadata={"request_id": "r-2"})
            assert cassette.timing == "instant"


        @pytest.mark.cassette(allow_repeats=True)
        def test_repeat(chat):
            assert chat("again") == chat("again")


        @pytest.mark.cassette("test_ignore")
        def test_ignore_twin(chat, cassette):
            assert cassette.timing == "virtual"
            chat("hi", metadata={"request_id": "r-2"})


        @pytest.mark.cassette("test_repeat")
        def test_repeat_twin(chat):
            chat("again")
            chat("again")


        @pytest.mark.cassette(record="new")
        def test_new(chat):
            chat("only this test records")
        """
    )

    result = run(project)

    result.assert_outcomes(passed=3, failed=2)
    # Each failure's section, matched on its own: the two fail in whichever order they ran
    result.stdout.fnmatch_lines(
        [
            "*_ test_ignore_twin _*",
            "E  *" + literal("root['metadata']['request_id']: recorded 'r-1', sent 'r-2'"),
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*_ test_repeat_twin _*",
            "E *The same request was recorded as interaction #0, and it was already played: each "
            "recorded interaction plays once, so this request was sent more times than when the "
            "cassette was recorded.",
            "E *  - or let a request replay more than once: allow_repeats=True",
        ]
    )
    assert sorted(sent_texts(emulator)[:2]) == ["again", "hi"]
    assert sent_texts(emulator)[2:] == ["only this test records"]


SDK_TESTS = """
import os

import anthropic
import httpx
import httpx2
import ollama
import openai
import pytest

BASE = os.environ["EMULATOR_URL"]
MESSAGES = [{"role": "user", "content": "Say something"}]


@pytest.mark.cassette
def test_openai(cassette):
    client = openai.OpenAI(api_key="test-key", base_url=BASE + "/v1", max_retries=0)
    reply = client.chat.completions.create(model="m", messages=MESSAGES)
    assert reply.choices[0].message.content
    assert cassette.requests[0].url == BASE + "/v1/chat/completions"


@pytest.mark.cassette
def test_openai_stream(cassette):
    client = openai.OpenAI(api_key="test-key", base_url=BASE + "/v1", max_retries=0)
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text
    assert len(cassette.requests[0].deliveries) > 2


@pytest.mark.cassette
def test_anthropic(cassette):
    client = anthropic.Anthropic(api_key="test-key", base_url=BASE, max_retries=0)
    message = client.messages.create(model="m", max_tokens=64, messages=MESSAGES)
    assert message.content[0].text
    assert cassette.requests[0].url == BASE + "/v1/messages"


@pytest.mark.cassette
def test_ollama(cassette):
    response = ollama.Client(host=BASE).chat(model="m", messages=MESSAGES, stream=False)
    assert response.message.content
    assert cassette.requests[0].url == BASE + "/api/chat"


@pytest.mark.cassette
@pytest.mark.parametrize("library", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_plain_client(cassette, library):
    body = {"model": "m", "messages": MESSAGES}
    with library.Client() as client:
        response = client.post(BASE + "/v1/chat/completions", json=body)
    assert response.json()["object"] == "chat.completion"
    assert len(cassette.requests) == 1
"""


def test_unmodified_sdk_clients_record_and_replay(project, emulator):
    project.makepyfile(test_sdks=SDK_TESTS)

    recorded = run(project, "--cassette-record=once")
    replayed = run(project)

    recorded.assert_outcomes(passed=6)
    recorded.stdout.fnmatch_lines(["cassettes: 6 used, 0 replayed, 6 recorded, 6 written"])
    replayed.assert_outcomes(passed=6)
    replayed.stdout.fnmatch_lines(["cassettes: 6 used, 6 replayed, 0 recorded, 0 written"])
    assert sorted(r.path for r in emulator.requests) == [
        "/api/chat",
        "/v1/chat/completions",
        "/v1/chat/completions",
        "/v1/chat/completions",
        "/v1/chat/completions",
        "/v1/messages",
    ]


def test_the_install_is_undone_after_a_failure_or_an_error(project, emulator):
    project.makepyfile(
        test_undo="""
        import httpx
        import httpx2
        import pytest

        ORIGINAL = {
            (lib, cls, name): lib.__dict__[cls].__dict__[name]
            for lib in (httpx, httpx2)
            for cls, name in (
                ("HTTPTransport", "handle_request"),
                ("AsyncHTTPTransport", "handle_async_request"),
            )
        }


        def installed():
            return [
                f"{lib.__name__}.{cls}.{name}"
                for (lib, cls, name), original in ORIGINAL.items()
                if getattr(lib, cls).__dict__[name] is not original
            ]


        @pytest.fixture
        def broken(cassette, chat):
            chat("from a fixture")
            raise RuntimeError("a fixture broke after the cassette was installed")


        @pytest.mark.cassette
        def test_fails(chat):
            chat("before failing")
            assert len(installed()) == 4
            raise AssertionError("the test failed")


        def test_errors(broken):
            pass


        def test_live_afterwards(chat):
            assert installed() == []
            chat("live afterwards")
        """
    )

    # test_live_afterwards checks what the failures left behind, so it must run after them;
    # the failing tests keep their recordings so that the replay fails the same way
    in_order = ("-p", "no:randomly", "-o", "cassette_record_on_error=true")
    recorded = run(project, *in_order, "--cassette-record=once")
    # Patched classes and the socket tripwire are process-wide: replay in a process of its own
    replayed = project.runpytest_subprocess("-p", "no:hypothesispytest", *in_order)

    recorded.assert_outcomes(passed=1, failed=1, errors=1)
    replayed.assert_outcomes(passed=1, failed=1, errors=1)
    for result in (recorded, replayed):
        result.stdout.fnmatch_lines(["E       AssertionError: the test failed"])
        result.stdout.fnmatch_lines(
            ["E       RuntimeError: a fixture broke after the cassette was installed"]
        )
    assert sent_texts(emulator) == [
        "before failing",
        "from a fixture",
        "live afterwards",
        "live afterwards",
    ]


# -- where cassettes go -------------------------------------------------------------------------


def test_default_location_follows_the_test_file_and_a_safe_test_name(project, emulator):
    project.path.joinpath("unit").mkdir()
    project.path.joinpath("unit", "test_where.py").write_text(
        """
import pytest


@pytest.mark.cassette
@pytest.mark.parametrize("model", ["gpt-4o/mini", "a b:c"])
def test_model(chat, model):
    chat(model)


@pytest.mark.cassette
@pytest.mark.parametrize("prompt", ["x" * 150], ids=["x" * 150])
def test_long(chat, prompt):
    chat("long")


class TestOne:
    @pytest.mark.cassette
    def test_same_name(self, chat):
        chat("one")


class TestTwo:
    @pytest.mark.cassette
    def test_same_name(self, chat):
        chat("two")
"""
    )

    recorded = run(project, "--cassette-record=once")
    replayed = run(project)

    recorded.assert_outcomes(passed=5)
    replayed.assert_outcomes(passed=5)
    long_id = "test_long[" + "x" * 150 + "]"
    digest = hashlib.sha256(long_id.encode()).hexdigest()[:12]
    long_name = ("test_long-" + "x" * 150)[:87] + "-" + digest
    assert len(long_name) == 100
    folder = project.path / "cassettes" / "unit" / "test_where"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [
            "test_model-gpt-4o_mini.msgpack",
            "test_model-a_b_c.msgpack",
            f"{long_name}.msgpack",
            "TestOne.test_same_name.msgpack",
            "TestTwo.test_same_name.msgpack",
        ]
    )
    assert [list(folder.parent.parent.iterdir())] == [[folder.parent]]
    assert len(emulator.requests) == 5


# -- async --------------------------------------------------------------------------------------


def test_async_tests_under_anyio_on_asyncio_and_trio(project, emulator):
    project.makepyfile(
        test_async="""
        import os

        import httpx
        import openai
        import pytest

        BASE = os.environ["EMULATOR_URL"]
        MESSAGES = [{"role": "user", "content": "Say something"}]


        @pytest.fixture(params=["asyncio", "trio"])
        def anyio_backend(request):
            return request.param


        @pytest.mark.anyio
        @pytest.mark.cassette
        async def test_httpx_async(cassette):
            async with httpx.AsyncClient() as client:
                response = await client.post(
                    BASE + "/v1/chat/completions", json={"model": "m", "messages": MESSAGES}
                )
            assert response.json()["object"] == "chat.completion"
            assert len(cassette.requests) == 1


        @pytest.mark.anyio
        @pytest.mark.cassette
        async def test_openai_async_stream(cassette):
            # Closed here: left to the garbage collector, openai closes the client from whichever
            # asyncio loop runs then, perhaps another test's, on connections trio opened
            async with openai.AsyncOpenAI(
                api_key="test-key", base_url=BASE + "/v1", max_retries=0
            ) as client:
                stream = await client.chat.completions.create(
                    model="m", messages=MESSAGES, stream=True
                )
                pieces = [
                    chunk.choices[0].delta.content async for chunk in stream if chunk.choices
                ]
            assert "".join(p or "" for p in pieces)
            assert len(cassette.requests[0].deliveries) > 2
        """
    )

    recorded = run(project, "--cassette-record=once")
    replayed = run(project)

    recorded.assert_outcomes(passed=4)
    replayed.assert_outcomes(passed=4)
    replayed.stdout.fnmatch_lines(["cassettes: 4 used, 4 replayed, 0 recorded, 0 written"])
    assert len(emulator.requests) == 4
    folder = project.path / "cassettes" / "test_async"
    assert sorted(p.name for p in folder.iterdir()) == [
        "test_httpx_async-asyncio.msgpack",
        "test_httpx_async-trio.msgpack",
        "test_openai_async_stream-asyncio.msgpack",
        "test_openai_async_stream-trio.msgpack",
    ]
