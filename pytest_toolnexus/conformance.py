"""A retry and streaming conformance kit any client's test suite can import.

Subclass :class:`RetryConformance` in a test module, say which wire format your client speaks,
and implement two methods that drive your client; pytest then runs the whole kit against it:

    from pytest_toolnexus.conformance import RetryConformance

    class TestMyClient(RetryConformance):
        provider = "openai"

        def call(self) -> str:
            return my_client.ask("Hi")                 # one request; the answer's text

        def stream(self) -> Iterator[str]:
            yield from my_client.ask_streaming("Hi")   # the text deltas, as they arrive

Each test serves your client (any httpx or httpx2 client, with no change to it) from a cassette
built for that test, on the virtual clock, so waits cost nothing. The kit checks the contract
of ADR 0027: the retryable statuses {429, 500, 502, 503, 504, 529} are retried; any other 4xx
fails after exactly one attempt; a ``Retry-After`` in delay-seconds is honoured; a stream is
delivered incrementally; an error in the middle of a stream is raised, not swallowed.

Where clients differ, or where one departs from RFC 9110 (which allows only whole delay-seconds
or an HTTP-date in ``Retry-After``), the kit does not fail: the ``test_finding_*`` tests record
what the client did in the test's ``user_properties``, with what to do about a departure, and
the end-of-run summary counts them (``-v`` lists each). A green run prints no warning for them;
``--conformance-findings=warn`` turns each departure into a :class:`ConformanceFinding` warning.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

import pytest

from ._answers import build as build
from ._patching.httpx import patch_http_clients
from ._patching.install import Installation
from ._session.faults import DisconnectFault, Fault
from ._session.session import CassetteSession
from ._store.cassette import Interaction
from ._timing.expect import assert_attempts, assert_incremental, assert_waits

__all__ = [
    "NON_RETRYABLE_4XX",
    "RETRYABLE",
    "ConformanceFinding",
    "RetryConformance",
    "served",
]

RETRYABLE: Final = (429, 500, 502, 503, 504, 529)
"""Statuses a client must retry (ADR 0027's enumerated set)."""

NON_RETRYABLE_4XX: Final = (400, 401, 403, 404, 422)
"""Client errors that must fail after exactly one attempt."""

Provider = Literal["openai", "anthropic", "ollama", "gemini"]


class ConformanceFinding(UserWarning):
    """A client departs from RFC 9110 or ADR 0027; the message says what it did and what to do.
    Warned only under ``--conformance-findings=warn``; findings are otherwise summarised at the
    end of the run."""


@contextlib.contextmanager
def served(
    interactions: Sequence[Interaction],
    folder: Path,
    *,
    faults: Sequence[Fault] = (),
    allow_repeats: bool = False,
) -> Iterator[CassetteSession]:
    """Serve every httpx/httpx2 client in the block from ``interactions``, on the virtual
    clock, with ``faults`` applied. The cassette is written to ``folder``."""
    path = folder / "conformance.msgpack"
    build.build_cassette(path, interactions)
    session = CassetteSession(
        path, record="none", faults=faults, allow_repeats=allow_repeats, on_unused="ignore"
    )
    # One installation holds the http patch and the clock: it claims the process before it
    # changes anything, and takes both off, newest first, however the block ends.
    installation = Installation(f"the conformance kit's cassette {path}")
    with contextlib.ExitStack() as undo:
        undo.callback(session.close)
        undo.enter_context(installation)
        installation.add(patch_http_clients, session)
        session.start(installation)
        yield session


class RetryConformance:
    """The kit. Set :attr:`provider` (and :attr:`url` when your client does not talk to the
    provider's public URL), then implement :meth:`call` and :meth:`stream`."""

    provider: ClassVar[Provider] = "openai"
    url: ClassVar[str | None] = None
    """The URL your client posts to; default: the provider's public endpoint."""
    answer: ClassVar[str] = "The kit's answer arrives word by word."

    # -- what the client's suite implements -------------------------------------------------

    def call(self) -> str:
        """Make one non-streaming request with your client and return the answer's text."""
        raise NotImplementedError("implement call() to send one request with your client")

    def stream(self) -> Iterator[str]:
        """Make one streaming request with your client and yield each text delta."""
        raise NotImplementedError("implement stream() to stream one request with your client")

    # -- building blocks --------------------------------------------------------------------

    def _url(self) -> str:
        if self.url is not None:
            return self.url
        return {
            "openai": build.OPENAI_CHAT_URL,
            "anthropic": build.ANTHROPIC_URL,
            "ollama": build.OLLAMA_URL,
            "gemini": f"{build.GEMINI_BASE}/gemini-2.5-flash:generateContent",
        }[self.provider]

    def _answer(self, *, stream: bool) -> Interaction:
        url = self._url()
        if self.provider == "anthropic":
            return build.anthropic_messages(self.answer, stream=stream, url=url)
        if self.provider == "ollama":
            return build.ollama_chat(self.answer, stream=stream, url=url)
        if self.provider == "gemini":
            base = url.rsplit("/", 1)[0]
            return build.gemini(self.answer, stream=stream, base_url=base)
        return build.openai_chat(self.answer, stream=stream, url=url)

    def _error(self, status: int, retry_after: str | None = None) -> Interaction:
        return build.error(status, url=self._url(), retry_after=retry_after)

    @staticmethod
    def _attempt(action: Any) -> tuple[Any, BaseException | None]:
        try:
            return action(), None
        except Exception as exc:  # the client's own error type, whatever it is
            return None, exc

    def _finding(
        self, request: pytest.FixtureRequest, name: str, observed: str, fix: str | None = None
    ) -> None:
        """Record what the client did in a case where clients differ: ``name`` is the case,
        ``observed`` what the client did, and ``fix`` what to do about it when that departs
        from RFC 9110 or ADR 0027 (None: it keeps to both).

        A finding is not a failure and not a warning: it goes into the test's
        ``user_properties`` (``finding:<case>``, and ``finding-fix:<case>`` for a departure, which
        ``--junitxml`` carries) and into the end-of-run summary (one line; ``-v`` lists each).
        ``--conformance-findings=warn`` makes each departure a :class:`ConformanceFinding`
        warning as well, naming the fix.
        """
        request.node.user_properties.append((f"finding:{name}", observed))
        if fix is None:
            return
        request.node.user_properties.append((f"finding-fix:{name}", fix))
        if request.config.getoption("conformance_findings", "summary") == "warn":
            warnings.warn(
                ConformanceFinding(f"{self.provider} client, {name}: {observed}. {fix}"),
                stacklevel=2,
            )

    # -- the contract -----------------------------------------------------------------------

    @pytest.mark.parametrize("status", RETRYABLE)
    def test_retryable_status_is_retried(self, status: int, tmp_path: Path) -> None:
        with served([self._error(status), self._answer(stream=False)], tmp_path) as session:
            text, error = self._attempt(self.call)
        assert error is None, (
            f"a {status} was not retried: the client raised {type(error).__name__}: {error} "
            f"after {len(session.requests)} attempt(s)"
        )
        assert_attempts(session, 2)
        assert text == self.answer

    @pytest.mark.parametrize("status", NON_RETRYABLE_4XX)
    def test_client_error_fails_after_one_attempt(self, status: int, tmp_path: Path) -> None:
        with served(
            [self._error(status), self._answer(stream=False)], tmp_path, allow_repeats=True
        ) as session:
            _, error = self._attempt(self.call)
        assert error is not None, f"a {status} did not fail: the client returned an answer"
        assert_attempts(session, 1)

    def test_retry_after_delay_seconds_is_honoured(self, tmp_path: Path) -> None:
        with served([self._error(429, "2"), self._answer(stream=False)], tmp_path) as session:
            text, error = self._attempt(self.call)
        assert error is None, f"the client gave up after a 429 with Retry-After: 2: {error}"
        assert text == self.answer
        assert_waits(session, at_least=[2.0])

    def test_stream_is_incremental(self, tmp_path: Path) -> None:
        cadence = build.Cadence(ttft=0.3, gap=0.1)
        interaction = self._answer(stream=True)
        interaction = _with_cadence(interaction, self, cadence)
        with served([interaction], tmp_path):
            arrivals: list[float] = []
            text = ""
            start = time.monotonic()
            for delta in self.stream():
                if delta:
                    arrivals.append(time.monotonic() - start)
                    text += delta
        assert text == self.answer
        assert_incremental(arrivals, min_spread=0.1 * (len(arrivals) - 1) * 0.9, what="deltas")

    def test_error_mid_stream_is_raised(self, tmp_path: Path) -> None:
        received: list[str] = []
        error: BaseException | None = None
        with served([self._answer(stream=True)], tmp_path, faults=[DisconnectFault(after_event=3)]):
            try:
                received.extend(self.stream())
            except Exception as exc:  # the client's own error type, whatever it is
                error = exc
        assert error is not None, (
            f"the stream was cut after 3 events, and the client returned {len(received)} "
            "delta(s) without raising: the error was swallowed"
        )

    # -- findings: where clients differ -------------------------------------------------------

    @pytest.mark.parametrize(
        "value",
        ["0.5", "1.5", "-1", "soon", "150"],
        ids=["fractional-0.5", "fractional-1.5", "negative", "garbage", "over-120s"],
    )
    def test_finding_unusual_retry_after(
        self, value: str, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        with served([self._error(429, value), self._answer(stream=False)], tmp_path) as session:
            text, error = self._attempt(self.call)
        attempts = len(session.requests)
        assert attempts in (1, 2), f"expected one or two attempts, saw {attempts}"
        wait: float | None = None
        if attempts == 1:
            assert error is not None, "one attempt and no error: the 429 was taken as an answer"
            observed = "not retried"
        else:
            assert text == self.answer
            wait = session.requests[1].sent_at - session.requests[0].finished_at
            observed = f"retried after {wait:.3f} s"
        rfc = "whole delay-seconds" if value.isdigit() else "not valid delay-seconds (RFC 9110)"
        self._finding(
            request, f"Retry-After: {value} ({rfc})", observed, _retry_after_fix(value, wait)
        )

    @pytest.mark.parametrize("status", [408, 409])
    def test_finding_timeout_and_conflict(
        self, status: int, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        with served(
            [self._error(status), self._answer(stream=False)], tmp_path, allow_repeats=True
        ) as session:
            _, error = self._attempt(self.call)
        attempts = len(session.requests)
        assert attempts in (1, 2, 3)
        retried = not (error is not None and attempts == 1)
        observed = f"{attempts} attempts" if retried else "not retried"
        fix = (
            f"ADR 0027 retries only {', '.join(map(str, RETRYABLE))}: fail a {status} after "
            "one attempt"
            if retried
            else None
        )
        self._finding(request, f"status {status} (outside the retryable set)", observed, fix)


def _retry_after_fix(value: str, wait: float | None) -> str | None:
    """What to do about how a client met a 429 with ``Retry-After: value``: it waited ``wait``
    seconds before the retry, or gave up (None). None when that keeps to RFC 9110 and ADR 0027."""
    if wait is None:
        return (
            "a 429 is retryable whatever its Retry-After (ADR 0027): retry, honouring a whole "
            "delay-seconds value and backing off from any other"
        )
    if value.isdigit():
        if abs(wait - int(value)) < 0.001:
            return None
        return f"honour a whole delay-seconds Retry-After (ADR 0027): wait {value} s"
    try:
        honoured = float(value) >= 0 and abs(wait - float(value)) < 0.001
    except ValueError:
        honoured = False
    if honoured:
        return (
            f"{value} is not delay-seconds (RFC 9110 allows only whole seconds): ignore the "
            "header and back off (ADR 0027)"
        )
    return None


def _with_cadence(interaction: Interaction, kit: RetryConformance, cadence: Any) -> Interaction:
    """Rebuild the kit's stream answer on ``cadence``."""
    url = kit._url()
    if kit.provider == "anthropic":
        return build.anthropic_messages(kit.answer, url=url, cadence=cadence)
    if kit.provider == "ollama":
        return build.ollama_chat(kit.answer, url=url, cadence=cadence)
    if kit.provider == "gemini":
        return build.gemini(kit.answer, base_url=url.rsplit("/", 1)[0], cadence=cadence)
    return build.openai_chat(kit.answer, url=url, cadence=cadence)
