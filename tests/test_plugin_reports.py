"""What the plugin reports, as users see it: the teardown checks (unused interactions, a
replayed stream never read to its end, a miss the code under test swallowed), the network
tripwire of replay-only tests, and the ``pytest-toolnexus`` section of the terminal summary.

The loopback emulator belongs to the outer test, so the outer test counts what reached it.
"""

import re

import pytest

from tests.support.plugin_projects import CHAT_CONFTEST

CONFTEST = CHAT_CONFTEST

TWO_CHATS = """
import pytest


@pytest.mark.cassette
def test_chat(chat):
    chat("first")
    chat("second")
"""

FIRST_ONLY = """
import pytest


@pytest.mark.cassette
def test_chat(chat):
    chat("first")
"""


# A test whose code under test (ask) catches what its chat raises: % (the exception class it
# catches, the test's first line, the text of the request it hides).
HIDING = """
import pytest


def ask(chat, text):
    try:
        return chat(text)
    except %s:
        return None


@pytest.mark.cassette
def test_chat(chat):
    %s
    ask(chat, "%s")
"""


@pytest.fixture
def project(pytester, emulator):
    pytester.makeconftest(CONFTEST)
    return pytester


def run(pytester, *args):
    return pytester.runpytest("-p", "no:hypothesispytest", *args)


def literal(text):
    """``text`` as an fnmatch pattern that matches only itself."""
    return re.sub(r"([\[*?])", r"[\1]", text)


@pytest.fixture
def fewer_requests(project):
    """A cassette of two requests, and a test that now sends only the first."""
    project.makepyfile(test_unused=TWO_CHATS)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    project.makepyfile(test_unused=FIRST_ONLY)
    return project


# -- teardown checks ----------------------------------------------------------------------------


def test_unused_interactions_warn_by_default(fewer_requests, emulator):
    result = run(fewer_requests)

    result.assert_outcomes(passed=1, warnings=1)
    unused = f"#1 POST {emulator.base_url}/v1/chat/completions"
    result.stdout.fnmatch_lines(
        [
            "*= warnings summary =*",
            "test_unused.py::test_chat",
            "  *UnusedInteractionsWarning: test_unused.py::test_chat: 1 recorded interaction(s) "
            f"in cassettes/test_unused/test_chat.msgpack were never played: {unused}",
            "*= pytest-toolnexus =*",
            "cassettes: 1 used, 1 replayed, 0 recorded, 0 written",
            "unused interactions:",
            "  test_unused.py::test_chat: 1 in cassettes/test_unused/test_chat.msgpack",
            f"    {unused}",
        ]
    )


def test_unused_interactions_fail_the_test_with_cassette_unused_fail(fewer_requests, emulator):
    result = run(fewer_requests, "--cassette-unused=fail")

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_chat _*",
            "test_unused.py::test_chat: 1 recorded interaction(s) in "
            "cassettes/test_unused/test_chat.msgpack were never played: "
            f"#1 POST {emulator.base_url}/v1/chat/completions",
        ]
    )


def test_the_cassette_unused_ini_key_means_what_the_option_means(fewer_requests, emulator):
    fewer_requests.makeini("[pytest]\ncassette_unused = fail\n")

    result = run(fewer_requests)

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_chat _*",
            "test_unused.py::test_chat: 1 recorded interaction(s) in "
            "cassettes/test_unused/test_chat.msgpack were never played: "
            f"#1 POST {emulator.base_url}/v1/chat/completions",
        ]
    )


def test_unused_interactions_are_not_reported_with_cassette_unused_ignore(fewer_requests):
    result = run(fewer_requests, "--cassette-unused=ignore")

    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*UnusedInteractionsWarning*")


STREAM = """
import os

import httpx
import pytest

URL = os.environ["EMULATOR_URL"] + "/v1/chat/completions"
BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.cassette
def test_stream():
    with httpx.Client() as client, client.stream("POST", URL, json=BODY) as response:
        lines = response.iter_lines()
        %s
"""


def test_a_replayed_stream_never_read_to_its_end_is_reported(project, emulator):
    # Given a stream recorded whole, its events 50 ms apart
    emulator.delay = 0.05
    emulator.events = 3
    project.makepyfile(test_stream=STREAM % "assert 'data: [DONE]' in list(lines)")
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    # When the test now stops after the first event
    project.makepyfile(test_stream=STREAM % "assert next(lines).startswith('data: ')")

    result = run(project, "--cassette-unused=fail")

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_stream _*",
            "test_stream.py::test_stream: 1 replayed response(s) were never read to the end: "
            f"#0 POST {emulator.base_url}/v1/chat/completions: 1 of 6 events read",
        ]
    )


