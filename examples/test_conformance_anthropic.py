"""The retry and streaming conformance kit, run against the real ``anthropic`` SDK.

The client is the SDK as shipped, with ``max_retries=2`` and no transport passed: the kit's
``served(...)`` routes every httpx/httpx2 client to a cassette built for each test, on the
virtual clock, so a ``Retry-After: 150`` costs no wall time. Where the SDK departs from RFC 9110
or ADR 0027 the kit records a finding instead of failing, and says what would conform; list
them with

    .venv/bin/pytest examples/test_conformance_anthropic.py -v

The extra findings (HTTP-date and zero ``Retry-After``, 501 and 505, an error before a stream,
errors mid-stream) come from ``MoreFindings`` in ``test_conformance_openai.py``.
docs/retries.md tabulates the results.
"""

import functools
from collections.abc import Iterator

import anthropic

from pytest_toolnexus.conformance import RetryConformance

from .test_conformance_openai import MoreFindings

MESSAGES = [{"role": "user", "content": "Say something, word by word."}]


@functools.cache
def client() -> anthropic.Anthropic:
    """One SDK client, as an application would keep it, with its default http client."""
    return anthropic.Anthropic(api_key="test-key-not-a-secret", max_retries=2)


class TestAnthropicConformance(MoreFindings, RetryConformance):
    provider = "anthropic"

    def call(self) -> str:
        reply = client().messages.create(
            model="claude-sonnet-4-6", max_tokens=256, messages=MESSAGES
        )
        return "".join(block.text for block in reply.content if block.type == "text")

    def stream(self) -> Iterator[str]:
        with client().messages.stream(
            model="claude-sonnet-4-6", max_tokens=256, messages=MESSAGES
        ) as events:
            yield from events.text_stream
