"""The retry and streaming conformance kit, run the way a client's own suite runs it.

A toy chat client is written with plain ``httpx`` into a pytester project, with a kit subclass
beside it. The correct toy passes the whole kit. Each deliberately broken toy (one that never
retries, one that retries 400s, one that buffers streams, one that swallows a mid-stream
error) fails exactly the kit tests that describe its defect, each with a message that says
what happened.
"""

from pathlib import Path

import pytest

TOY = '''
"""A small chat client on httpx, with switches that break it on purpose."""

import json
import time

import httpx

URL = "https://api.openai.com/v1/chat/completions"
RETRYABLE = {429, 500, 502, 503, 504, 529}
MESSAGES = [{"role": "user", "content": "Hi"}]
HTTP = httpx.Client()  # one connection pool (and TLS context) for every call


class ToyError(Exception):
    def __init__(self, status, text):
        super().__init__(f"HTTP {status}: {text[:60]}")
        self.status = status


class ToyClient:
    def __init__(self, *, retries=2, retry_on=RETRYABLE, buffer=False, swallow=False):
        self.retries = retries
        self.retry_on = set(retry_on)
        self.buffer = buffer
        self.swallow = swallow

    def _send(self, body, stream):
        for attempt in range(self.retries + 1):
            response = HTTP.send(HTTP.build_request("POST", URL, json=body), stream=stream)
            if response.status_code < 400:
                return response
            response.read()
            if response.status_code not in self.retry_on or attempt == self.retries:
                raise ToyError(response.status_code, response.text)
            value = response.headers.get("retry-after", "")
            time.sleep(int(value) if value.isdigit() else 0.4 * 2**attempt)
        raise AssertionError("unreachable")

    def ask(self):
        response = self._send({"model": "toy", "messages": MESSAGES}, stream=False)
        return response.json()["choices"][0]["message"]["content"]

    def stream(self):
        body = {"model": "toy", "messages": MESSAGES, "stream": True}
        response = self._send(body, stream=True)
        try:
            if self.buffer:
                lines = response.read().decode().splitlines()
            else:
                lines = response.iter_lines()
            for line in lines:
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line[6:]).get("choices", []):
                    if choice["delta"].get("content"):
                        yield choice["delta"]["content"]
        except httpx.HTTPError:
            if not self.swallow:
                raise
        finally:
            response.close()
'''

KIT_TEST = """
from pytest_toolnexus.conformance import RetryConformance

from toy import ToyClient


class TestToy(RetryConformance):
    provider = "openai"

    def call(self):
        return ToyClient({options}).ask()

    def stream(self):
        yield from ToyClient({options}).stream()
"""

# Inner pytest runs skip the plugins they do not need: faster, and no warnings of theirs.
QUIET_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:cacheprovider")

KIT_TESTS = 21  # 6 retryable + 5 client errors + delay-seconds + 2 streaming + 5 + 2 findings


@pytest.fixture
def kit(pytester):
    """Runs the kit against the toy client built with ``options``."""
    pytester.makepyfile(toy=TOY)

    def run(options="", *args):
        pytester.makepyfile(test_toy=KIT_TEST.format(options=options))
        # A socket or asyncio transport the garbage collector closes late may warn in some
        # runs and not others; only the kit's findings are counted.
        return pytester.runpytest(
            *QUIET_PLUGINS, "-W", "always", "-W", "ignore::ResourceWarning", "-rf", *args
        )

    return run


def test_a_correct_client_passes_the_whole_kit_quietly(kit):
    # Given a client that keeps to RFC 9110 and ADR 0027
    result = kit()

    # Then the run passes with no warning, and its findings are one line of the summary
    result.assert_outcomes(passed=KIT_TESTS, warnings=0)
    assert "ConformanceFinding" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*= conformance findings =*",
            "7 finding(s) in 1 client suite(s), 0 of them departing from RFC 9110 or ADR 0027 "
            "(-v lists them, with what to do)",
        ]
    )


def test_v_lists_the_findings(kit):
    result = kit("", "-v")

    result.assert_outcomes(passed=KIT_TESTS, warnings=0)
    result.stdout.fnmatch_lines(
        [
            "7 finding(s) in 1 client suite(s), 0 of them departing from RFC 9110 or ADR 0027",
            "test_toy.py::TestToy",
            "  Retry-After: 0.5 (not valid delay-seconds (RFC 9110)): retried after 0.400 s",
        ],
        consecutive=False,
    )
    result.stdout.fnmatch_lines_random(
        [
            "  Retry-After: soon (not valid delay-seconds (RFC 9110)): retried after 0.400 s",
            "  Retry-After: 150 (whole delay-seconds): retried after 150.000 s",
            "  status 408 (outside the retryable set): not retried",
        ]
    )
    result.stdout.no_fnmatch_line("*departs; to conform*")


