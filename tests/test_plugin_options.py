"""Options and ini keys, as users meet them: the record modes, timing, the cassette folder,
allowed hosts, layering (ini < cassette_config < marker < command line), the CI rule, bad
values, and living next to pytest-recording.

Each test writes a small project with ``pytester`` and runs it in-process. The loopback
emulator belongs to the outer test, so the outer test counts what reached the server.
"""

import pytest

# vcrpy (through pytest-recording) reads YAML with classes that must not be imported again
# between pytester's in-process runs; loading them here keeps one copy for every run.
import pytest_recording._vcr  # noqa: F401

from pytest_toolnexus import load_cassette
from pytest_toolnexus._plugin.settings import OPTION_NAMES

CONFTEST = """
import os
import time

import httpx
import pytest

BASE = os.environ["EMULATOR_URL"]


def real_now():
    # Real seconds: the virtual clock rebinds time.monotonic and time.perf_counter themselves
    # (even a copy taken at import reads virtual time), never clock_gettime(CLOCK_MONOTONIC).
    return time.clock_gettime(time.CLOCK_MONOTONIC)


@pytest.fixture
def wall():
    return real_now


@pytest.fixture
def chat():
    def send(text, base=BASE):
        with httpx.Client() as client:
            response = client.post(
                base + "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": text}]},
            )
        assert response.status_code == 200
        return response.json()["choices"][0]["message"]["content"]

    return send


@pytest.fixture
def stream():
    # Each SSE data line, with the real time it reached the client.
    def send(text):
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": text}]}
        with httpx.Client() as client:
            with client.stream("POST", BASE + "/v1/chat/completions", json=body) as response:
                lines = response.iter_lines()
                return [(real_now(), line) for line in lines if line.startswith("data: ")]

    return send
"""

ONE_CHAT = """
import pytest


@pytest.mark.cassette
def test_chat(chat):
    assert chat("hello")
"""

NOT_FOUND = (
    "E *pytest_toolnexus.CassetteMissError: cassette {path} does not exist, "
    "and record mode 'none' only replays. Record it once with record mode 'once' "
    "(pytest: --cassette-record=once), then commit the file.{note} (The first request that "
    "needed it: POST */v1/chat/completions.)"
)


@pytest.fixture
def project(pytester, emulator):
    pytester.makeconftest(CONFTEST)
    return pytester


def run(pytester, *args):
    return pytester.runpytest("-p", "no:hypothesispytest", *args)


def sent_texts(path):
    return [
        i.request.body.value["messages"][0]["content"] for i in load_cassette(path).interactions
    ]


# -- record modes -------------------------------------------------------------------------------


def test_record_none_without_a_cassette_names_the_file_and_how_to_record(project, emulator):
    # Given a marked test and no cassette on disk
    project.makepyfile(test_chat=ONE_CHAT)

    # When it runs with the default record mode, none
    result = run(project)

    # Then its first request fails, naming the file, the request and the way to record it
    result.assert_outcomes(failed=1)
    path = project.path / "cassettes" / "test_chat" / "test_chat.msgpack"
    result.stdout.fnmatch_lines([NOT_FOUND.format(path=path, note="")])
    assert emulator.requests == []
    assert not path.exists()


NO_REQUEST = """
import pytest


@pytest.mark.cassette
def test_sends_nothing(cassette):
    assert cassette.requests == []
"""


@pytest.mark.parametrize("record", ["none", "once"])
def test_a_marked_test_that_sends_no_request_needs_no_cassette(project, emulator, record):
    # Given a marked test that sends nothing, and no cassette on disk
    project.makepyfile(test_quiet=NO_REQUEST)
    path = project.path / "cassettes" / "test_quiet" / "test_sends_nothing.msgpack"

    # When it runs, in replay-only mode or recording once
    result = run(project, f"--cassette-record={record}")

    # Then it passes, writes nothing, and replaying afterwards passes too
    result.assert_outcomes(passed=1)
    assert not path.exists()
    run(project).assert_outcomes(passed=1)
    assert emulator.requests == []


def test_a_swallowed_missing_cassette_error_is_still_reported(project, emulator):
    # Given a test whose code hides the error its first request raises
    project.makepyfile(
        test_hides="""
        import pytest


        def greet(chat):  # the code under test
            try:
                return chat("hello")
            except BaseException:
                return None


        @pytest.mark.cassette
        def test_hides(chat):
            greet(chat)
        """
    )

    result = run(project)

    # Then the teardown check fails it, quoting the missing-cassette error
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*the code under test caught and hid a cassette miss*", "*does not exist*"]
    )
    assert emulator.requests == []


