"""The default (virtual) timing in real suites: pydantic models built while a cassette is
active, the anthropic SDK's deferred model builds, names bound in other modules, and a user's
own time-machine or freezegun inside a cassette test.

Each project runs in a fresh interpreter (``runpytest_subprocess``), as a user's suite does, so
nothing this process already built or patched can hide a failure.
"""

import pytest

from pytest_toolnexus import build


def empty_cassettes(pytester, module, *names):
    """Committed, empty cassettes for tests of ``module`` that make no request."""
    for name in names:
        path = pytester.path / "cassettes" / module / f"{name}.msgpack"
        path.parent.mkdir(parents=True, exist_ok=True)
        build.build_cassette(path, [])


# Given: models whose datetime fields sit behind forward references and whose build is
# deferred (as the SDKs' are), so pydantic resolves ``datetime`` only when the model is rebuilt:
# in the second cassette test of the run.
PYDANTIC_TESTS = """
from __future__ import annotations

import datetime

import pydantic
import pytest

ORIGINAL_DATETIME = datetime.datetime


class Envelope(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(defer_build=True)
    payload: Payload


class Payload(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(defer_build=True)
    at: datetime.datetime
    on: datetime.date


@pytest.mark.cassette
def test_first_cassette_test():
    assert datetime.datetime is ORIGINAL_DATETIME


@pytest.mark.cassette
def test_second_rebuilds_the_model():
    assert datetime.datetime is ORIGINAL_DATETIME
    assert Envelope.model_rebuild() is True
    envelope = Envelope.model_validate(
        {"payload": {"at": "2024-05-06T07:08:09+00:00", "on": "2024-05-06"}}
    )
    assert type(envelope.payload.at) is ORIGINAL_DATETIME
    assert isinstance(datetime.datetime.now(), ORIGINAL_DATETIME)


def test_a_later_test_without_a_cassette_is_untouched():
    assert Envelope.model_validate(
        {"payload": {"at": "2024-05-06T07:08:09+00:00", "on": "2024-05-06"}}
    ).payload.on == datetime.date(2024, 5, 6)
"""


def test_a_pydantic_model_rebuilt_in_a_cassette_test_validates(pytester):
    empty_cassettes(
        pytester, "test_models", "test_first_cassette_test", "test_second_rebuilds_the_model"
    )
    pytester.makepyfile(test_models=PYDANTIC_TESTS)

    # Then: in the written order and in a shuffled one (pytest-randomly, seed 3), all pass.
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--cassette-unused=ignore")
    result.assert_outcomes(passed=3)
    shuffled = pytester.runpytest_subprocess(
        "-p", "randomly", "-p", "no:cacheprovider", "--randomly-seed=3"
    )
    shuffled.assert_outcomes(passed=3)


# The anthropic SDK builds its models on first use (defer_build): the first stream parsed in a
# process builds Message, whose Container field holds a datetime, inside the cassette test.
ANTHROPIC_TESTS = """
import datetime
import time

import anthropic
import httpx2
import pytest

ORIGINAL_DATETIME = datetime.datetime


@pytest.mark.cassette("claude")
def test_stream_builds_the_sdk_models(cassette):
    assert not anthropic.types.Message.__pydantic_complete__
    client = anthropic.Anthropic(api_key="k", http_client=httpx2.Client(), max_retries=0)
    start, texts, arrivals = time.monotonic(), [], []
    with client.messages.stream(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "Hi"}]
    ) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                texts.append(event.delta.text)
                arrivals.append(round(time.monotonic() - start, 6))
        message = stream.get_final_message()
    assert anthropic.types.Message.__pydantic_complete__
    assert "".join(texts) == "Built models, built on time."
    assert message.stop_reason == "end_turn"
    assert arrivals == [0.25, 0.35, 0.45, 0.55, 0.65]
    assert datetime.datetime is ORIGINAL_DATETIME
"""


def test_the_anthropic_sdk_builds_its_models_inside_a_cassette_test(pytester):
    path = pytester.path / "cassettes" / "test_claude" / "claude.msgpack"
    path.parent.mkdir(parents=True)
    cadence = build.Cadence(ttft=0.25, gap=0.1)
    build.build_cassette(
        path, [build.anthropic_messages("Built models, built on time.", cadence=cadence)]
    )
    pytester.makepyfile(test_claude=ANTHROPIC_TESTS)

    result = pytester.runpytest_subprocess()

    result.assert_outcomes(passed=1)


# A library module, imported before any test starts, that captured the clock functions by name.
LIBRARY = """
from time import monotonic, perf_counter, sleep, time

STARTED = {"at": monotonic}


def stamp():
    return monotonic(), perf_counter(), time()


def wait(seconds):
    sleep(seconds)
"""

