"""An OpenAI streaming chat completion: the deltas reach the code one by one, on time."""

import time

import openai
import pytest

from pytest_toolnexus import assert_incremental, assert_time_to_first_event

from .conftest import API_KEY, EMULATOR_URL


@pytest.mark.cassette
def test_deltas_arrive_incrementally(cassette, emulator, tolerance):
    client = openai.OpenAI(api_key=API_KEY, base_url=f"{EMULATOR_URL}/v1", max_retries=0)

    sent = time.monotonic()
    arrivals: list[float] = []
    text = ""
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Tell me a short story."}],
        stream=True,
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append(time.monotonic() - sent)
            text += chunk.choices[0].delta.content

    assert len(text.split()) == 20
    # Twenty deltas, 50 ms apart in the recording, arrive 50 ms apart here too: on the
    # virtual clock, so the test itself takes no time waiting.
    assert_incremental(arrivals, min_spread=0.9, what="deltas")
    ttft = assert_time_to_first_event(arrivals, sent_at=0.0, at_least=0.2, at_most=0.3)
    assert ttft == pytest.approx(cassette.requests[0].deliveries[1], abs=tolerance)