def test_record_once_records_then_replays_without_the_server(project, emulator):
    project.makepyfile(test_chat=ONE_CHAT)
    path = project.path / "cassettes" / "test_chat" / "test_chat.msgpack"

    recorded = run(project, "--cassette-record=once")
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(
        [
            "*= pytest-toolnexus =*",
            "cassettes: 1 used, 0 replayed, 1 recorded, 1 written",
            "  written: cassettes/test_chat/test_chat.msgpack",
        ]
    )
    assert len(emulator.requests) == 1
    assert sent_texts(path) == ["hello"]

    # Then: with no option the cassette replays, and the server sees nothing more
    replayed = run(project)
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["cassettes: 1 used, 1 replayed, 0 recorded, 0 written"])

    # And: once, with the file present, only replays
    again = run(project, "--cassette-record=once")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["cassettes: 1 used, 1 replayed, 0 recorded, 0 written"])
    assert len(emulator.requests) == 1


def test_record_new_replays_what_matches_and_appends_the_rest(project, emulator):
    project.makepyfile(test_chat=ONE_CHAT)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)

    # Given the test now sends a second request
    project.makepyfile(
        test_chat="""
        import pytest


        @pytest.mark.cassette
        def test_chat(chat):
            assert chat("hello")
            assert chat("and another")
        """
    )

    result = run(project, "--cassette-record=new")

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["cassettes: 1 used, 1 replayed, 1 recorded, 1 written"])
    assert [r.body["messages"][0]["content"] for r in emulator.requests] == [
        "hello",
        "and another",
    ]
    path = project.path / "cassettes" / "test_chat" / "test_chat.msgpack"
    assert sent_texts(path) == ["hello", "and another"]
    run(project).assert_outcomes(passed=1)
    assert len(emulator.requests) == 2


def test_record_all_records_everything_again(project, emulator):
    project.makepyfile(test_chat=ONE_CHAT)
    path = project.path / "cassettes" / "test_chat" / "test_chat.msgpack"
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    first_run = load_cassette(path).meta["run_id"]

    result = run(project, "--cassette-record=all")

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["cassettes: 1 used, 0 replayed, 1 recorded, 1 written"])
    assert len(emulator.requests) == 2
    rewritten = load_cassette(path)
    assert rewritten.meta["run_id"] != first_run
    assert sent_texts(path) == ["hello"]


# -- timing -------------------------------------------------------------------------------------


def test_timing_virtual_makes_sleeps_instant_and_notes_them(project):
    # Given a recorded cassette (recording runs on real time, so record without the sleep)
    project.makepyfile(test_sleep=ONE_CHAT)
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    project.makepyfile(
        test_sleep="""
        import time

        import pytest


        @pytest.mark.cassette
        def test_chat(cassette, chat, wall):
            chat("hello")
            started = wall()
            time.sleep(5)
            assert wall() - started < 5 / 2  # clearly not the 5 s
            assert [(s.kind, s.duration) for s in cassette.sleeps] == [("time.sleep", 5.0)]
            assert cassette.elapsed >= 5.0
            assert cassette.timing == "virtual"
        """
    )

    result = run(project, "--cassette-timing=virtual")

    result.assert_outcomes(passed=1)


# Between the recorded deltas. The first and the last are 2.1 s apart: long enough that a
# replay keeping (or sleeping) that time is never confused with one a loaded machine slowed.
DELTA_GAP = 0.7
RECORDED = round(3 * DELTA_GAP, 3)