def test_a_miss_the_code_under_test_swallowed_still_fails_the_test(project, emulator):
    project.makepyfile(test_swallow=FIRST_ONLY)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    # The code under test hides every error, as a bare except does.
    project.makepyfile(test_swallow=HIDING % ("BaseException", 'chat("first")', "not recorded"))

    result = run(project)

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_chat _*",
            "the code under test caught and hid a cassette miss; the request had no recording:",
            "",
            f"No recorded interaction matches POST {emulator.base_url}/v1/chat/completions",
            "",
            literal('  request body:  {"model":"m","messages":[{"role":"user","content":')
            + '"not recorded"}]}',
        ]
    )
    assert len(emulator.requests) == 1


def test_a_miss_passes_through_except_exception_and_fails_where_it_happened(
    project, emulator, monkeypatch
):
    monkeypatch.setenv("COLUMNS", "400")
    project.makepyfile(test_swallow=FIRST_ONLY)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    project.makepyfile(
        test_swallow="""
        import pytest


        @pytest.mark.cassette
        def test_chat(chat):
            chat("first")
            try:
                chat("not recorded")
            except Exception:
                pytest.fail("except Exception caught the miss")
        """
    )

    result = run(project)

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "FAILED test_swallow.py::test_chat - pytest_toolnexus.CassetteMissError: No "
            "recorded interaction matches POST*"
        ]
    )
    result.stdout.no_fnmatch_line("*except Exception caught the miss*")
    assert len(emulator.requests) == 1


def test_a_failing_test_reports_its_failure_and_not_the_unused_interactions(fewer_requests):
    fewer_requests.makepyfile(
        test_unused=FIRST_ONLY + "    raise AssertionError('the real problem')\n"
    )

    result = run(fewer_requests)

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E       AssertionError: the real problem"])
    result.stdout.no_fnmatch_line("*UnusedInteractionsWarning*")


def test_a_replay_only_test_cannot_reach_the_network_another_way(project, emulator):
    project.makepyfile(test_urllib=FIRST_ONLY)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    project.makepyfile(
        test_urllib="""
        import os
        import urllib.request

        import pytest


        @pytest.mark.cassette
        def test_chat(chat):
            chat("first")
            urllib.request.urlopen(os.environ["EMULATOR_URL"] + "/health", timeout=5)
        """
    )

    result = run(project)

    result.assert_outcomes(failed=1)
    host, port = emulator.base_url.removeprefix("http://").split(":")
    result.stdout.fnmatch_lines(
        [
            f"E *pytest-toolnexus blocked a connection to {host}:{port}: cassette "
            "cassettes/test_urllib/test_chat.msgpack is replay-only (record mode 'none'), so "
            "nothing may reach the network.*"
            f"let the host through with --cassette-allow-hosts={host} "
            + literal(f"(allow_hosts=['{host}'] on the marker)."),
        ]
    )
    assert len(emulator.requests) == 1


# -- the end-of-run summary ---------------------------------------------------------------------

THREE_TESTS = """
import pytest


@pytest.mark.cassette
def test_a(chat):
    chat("a")


@pytest.mark.cassette
def test_b(chat):
    chat("b")


@pytest.mark.cassette
def test_c(chat):
    chat("c")


def test_without_a_cassette():
    pass
"""


def test_summary_counts_cassettes_and_lists_written_files(project):
    project.makepyfile(test_three=THREE_TESTS)

    recorded = run(project, "--cassette-record=once")
    replayed = run(project)

    recorded.assert_outcomes(passed=4)
    recorded.stdout.fnmatch_lines(
        [
            "*= pytest-toolnexus =*",
            "cassettes: 3 used, 0 replayed, 3 recorded, 3 written",
            "  written: cassettes/test_three/test_a.msgpack",
            "  written: cassettes/test_three/test_b.msgpack",
            "  written: cassettes/test_three/test_c.msgpack",
            "*= 4 passed in *",
        ]
    )
    replayed.stdout.fnmatch_lines(
        [
            "*= pytest-toolnexus =*",
            "cassettes: 3 used, 3 replayed, 0 recorded, 0 written",
            "*= 4 passed in *",
        ]
    )
    replayed.stdout.no_fnmatch_line("  written: *")


