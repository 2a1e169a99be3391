"""The same streaming check from async code, under anyio."""

import time

import openai
import pytest

from pytest_toolnexus import assert_incremental

from .conftest import API_KEY, EMULATOR_URL


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.cassette
async def test_async_stream_is_incremental(cassette, emulator, tolerance):
    arrivals: list[float] = []
    # Closed here, on this test's event loop: a client left to the garbage collector is closed
    # on whatever loop runs then.
    async with openai.AsyncOpenAI(
        api_key=API_KEY, base_url=f"{EMULATOR_URL}/v1", max_retries=0
    ) as client:
        stream = await client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Count to twenty."}],
            stream=True,
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.monotonic())

    assert len(arrivals) == 20
    assert_incremental(arrivals, min_spread=0.9, what="deltas")
    recorded = cassette.requests[0].deliveries
    assert arrivals[-1] - arrivals[0] == pytest.approx(recorded[-2] - recorded[1], abs=tolerance)