@pytest.mark.parametrize(
    ("timing", "check"),
    [
        ("virtual", "spread >= RECORDED / 2 and took < RECORDED / 2"),
        ("real", "spread >= RECORDED / 2 and took >= RECORDED / 2"),
        ("instant", "spread < RECORDED / 2 and took < RECORDED / 2"),
    ],
    ids=["virtual", "real", "instant"],
)
def test_timing_option_decides_how_a_recorded_stream_replays(project, emulator, timing, check):
    # Given a stream recorded with DELTA_GAP seconds between its four deltas
    emulator.delay = DELTA_GAP
    emulator.events = 4
    project.makepyfile(
        test_stream="""
        import pytest


        @pytest.mark.cassette
        def test_stream(stream):
            assert len(stream("count")) >= 4
        """
    )
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    project.makepyfile(
        test_stream=f"""
        import pytest

        RECORDED = {RECORDED}


        @pytest.mark.cassette
        def test_stream(cassette, stream):
            arrivals = [at for at, line in stream("count")]
            took = arrivals[-1] - arrivals[0]
            deliveries = cassette.requests[0].deliveries
            spread = deliveries[-1] - deliveries[0]
            assert cassette.timing == "{timing}"
            assert {check}, (took, spread)
        """
    )

    # When it replays with the timing option
    result = run(project, f"--cassette-timing={timing}")

    # Then the deltas reach the client on that clock (took: real seconds from the first delta
    # to the last; spread: the same on the cassette's clock), keeping the recorded time or
    # clearly not, and the server is not asked again
    result.assert_outcomes(passed=1)
    assert len(emulator.requests) == 1


# -- where cassettes go, and hosts that bypass them ---------------------------------------------


def test_cassette_dir_relative_to_the_rootdir_or_absolute(project, emulator, tmp_path):
    project.makepyfile(test_chat=ONE_CHAT)
    elsewhere = tmp_path / "elsewhere"

    run(project, "--cassette-record=once", "--cassette-dir=recordings").assert_outcomes(passed=1)
    run(project, "--cassette-record=once", f"--cassette-dir={elsewhere}").assert_outcomes(passed=1)

    assert (project.path / "recordings" / "test_chat" / "test_chat.msgpack").is_file()
    assert (elsewhere / "test_chat" / "test_chat.msgpack").is_file()
    assert not (project.path / "cassettes").exists()
    run(project, "--cassette-dir=recordings").assert_outcomes(passed=1)
    run(project, f"--cassette-dir={elsewhere}").assert_outcomes(passed=1)
    assert len(emulator.requests) == 2


ALLOWED_AND_NOT = """
import pytest


@pytest.mark.cassette
def test_chat(chat, cassette):
    base = "{base}"
    assert chat("to localhost", base=base.replace("127.0.0.1", "localhost"))
    assert chat("to the cassette")
    assert [r.url.split("/")[2].split(":")[0] for r in cassette.requests] == ["127.0.0.1"]
    print(f"\\ntest_chat: record={{cassette.record_mode}} timing={{cassette.timing}}")
"""


def test_allow_hosts_sends_a_named_host_live_and_records_only_the_rest(project, emulator):
    project.makepyfile(test_hosts=ALLOWED_AND_NOT.format(base=emulator.base_url))
    path = project.path / "cassettes" / "test_hosts" / "test_chat.msgpack"

    run(project, "--cassette-record=once", "--cassette-allow-hosts=localhost").assert_outcomes(
        passed=1
    )

    assert len(emulator.requests) == 2
    assert sent_texts(path) == ["to the cassette"]

    # Then on replay the allowed host is reached live again; the rest comes from the cassette
    run(project, "--cassette-allow-hosts=example.org,localhost").assert_outcomes(passed=1)
    assert [r.body["messages"][0]["content"] for r in emulator.requests] == [
        "to localhost",
        "to the cassette",
        "to localhost",
    ]


def test_ini_keys_mean_what_the_options_mean(project, emulator):
    project.makeini(
        """
        [pytest]
        cassette_record = once
        cassette_timing = instant
        cassette_dir = tapes
        cassette_allow_hosts = localhost
        """
    )
    project.makepyfile(test_hosts=ALLOWED_AND_NOT.format(base=emulator.base_url))

    first = run(project, "-s")
    second = run(project, "-s")

    first.assert_outcomes(passed=1)
    second.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["test_chat: record=once timing=instant"])
    second.stdout.fnmatch_lines(["test_chat: record=once timing=instant"])
    second.stdout.fnmatch_lines(["cassettes: 1 used, 1 replayed, 0 recorded, 0 written"])
    assert sent_texts(project.path / "tapes" / "test_hosts" / "test_chat.msgpack") == [
        "to the cassette"
    ]
    assert len(emulator.requests) == 3


# -- layering -----------------------------------------------------------------------------------

LAYERS = """
import pytest


@pytest.fixture
def cassette_config():
    return {"record": "all", "timing": "instant"}


@pytest.mark.cassette
def test_config(cassette, chat):
    chat("config")
    print(f"\\ntest_config: record={cassette.record_mode} timing={cassette.timing}")


@pytest.mark.cassette(record="once", timing="virtual")
def test_marker(cassette, chat):
    chat("marker")
    print(f"\\ntest_marker: record={cassette.record_mode} timing={cassette.timing}")
"""


