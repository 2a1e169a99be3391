"""An Ollama /api/chat NDJSON stream, replayed line by line."""

import time

import ollama
import pytest

from pytest_toolnexus import assert_incremental

from .conftest import EMULATOR_URL


@pytest.mark.cassette
def test_ndjson_lines_arrive_one_by_one(cassette, emulator):
    client = ollama.Client(host=EMULATOR_URL)

    arrivals: list[float] = []
    text = ""
    for part in client.chat(
        model="llama3.2", messages=[{"role": "user", "content": "Hi"}], stream=True
    ):
        if part.message.content:
            arrivals.append(time.monotonic())
            text += part.message.content
        last = part

    assert last.done
    assert len(arrivals) == 20
    assert_incremental(arrivals, min_spread=0.9, what="lines")