def test_no_summary_section_when_no_test_used_a_cassette(project):
    project.makepyfile(test_three=THREE_TESTS)

    result = run(project, "-k", "without")

    result.assert_outcomes(passed=1, deselected=3)
    result.stdout.no_fnmatch_line("*pytest-toolnexus*")


def test_report_unused_files_lists_cassettes_on_disk_that_no_test_used(project):
    project.makepyfile(test_three=THREE_TESTS)
    run(project, "--cassette-record=once").assert_outcomes(passed=4)
    project.path.joinpath("cassettes", "test_gone").mkdir()
    project.path.joinpath("cassettes", "test_three", "test_a.msgpack").rename(
        project.path / "cassettes" / "test_gone" / "test_removed.msgpack"
    )
    project.makepyfile(test_three=THREE_TESTS.replace("test_a", "test_renamed"))
    run(project, "-k", "test_renamed", "--cassette-record=once").assert_outcomes(
        passed=1, deselected=3
    )

    result = run(project, "-k", "test_b", "--cassette-report-unused-files")

    result.assert_outcomes(passed=1, deselected=3)
    result.stdout.fnmatch_lines(
        [
            "*= pytest-toolnexus =*",
            "cassettes: 1 used, 1 replayed, 0 recorded, 0 written",
            "cassettes no test used: 3",
            "  cassettes/test_gone/test_removed.msgpack",
            "  cassettes/test_three/test_c.msgpack",
            "  cassettes/test_three/test_renamed.msgpack",
            "*= 1 passed, 3 deselected in *",
        ]
    )


def _damage_second_response(project):
    """Give the second recorded interaction a status no response can have."""
    import msgpack

    (path,) = project.path.glob("cassettes/**/*.msgpack")
    doc = msgpack.unpackb(path.read_bytes())
    doc["interactions"][1]["response"]["status"] = 999
    path.write_bytes(msgpack.packb(doc, use_bin_type=True))


def test_damage_the_code_under_test_caught_still_fails_the_test(project, emulator):
    project.makepyfile(test_damaged=TWO_CHATS)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    _damage_second_response(project)
    # A fallback, as code that retries or degrades has.
    project.makepyfile(test_damaged=HIDING % ("Exception", 'assert chat("first")', "second"))

    result = run(project)

    # The response is decoded when played, so the first one plays and the second fails; the
    # teardown says why, though the test caught the error.
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_chat _*",
            "the cassette is damaged, and the test did not fail with that error*",
            "cassette *test_chat.msgpack is corrupt at interaction 1: a response status must "
            "be 100-599, found 999; restore the file from version control, or record it again "
            "with record mode 'all'",
        ]
    )
    assert len(emulator.requests) == 2  # both from the recording run


def test_damage_the_test_fails_with_is_reported_once(project, emulator):
    project.makepyfile(test_damaged=TWO_CHATS)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    _damage_second_response(project)

    result = run(project)

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*CassetteFormatError: cassette *test_chat.msgpack is corrupt at interaction 1: *"]
    )
    assert "the cassette is damaged, and the test did not fail" not in result.stdout.str()


def test_a_miss_or_damage_the_test_itself_expects_passes(project, emulator):
    project.makepyfile(test_damaged=TWO_CHATS)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    _damage_second_response(project)
    project.makepyfile(
        test_damaged="""
        import pytest
        from pytest_toolnexus import CassetteFormatError, CassetteMissError


        @pytest.mark.cassette
        def test_chat(chat):
            chat("first")
            with pytest.raises(CassetteFormatError, match="at interaction 1"):
                chat("second")
            with pytest.raises(CassetteMissError):
                chat("not recorded")


        class TestInAClass:
            @pytest.mark.cassette(name="test_damaged/test_chat")
            def test_chat(self, chat):
                chat("first")
                try:
                    chat("second")
                except CassetteFormatError:
                    pass  # the test's own try: it expects the error
        """
    )

    result = run(project)

    result.assert_outcomes(passed=2)