def test_layers_ini_then_config_fixture_then_marker_then_command_line(project, emulator):
    # Given the ini says none/real, cassette_config says all/instant, a marker says once/virtual
    project.makeini("[pytest]\ncassette_record = none\ncassette_timing = real\n")
    project.makepyfile(test_layers=LAYERS)

    # When it runs with no option: the config fixture beats the ini, the marker beats both
    first = run(project, "-s")

    first.assert_outcomes(passed=2)
    # One match per line: the inner run's order is random (pytest-randomly), and not the point.
    first.stdout.fnmatch_lines(["test_config: record=all timing=instant"])
    first.stdout.fnmatch_lines(["test_marker: record=once timing=virtual"])
    assert len(emulator.requests) == 2

    # When the command line says none and real, it wins over all of them
    second = run(project, "-s", "--cassette-record=none", "--cassette-timing=real")

    second.assert_outcomes(passed=2)
    second.stdout.fnmatch_lines(["test_config: record=none timing=real"])
    second.stdout.fnmatch_lines(["test_marker: record=none timing=real"])
    assert len(emulator.requests) == 2


# -- CI -----------------------------------------------------------------------------------------

ASKS_TO_RECORD = """
import pytest


@pytest.mark.cassette(record="{record}")
def test_chat(chat):
    assert chat("{text}")
"""


def test_in_ci_a_marker_does_not_record_but_the_command_line_does(project, emulator, monkeypatch):
    monkeypatch.setenv("CI", "true")
    project.makepyfile(test_ci=ASKS_TO_RECORD.format(record="once", text="hello"))
    path = project.path / "cassettes" / "test_ci" / "test_chat.msgpack"

    # When the marker asks for once under CI, nothing is recorded and the error says why
    refused = run(project)

    refused.assert_outcomes(failed=1)
    note = (
        " Recording is off because CI is set in the environment (this test asked for record "
        "mode 'once'); pass --cassette-record=once to record in CI."
    )
    refused.stdout.fnmatch_lines([NOT_FOUND.format(path=path, note=note)])
    assert emulator.requests == []

    # When the command line asks, it records even under CI
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    assert sent_texts(path) == ["hello"]

    # And a miss under CI, with a marker asking for new, carries the same advice
    project.makepyfile(test_ci=ASKS_TO_RECORD.format(record="new", text="changed"))
    missed = run(project)
    missed.assert_outcomes(failed=1)
    missed.stdout.fnmatch_lines(
        [
            "E *CassetteMissError: No recorded interaction matches POST "
            f"{emulator.base_url}/v1/chat/completions",
            "E *  record mode:   none",
            "E *Recording is off because CI is set in the environment (this test asked for "
            "record mode 'new'); pass --cassette-record=new to record in CI.",
        ]
    )
    assert len(emulator.requests) == 1


@pytest.mark.parametrize("value", ["false", "0"])
def test_ci_set_to_a_false_value_lets_a_marker_record(project, emulator, monkeypatch, value):
    monkeypatch.setenv("CI", value)
    project.makepyfile(test_ci=ASKS_TO_RECORD.format(record="once", text="hello"))

    run(project).assert_outcomes(passed=1)

    assert len(emulator.requests) == 1


