"""An Anthropic tool-calling turn: the model asks for a tool, the test runs it, and the second
request carries the result back."""

import anthropic
import pytest

from .conftest import API_KEY, EMULATOR_URL

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def get_weather(city: str) -> str:
    return f"Sunny and 21 C in {city}"


@pytest.mark.cassette
def test_tool_call_round_trip(cassette, emulator):
    client = anthropic.Anthropic(api_key=API_KEY, base_url=EMULATOR_URL, max_retries=0)
    messages: list[dict] = [{"role": "user", "content": "What's the weather in Paris?"}]

    first = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=256, tools=[WEATHER_TOOL], messages=messages
    )
    assert first.stop_reason == "tool_use"
    call = next(block for block in first.content if block.type == "tool_use")
    assert call.name == "get_weather"

    result = get_weather(**call.input)
    messages += [
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": result}],
        },
    ]
    second = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=256, tools=[WEATHER_TOOL], messages=messages
    )

    assert second.stop_reason == "end_turn"
    assert second.content[0].text
    sent = cassette.requests[1].body
    tool_result = sent["messages"][-1]["content"][0]
    assert tool_result == {"type": "tool_result", "tool_use_id": call.id, "content": result}
