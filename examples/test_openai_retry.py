"""A 429 with Retry-After, then a 200: the SDK waits as told, and the test takes no time."""

import openai
import pytest

from pytest_toolnexus import assert_attempts, assert_waits

from .conftest import API_KEY, EMULATOR_URL


@pytest.mark.cassette
def test_rate_limit_is_retried_after_the_advertised_wait(cassette, emulator, tolerance):
    if emulator is not None:
        emulator.fail_next(429, retry_after="2")
    client = openai.OpenAI(api_key=API_KEY, base_url=f"{EMULATOR_URL}/v1", max_retries=2)

    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Say hello."}]
    )

    assert reply.choices[0].message.content
    assert [r.status for r in cassette.requests] == [429, 200]
    assert_attempts(cassette, 2)
    assert_waits(cassette, [2.0], tolerance=tolerance)
    assert [s.duration for s in cassette.sleeps] == pytest.approx([2.0], abs=tolerance)