# -- bad values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        (
            'cassette(recrod="once")',
            "@pytest.mark.cassette: unknown cassette option 'recrod'; the options are "
            + ", ".join(OPTION_NAMES),
        ),
        (
            'cassette(record="sometimes")',
            "@pytest.mark.cassette: record='sometimes' is not a record mode (none, once, new, all)",
        ),
        (
            'cassette(timing="slow")',
            "@pytest.mark.cassette: timing='slow' is not a timing mode (virtual, real, instant)",
        ),
        (
            'cassette("a", "b")',
            "@pytest.mark.cassette takes one positional argument, the cassette name",
        ),
        # issue 23, row 10: each was a bare ValueError, accepted silently, or failed late
        (
            'cassette(speed=float("nan"))',
            "@pytest.mark.cassette: speed must be a positive, finite number, got nan",
        ),
        (
            'cassette(speed=float("inf"))',
            "@pytest.mark.cassette: speed must be a positive, finite number, got inf",
        ),
        (
            "cassette(allow_hosts=None)",
            "@pytest.mark.cassette: allow_hosts=None is not a value of allow_hosts; leave the "
            "option out *",
        ),
        (
            'cassette(match_headers={"a": 1})',
            "@pytest.mark.cassette: match_headers must be a list of strings, got {'a': 1}",
        ),
        (
            'cassette(meta={"o": object()})',
            "@pytest.mark.cassette: meta cannot be stored in a cassette (can not serialize "
            "'object' object); *",
        ),
        (
            'cassette("~/x")',
            "@pytest.mark.cassette: the cassette name '~/x' starts with '~', *",
        ),
    ],
)
def test_a_bad_marker_is_a_usage_error_naming_the_test(project, emulator, marker, message):
    project.makepyfile(
        test_bad=f"""
        import pytest


        @pytest.mark.{marker}
        def test_chat(chat):
            chat("never sent")
        """
    )

    result = run(project)

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"E *pytest.UsageError: test_bad.py::test_chat: {message}"])
    assert emulator.requests == []


def test_a_bad_ini_value_is_a_usage_error_naming_the_ini_file(project):
    project.makeini("[pytest]\ncassette_record = sometimes\n")
    project.makepyfile(test_chat=ONE_CHAT)

    result = run(project)

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "E *pytest.UsageError: test_chat.py::test_chat: the ini file: record='sometimes' "
            "is not a record mode (none, once, new, all)"
        ]
    )


@pytest.mark.parametrize(
    ("option", "choices"),
    [
        ("--cassette-record=sometimes", "*none*once*new*all*"),
        ("--cassette-timing=slow", "*virtual*real*instant*"),
        ("--cassette-unused=shout", "*warn*fail*ignore*"),
    ],
)
def test_a_bad_option_value_is_rejected_before_the_run(project, option, choices):
    project.makepyfile(test_chat=ONE_CHAT)

    result = run(project, option)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    name, value = option.split("=")
    result.stderr.fnmatch_lines([f"*error: argument {name}: invalid choice: '{value}' {choices}"])


# -- next to pytest-recording -------------------------------------------------------------------


def test_help_lists_both_plugins_options_without_a_conflict(project):
    # In a process of its own, as a user runs it: pytest-recording 0.15 does not load into a
    # second in-process run (pytester's), so its options would be missing there for that alone.
    # Which plugin's group comes first follows the order the plugins load in, which a new
    # release of either can change: each group is checked on its own.
    result = project.runpytest_subprocess("-p", "no:hypothesispytest", "--help")

    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["recording:", "  --record-mode={once,new_episodes,none,all,rewrite}"]
    )
    result.stdout.fnmatch_lines(
        [
            "pytest-toolnexus: record and replay HTTP traffic:",
            "  --cassette-record={none,once,new,all}",
            "  --cassette-timing={virtual,real,instant}",
            "  --cassette-dir=CASSETTE_DIR",
            "  --cassette-allow-hosts=CASSETTE_ALLOW_HOSTS",
            "  --cassette-unused={warn,fail,ignore}",
            "  --cassette-report-unused-files",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "  cassette_record (string):",
            "  cassette_timing (string):",
            "  cassette_dir (string):",
            "  cassette_allow_hosts (args):",
            "  cassette_unused (string):",
        ]
    )


def test_a_vcr_test_and_a_cassette_test_pass_in_the_same_run(project, emulator):
    project.makepyfile(
        test_both="""
        import pytest


        @pytest.mark.vcr
        def test_vcr(chat):
            assert chat("through vcrpy")


        @pytest.mark.cassette
        def test_toolnexus(chat):
            assert chat("through toolnexus")
        """
    )

    recorded = run(project, "--record-mode=once", "--cassette-record=once")
    replayed = run(project, "--record-mode=none")

    recorded.assert_outcomes(passed=2)
    replayed.assert_outcomes(passed=2)
    replayed.stdout.fnmatch_lines(["cassettes: 1 used, 1 replayed, 0 recorded, 0 written"])
    folder = project.path / "cassettes" / "test_both"
    assert sorted(p.name for p in folder.iterdir()) == ["test_toolnexus.msgpack", "test_vcr.yaml"]
    # Sorted: which of the two inner tests runs first is random, and not the point.
    assert sorted(r.body["messages"][0]["content"] for r in emulator.requests) == [
        "through toolnexus",
        "through vcrpy",
    ]
