"""A miss that best-effort code swallows (issue 24, point 3).

databricks-sdk's ``Config()`` probes a metadata URL inside ``except Exception``. vcrpy's miss
is an ``Exception``, so such a probe failed quietly under vcrpy and its suite passed. The
policy (docs/misses.md, "A miss the code catches"):

- matching as vcrpy did (``match_on="vcrpy"``, which ``migrate`` writes), a miss is a
  ``VcrpyMissError``, an ``Exception`` as well as a ``CassetteMissError``; one the code catches
  is a ``SwallowedMissWarning`` and a line in the summary, and the test passes as it did;
- a native suite keeps failing loudly: a miss is a ``BaseException`` that no ``except
  Exception`` catches, and one caught anyway fails the test.

Each case records against a loopback server, then replays with the server stopped.
"""

import pytest

from pytest_toolnexus import CassetteMissError, VcrpyMissError
from tests.support.servers import Fixed, LoopbackServer

pytest_plugins = ["pytester"]

TESTS = """
import os

import httpx
import pytest

URL = os.environ["SERVER_URL"]


def best_effort_probe():
    try:
        httpx.get(URL + "/metadata/identity", timeout=1)
    except Exception:
        return None
    return "found"


@pytest.mark.cassette
def test_probe_then_answer():
    if os.environ.get("PROBE"):
        assert best_effort_probe() is None
    assert httpx.get(URL + "/v1/answer").json() == {"answer": 42}
"""

VCRPY_CONFIG = """
import pytest


def make_config():
    return {"match_on": "vcrpy"}


@pytest.fixture
def cassette_config():
    return make_config()
"""


def _project(pytester, monkeypatch, conftest):
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_probe=TESTS)
    with LoopbackServer(Fixed(200, [("Content-Type", "application/json")], b'{"answer":42}')) as s:
        monkeypatch.setenv("SERVER_URL", s.origin)
        pytester.runpytest_subprocess("--cassette-record=once").assert_outcomes(passed=1)
    monkeypatch.setenv("PROBE", "1")  # the replay also sends a request nothing recorded


def test_matching_as_vcrpy_a_swallowed_miss_is_a_warning_and_the_test_passes(pytester, monkeypatch):
    _project(pytester, monkeypatch, VCRPY_CONFIG)
    result = pytester.runpytest_subprocess("-W", "default")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*SwallowedMissWarning: test_probe.py::test_probe_then_answer: the code under test "
            "caught a cassette miss and went on*GET http://127.0.0.1:*/metadata/identity*",
            "misses the code under test caught and went on (as under vcrpy, match_on='vcrpy'):",
            "  test_probe.py::test_probe_then_answer: GET http://127.0.0.1:*/metadata/identity",
        ]
    )


def test_a_native_suite_still_fails_a_test_whose_code_caught_a_miss(pytester, monkeypatch):
    _project(pytester, monkeypatch, "")
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=0, failed=1)
    # The miss went through `except Exception` (it is a BaseException), so the probe's own
    # assertion is not what failed: the miss is, with its message.
    result.stdout.fnmatch_lines(["*CassetteMissError: No recorded interaction matches GET*"])
    result.stdout.no_fnmatch_line("*SwallowedMissWarning*")


def test_matching_as_vcrpy_a_miss_nobody_catches_still_fails_with_its_message(
    pytester, monkeypatch
):
    _project(pytester, monkeypatch, VCRPY_CONFIG)
    pytester.makepyfile(
        test_probe=TESTS.replace(
            '    if os.environ.get("PROBE"):\n        assert best_effort_probe() is None\n', ""
        ).replace('"/v1/answer"', '"/v1/other"')
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*VcrpyMissError: No recorded interaction matches GET*/v1/other*"])


def test_the_vcrpy_miss_is_caught_by_both_names():
    miss = VcrpyMissError("no match", path="x.msgpack")
    assert isinstance(miss, Exception)
    assert isinstance(miss, CassetteMissError)
    with pytest.raises(CassetteMissError):
        raise miss
