"""The retry and streaming conformance kit, run against the real ``openai`` SDK.

The client is the SDK as shipped, with ``max_retries=2`` and no transport passed: the kit's
``served(...)`` routes every httpx/httpx2 client to a cassette built for each test, on the
virtual clock, so a ``Retry-After: 150`` costs no wall time. Where the SDK departs from RFC 9110
or ADR 0027 the kit records a finding instead of failing, and says what would conform; list
them with

    .venv/bin/pytest examples/test_conformance_openai.py -v

``MoreFindings`` adds the cases the kit leaves to its user (an HTTP-date or zero
``Retry-After``, a 501 or 505, an error before a stream, and errors in the middle of one),
built from the kit's own blocks.
docs/retries.md tabulates the results.
"""

import email.utils
import functools
import math
import time
from collections.abc import Iterator

import openai
import pytest

from pytest_toolnexus import faults
from pytest_toolnexus.conformance import RetryConformance, served

MESSAGES = [{"role": "user", "content": "Say something, word by word."}]


def named(error: BaseException) -> str:
    return f"{type(error).__module__.split('.')[0]}.{type(error).__name__}"


def described(error: BaseException) -> str:
    """The error's type, and what it wraps when it is the SDK's own type."""
    if named(error).startswith(("httpx.", "httpx2.")):
        return f"{named(error)}, unwrapped"
    cause = error.__cause__
    return named(error) + (f" (from {named(cause)})" if cause is not None else "")


def carries_text(event) -> bool:
    data = event.get("data")
    if not isinstance(data, dict):
        return False
    if data.get("type") == "content_block_delta":  # Anthropic
        return True
    choices = data.get("choices") or []  # OpenAI chat
    return bool(choices and choices[0]["delta"].get("content"))


def third_delta(interaction) -> int:
    """The index of the event carrying the third text delta of a built stream, so a fault
    there lets exactly two deltas through, whatever the provider's framing."""
    events = interaction.response.body.events
    return [index for index, event in enumerate(events) if carries_text(event)][2]


class MoreFindings:
    """Extra findings for a :class:`RetryConformance` subclass: what the client does with an
    HTTP-date or a zero ``Retry-After``, with a 5xx outside ADR 0027's retryable set, with an
    error before a stream, and with a stream that fails halfway."""

    def test_finding_http_date_retry_after(self, tmp_path, request):
        with served([self._answer(stream=False)], tmp_path) as session:
            due = math.floor(time.time()) + 3  # virtual wall time: exact
            date = email.utils.formatdate(due, usegmt=True)
            session.inject(faults.prepend(429, retry_after=date))
            wall, start = time.time(), session.elapsed
            text, error = self._attempt(self.call)
        assert error is None, f"a 429 with an HTTP-date Retry-After was not retried: {error}"
        assert text == self.answer
        retried_at = wall + session.requests[1].sent_at - start
        early = due - retried_at
        observed = "retried at the date" if abs(early) < 0.01 else f"retried {early:.3f} s early"
        fix = "ADR 0027 honours delay-seconds only: back off from an HTTP-date"
        self._finding(
            request, "Retry-After: <HTTP-date 3 s ahead> (valid, RFC 9110)", observed, fix
        )

    def test_finding_retry_after_zero(self, tmp_path, request):
        with served([self._error(429, "0"), self._answer(stream=False)], tmp_path) as session:
            text, error = self._attempt(self.call)
        assert error is None, f"a 429 with Retry-After: 0 was not retried: {error}"
        assert text == self.answer
        wait = session.requests[1].sent_at - session.requests[0].finished_at
        observed = "retried at once" if wait == 0 else f"retried after {wait:.3f} s"
        fix = None if wait == 0 else "Retry-After: 0 means retry now (ADR 0027): do not back off"
        self._finding(request, "Retry-After: 0 (ADR 0027: retry now)", observed, fix)

    @pytest.mark.parametrize("status", [501, 505])
    def test_finding_5xx_outside_the_retryable_set(self, status, tmp_path, request):
        interactions = [self._error(status), self._answer(stream=False)]
        with served(interactions, tmp_path, allow_repeats=True) as session:
            _, error = self._attempt(self.call)
        attempts = len(session.requests)
        retried = not (error is not None and attempts == 1)
        observed = f"{attempts} attempts" if retried else "not retried"
        fix = f'ADR 0027 never retries "any 5xx": fail a {status} after one attempt'
        self._finding(
            request,
            f"status {status} (a 5xx outside the retryable set)",
            observed,
            fix if retried else None,
        )

    def test_finding_error_before_a_stream(self, tmp_path, request):
        interactions = [self._error(503, "1"), self._answer(stream=True)]
        with served(interactions, tmp_path) as session:
            deltas, error = self._attempt(lambda: list(self.stream()))
        assert error is None, f"a 503 before a stream was not retried: {error}"
        assert "".join(deltas) == self.answer
        waits = ", ".join(f"{sleep.duration:.3f} s" for sleep in session.sleeps)
        observed = f"retried after a wait of {waits}, then streamed"
        self._finding(request, "503 with Retry-After: 1 before a stream", observed)

    @pytest.mark.parametrize("kind", ["disconnect", "error_event"])
    def test_finding_error_mid_stream(self, kind, tmp_path, request):
        answer = self._answer(stream=True)
        fault = getattr(faults, kind)(after_event=third_delta(answer))
        received: list[str] = []
        with served([answer], tmp_path, faults=[fault]) as session:
            try:
                received.extend(self.stream())
                error = None
            except Exception as exc:  # whatever the SDK raises is the finding
                error = exc
        assert error is not None, "the stream failed halfway and the client did not raise"
        attempts = len(session.requests)
        observed = (
            f"raises {described(error)} after {len(received)} delta(s); "
            f"{'not retried' if attempts == 1 else f'{attempts} attempts'}"
        )
        fix = (
            "raise the SDK's own error type, with the transport error as its cause (D3)"
            if described(error).endswith("unwrapped")
            else None
        )
        self._finding(request, f"mid-stream {fault.describe()}", observed, fix)


@functools.cache
def client() -> openai.OpenAI:
    """One SDK client, as an application would keep it, with its default http client."""
    return openai.OpenAI(api_key="test-key-not-a-secret", max_retries=2)


class TestOpenAIConformance(MoreFindings, RetryConformance):
    provider = "openai"

    def call(self) -> str:
        reply = client().chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
        return reply.choices[0].message.content or ""

    def stream(self) -> Iterator[str]:
        chunks = client().chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=True
        )
        for chunk in chunks:
            if chunk.choices and chunk.choices[0].delta.content:
                yield chunk.choices[0].delta.content