def test_a_miss_caught_in_a_fixture_is_still_reported(project, emulator):
    project.makepyfile(test_swallow=FIRST_ONLY)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    project.makepyfile(
        test_swallow="""
        import pytest


        @pytest.fixture
        def warmed(chat):
            try:
                chat("not recorded")  # a fixture is not the test: it hides what it catches
            except BaseException:
                pass


        @pytest.mark.cassette
        def test_chat(warmed, chat):
            chat("first")
        """
    )

    result = run(project)

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*the code under test caught and hid a cassette miss*"])


def test_damage_is_reported_once_however_the_failure_shows_it(project, emulator):
    project.makepyfile(test_damaged=TWO_CHATS)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    _damage_second_response(project)
    (path,) = project.path.glob("cassettes/**/*.msgpack")
    shared = f'"{path.relative_to(project.path / "cassettes").with_suffix("")}"'
    project.makepyfile(
        test_damaged=f"""
        import pytest
        from pytest_toolnexus import CassetteFormatError

        NAME = {shared}


        @pytest.mark.xfail(raises=CassetteFormatError, strict=True)
        @pytest.mark.cassette(name=NAME)
        def test_xfail(chat):
            chat("first")
            chat("second")


        @pytest.mark.cassette(name=NAME)
        def test_group(chat):
            chat("first")
            try:
                chat("second")
            except CassetteFormatError as exc:
                raise ExceptionGroup("from a task group", [exc]) from None


        @pytest.fixture
        def answered(chat):
            chat("first")
            return chat("second")  # fails the setup


        @pytest.mark.cassette(name=NAME)
        def test_setup(answered):
            pass
        """
    )

    result = run(project)

    # Each shows the damage in its own report, and gets no teardown error besides.
    result.assert_outcomes(xfailed=1, failed=1, errors=1)
    assert "the cassette is damaged, and the test did not fail" not in result.stdout.str()
    assert result.stdout.str().count("is corrupt at interaction 1") == 2  # group, setup


def test_damage_a_failure_hides_with_from_none_is_reported_at_teardown(project, emulator):
    project.makepyfile(test_damaged=TWO_CHATS)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    _damage_second_response(project)
    project.makepyfile(
        test_damaged="""
        import pytest


        def ask(chat, text):  # an SDK that replaces the error, and hides where it came from
            try:
                return chat(text)
            except Exception:
                raise RuntimeError("the SDK's own error") from None


        @pytest.mark.cassette
        def test_chat(chat):
            chat("first")
            ask(chat, "second")
        """
    )

    result = run(project)

    # pytest prints no suppressed context, so the teardown says what the failure does not.
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_chat _*",
            "the cassette is damaged, and the test did not fail with that error*",
            "",
            "cassette * is corrupt at interaction 1: a response status must be 100-599*",
            "*_ test_chat _*",
            "*RuntimeError: the SDK's own error*",
        ]
    )


def test_a_failed_test_s_error_is_let_go_of_after_its_teardown(project, emulator):
    project.makepyfile(test_swallow=FIRST_ONLY)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    project.makepyfile(
        test_swallow="""
        import gc
        import weakref

        import pytest

        HELD = []


        class Local:
            pass


        @pytest.mark.cassette
        def test_chat(chat):
            chat("first")
            local = Local()
            HELD.append(weakref.ref(local))
            assert False, "fails, with local in its frame"


        def test_later():
            gc.collect()
            assert HELD[0]() is None, "the failed test's frame is still alive"
        """
    )

    # In a process of its own: an in-process run's hook recorder keeps every call's error.
    result = project.runpytest_subprocess("-p", "no:randomly", "-p", "no:hypothesispytest")

    result.assert_outcomes(failed=1, passed=1)


def test_a_miss_a_unittest_test_case_expects_with_assert_raises_passes(project, emulator):
    project.makepyfile(test_swallow=FIRST_ONLY)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    project.makepyfile(
        test_swallow="""
        import unittest

        import pytest
        from pytest_toolnexus import CassetteMissError


        @pytest.mark.cassette(name="test_swallow/test_chat")
        class TestChat(unittest.TestCase):
            @pytest.fixture(autouse=True)
            def _chat(self, chat):
                self.chat = chat

            def test_chat(self):
                self.chat("first")
                # unittest keeps the error it expected without its traceback
                with self.assertRaises(CassetteMissError):
                    self.chat("not recorded")
        """
    )

    result = run(project)

    result.assert_outcomes(passed=1)