def test_a_departure_is_reported_with_what_to_do(kit):
    # Given a client that retries a 408, outside ADR 0027's retryable set
    retry_on = "retry_on={408, 429, 500, 502, 503, 504, 529}"

    # When the kit runs it, and lists its findings
    result = kit(retry_on, "-v")

    # Then the kit passes, and the summary names the departure and what would conform
    result.assert_outcomes(passed=KIT_TESTS, warnings=0)
    result.stdout.fnmatch_lines(
        [
            "7 finding(s) in 1 client suite(s), 1 of them departing from RFC 9110 or ADR 0027",
            "  status 408 (outside the retryable set): 2 attempts",
            "    departs; to conform: ADR 0027 retries only 429, 500, 502, 503, 504, 529: fail a "
            "408 after one attempt",
        ],
        consecutive=False,
    )


def test_conformance_findings_warn_makes_a_departure_a_warning(kit):
    result = kit("retry_on={408, 429, 500, 502, 503, 504, 529}", "--conformance-findings=warn")

    result.assert_outcomes(passed=KIT_TESTS, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*ConformanceFinding: openai client, status 408 (outside the retryable set): "
            "2 attempts. ADR 0027 retries only 429, 500, 502, 503, 504, 529: fail a 408 after "
            "one attempt",
        ]
    )


def test_a_client_that_never_retries_fails_every_retry_test(kit):
    result = kit("retries=0")

    result.assert_outcomes(passed=KIT_TESTS - 7, failed=7, warnings=0)
    result.stdout.fnmatch_lines_random(
        [
            f"FAILED test_toy.py::TestToy::test_retryable_status_is_retried[[]{status}[]]*"
            for status in (429, 500, 502, 503, 504, 529)
        ]
        + [
            "FAILED test_toy.py::TestToy::test_retry_after_delay_seconds_is_honoured*",
            "E *AssertionError: a 503 was not retried: the client raised ToyError: HTTP 503: "
            "*Service Unavailable (injected by pytest after 1 attempt(s)",
            "E *AssertionError: the client gave up after a 429 with Retry-After: 2: HTTP 429:*",
        ]
    )


def test_a_client_that_retries_400s_fails_the_fail_fast_tests(kit):
    result = kit("retry_on={400, 401, 403, 404, 422, 429, 500, 502, 503, 504, 529}")

    result.assert_outcomes(passed=KIT_TESTS - 5, failed=5, warnings=0)
    result.stdout.fnmatch_lines_random(
        [
            f"FAILED test_toy.py::TestToy::test_client_error_fails_after_one_attempt[[]{status}[]]*"
            for status in (400, 401, 403, 404, 422)
        ]
        + ["E *AssertionError: a 404 did not fail: the client returned an answer"]
    )


def test_a_client_that_buffers_streams_fails_the_incremental_test(kit):
    result = kit("buffer=True")

    result.assert_outcomes(passed=KIT_TESTS - 1, failed=1, warnings=0)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: all 7 deltas reached the client at once: the stream was "
            "buffered, not delivered incrementally",
            "FAILED test_toy.py::TestToy::test_stream_is_incremental*",
        ],
        consecutive=False,
    )


def test_a_client_that_swallows_a_mid_stream_error_fails_the_error_test(kit):
    result = kit("swallow=True")

    result.assert_outcomes(passed=KIT_TESTS - 1, failed=1, warnings=0)
    result.stdout.fnmatch_lines(
        [
            "E *AssertionError: the stream was cut after 3 events, and the client returned "
            "2 delta(s) without raising: the error was swallowed",
            "FAILED test_toy.py::TestToy::test_error_mid_stream_is_raised*",
        ],
        consecutive=False,
    )


def test_findings_are_kept_in_the_tests_user_properties(kit, pytester):
    result = kit("", "-k", "finding_unusual and negative", "--junitxml=report.xml")

    result.assert_outcomes(passed=1, warnings=0)
    report = (pytester.path / "report.xml").read_text()
    assert '<property name="finding:Retry-After: -1 (not valid delay-seconds (RFC 9110))"' in report
    assert 'value="retried after 0.400 s"' in report


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_the_green_example_suites_print_no_finding_warning(pytester):
    # Given the examples' conformance suites, against the openai and anthropic SDKs
    folder = pytester.mkpydir("examples")
    for name in ("test_conformance_openai.py", "test_conformance_anthropic.py"):
        folder.joinpath(name).write_text((EXAMPLES / name).read_text())

    # When they run, as the demo runs them: in a process of their own, since this one (an
    # xdist worker, say) may have imported the examples' modules under the same names
    result = pytester.runpytest_subprocess(*QUIET_PLUGINS, "-W", "ignore::ResourceWarning")

    # Then they pass without a warning, and the findings are counted in one line
    result.assert_outcomes(passed=56, warnings=0)
    assert "ConformanceFinding" not in result.stdout.str()
    # How many of them depart from RFC 9110 or ADR 0027 is the SDKs' own behaviour, which
    # moves with their releases (anthropic 2.17 wraps an error met while streaming, so one
    # finding less departs than with 2.16): the line counts them, whatever the number.
    result.stdout.fnmatch_lines(
        [
            "28 finding(s) in 2 client suite(s), * of them departing from RFC 9110 or "
            "ADR 0027 (-v lists them, with what to do)"
        ]
    )