LIBRARY_TESTS = """
import threading
import time

import pytest

import timelib


@pytest.mark.cassette
def test_bound_names_read_virtual_time(cassette):
    mono, perf, unix = timelib.stamp()
    real_before = time.clock_gettime(time.CLOCK_MONOTONIC)
    timelib.wait(30)
    assert time.clock_gettime(time.CLOCK_MONOTONIC) - real_before < 29
    after = timelib.stamp()
    assert [round(a - b, 9) for a, b in zip(after, (mono, perf, unix))] == [30.0, 30.0, 30.0]
    assert timelib.STARTED["at"]() == after[0]
    assert [(s.kind, s.duration) for s in cassette.sleeps] == [("time.sleep", 30.0)]
    LAST["inside"] = after[:2]


LAST = {}


def test_afterwards_the_names_move_with_real_time_and_never_back():
    mono, perf, _ = timelib.stamp()
    # Never smaller than inside, though real time is 30 s behind the clock's last reading.
    assert (mono, perf) >= LAST["inside"]
    assert mono >= LAST["inside"][0] and perf >= LAST["inside"][1]
    real = time.clock_gettime(time.CLOCK_MONOTONIC)
    threading.Event().wait(0.05)
    moved, took = timelib.stamp()[0] - mono, time.clock_gettime(time.CLOCK_MONOTONIC) - real
    assert abs(moved - took) < took / 2  # it moves with real time
"""


def test_names_bound_by_another_module_before_the_test_read_virtual_time(pytester):
    empty_cassettes(pytester, "test_library", "test_bound_names_read_virtual_time")
    pytester.makepyfile(timelib=LIBRARY)
    pytester.makepyfile(test_library=LIBRARY_TESTS)
    pytester.makeconftest("import timelib  # imported before any test, as a library is\n")

    result = pytester.runpytest_subprocess("-p", "no:randomly")

    result.assert_outcomes(passed=2)


# A user's own time travel inside a cassette test: it nests, and wins for its block.
NESTED_TESTS = """
import datetime
import time

import freezegun
import pytest
import time_machine

UTC = datetime.timezone.utc


@pytest.mark.cassette
def test_time_machine_nests(cassette):
    before = time.time()
    with time_machine.travel(datetime.datetime(2001, 2, 3, tzinfo=UTC), tick=False):
        assert datetime.datetime.now(UTC) == datetime.datetime(2001, 2, 3, tzinfo=UTC)
        time.sleep(5)  # still the virtual clock's sleep
    assert time.time() == before + 5
    assert cassette.elapsed == 5


@pytest.mark.cassette
def test_freezegun_nests(cassette):
    before = time.time()
    with freezegun.freeze_time("2001-02-03 04:05:06"):
        assert datetime.datetime.now() == datetime.datetime(2001, 2, 3, 4, 5, 6)
    time.sleep(2)
    assert time.time() == before + 2
    assert datetime.datetime.now().year > 2001


@pytest.fixture(scope="module")
def frozen():
    with freezegun.freeze_time("2001-02-03"):
        yield


@pytest.mark.cassette
def test_freezegun_started_first_is_refused(frozen, cassette):
    pass
"""


def test_a_users_own_time_travel_nests_and_freezegun_started_first_is_refused(pytester):
    empty_cassettes(
        pytester,
        "test_nested",
        "test_time_machine_nests",
        "test_freezegun_nests",
        "test_freezegun_started_first_is_refused",
    )
    pytester.makepyfile(test_nested=NESTED_TESTS)

    result = pytester.runpytest_subprocess("-p", "no:randomly")

    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_freezegun_started_first_is_refused*",
            "*freezegun.freeze_time() is active*Start the cassette first*",
        ]
    )


@pytest.mark.parametrize("timing", ["virtual", "real", "instant"])
def test_datetime_is_the_original_class_in_every_timing_mode(pytester, timing):
    pytester.makepyfile(
        test_identity=f"""
        import datetime, time
        import pytest

        ORIGINAL = datetime.datetime, datetime.date, time.struct_time

        @pytest.mark.cassette(timing="{timing}")
        def test_identity():
            assert (datetime.datetime, datetime.date, time.struct_time) == ORIGINAL
            assert all(a is b for a, b in zip(
                (datetime.datetime, datetime.date, time.struct_time), ORIGINAL))
        """
    )
    empty_cassettes(pytester, "test_identity", "test_identity")

    pytester.runpytest_subprocess().assert_outcomes(passed=1)


@pytest.fixture(autouse=True)
def _no_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
