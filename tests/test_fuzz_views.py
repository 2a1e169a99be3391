"""Views over mutated answers, as a property: a view gives a ``ProviderView`` or raises
``ViewError``, and nothing else, whatever the body holds.

Hypothesis starts from a well-formed answer of every dialect (built, streamed and whole, with
text and tool calls; the hand-written Anthropic web search and Responses reasoning streams; a
Bedrock event stream; built OpenAI Realtime and Gemini Live sessions) and mutates it one to
four times: a value anywhere in the stored body (an event's ``t``, its name, a field deep in
its data) replaced by another JSON value or by a word the readers look for
(``input_json_delta``, ``[DONE]``, ``message_stop``, ...), a key deleted, a list element
duplicated or dropped. ``stream_errors`` (what ``check`` reports) must not raise either. 400
examples at the suite's size.
"""

import copy
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_toolnexus import Interaction, RecordedRequest, RecordedResponse, build
from pytest_toolnexus._answers.views import stream_errors
from pytest_toolnexus._store.cassette import (
    EventStreamBody,
    JsonBody,
    NdjsonBody,
    SseBody,
    WebSocketBody,
    frame_doc,
)
from pytest_toolnexus._store.eventstream import Frame, Header, encode
from pytest_toolnexus.views import ProviderView, ViewError, view
from tests.support.fuzzing import counted, report, report_examples, scaled

DATA = Path(__file__).resolve().parent / "data" / "providers"
PROPERTY = settings(
    max_examples=scaled(400),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
CALL = build.ToolCall("get_weather", {"city": "Paris"})
WORDS = [
    "[DONE]",
    "error",
    "message",
    "message_start",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "input_json_delta",
    "text_delta",
    "thinking_delta",
    "server_tool_use",
    "tool_use",
    "web_search_tool_result",
    "response.completed",
    "response.failed",
    "response.output_text.delta",
    "function_call",
    "reasoning",
    "web_search_call",
    "exception:ThrottlingException",
    "contentBlockStart",
    "contentBlockDelta",
    "messageStop",
    "response.done",
    "response.output_audio.delta",
    "response.function_call_arguments.delta",
    "serverContent",
    "turnComplete",
    "toolCall",
    "client",
    "server",
]
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(WORDS),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "index", "delta", "text", "id"]), inner, max_size=3
        )
    ),
    max_leaves=6,
)


def _bedrock():
    def frame(t, name, payload):
        headers = (
            Header(":event-type", "string", name),
            Header(":message-type", "string", "event"),
        )
        return frame_doc(t, encode(Frame(headers, json.dumps(payload).encode())))

    url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/amazon.nova-lite-v1%3A0/converse-stream"
    tool = {"toolUse": {"toolUseId": "t1", "name": "f"}}
    usage = {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}
    frames = [
        frame(100, "messageStart", {"role": "assistant"}),
        frame(150, "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}),
        frame(200, "contentBlockStart", {"contentBlockIndex": 1, "start": tool}),
        frame(
            250,
            "contentBlockDelta",
            {"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{}"}}},
        ),
        frame(300, "messageStop", {"stopReason": "tool_use"}),
        frame(310, "metadata", {"usage": usage}),
    ]
    return Interaction(
        RecordedRequest("POST", url),
        RecordedResponse(200, body=EventStreamBody(frames), t_end=900.0),
    )


def _fixture(name):
    doc = json.loads((DATA / name).read_text("utf-8"))
    events = [{"t": float(t), "event": e, "data": d} for t, e, d in doc["events"]]
    response = RecordedResponse(200, body=SseBody(events), t_end=events[-1]["t"])
    return Interaction(RecordedRequest("POST", doc["url"]), response)


def _bases():
    made = []
    for maker in (
        build.openai_chat,
        build.openai_responses,
        build.anthropic_messages,
        build.gemini,
        build.ollama_chat,
    ):
        for stream in (True, False):
            made.append(maker("Hello there, world.", tool_calls=[CALL], stream=stream))
    turns = [
        build.RealtimeTurn(text="Hello there, world."),
        build.RealtimeTurn(audio=[b"pcm"], transcript="Hi you"),
        build.RealtimeTurn(tool_calls=[CALL]),
    ]
    made += [build.openai_realtime(turns), build.gemini_live(turns, model="m")]
    made += [
        _fixture("anthropic_web_search_stream.json"),
        _fixture("responses_reasoning_web_search_stream.json"),
        _bedrock(),
    ]
    return made


BASES = _bases()


def test_every_base_answer_reads_before_it_is_mutated():
    for interaction in BASES:
        assert isinstance(view(interaction), ProviderView)


def _unwrap(body):
    """The mutable stored value of a body, and how to wrap a mutated one again."""
    if isinstance(body, SseBody):
        return [dict(e) for e in body.events], SseBody
    if isinstance(body, NdjsonBody):
        return [dict(line) for line in body.lines], NdjsonBody
    if isinstance(body, EventStreamBody):
        return [dict(f) for f in body.frames], EventStreamBody
    if isinstance(body, WebSocketBody):
        return [dict(f) for f in body.frames], WebSocketBody
    assert isinstance(body, JsonBody)
    return body.value, JsonBody


def _slots(value, path=()):
    """Every place inside ``value``: ``(container, key)`` pairs, depth first."""
    found = []
    if isinstance(value, dict):
        for key in list(value):
            found.append((value, key))
            found += _slots(value[key])
    elif isinstance(value, list):
        for index in range(len(value)):
            found.append((value, index))
            found += _slots(value[index])
    return found


@st.composite
def mutated(draw):
    base = BASES[draw(st.integers(0, len(BASES) - 1))]
    value, wrap = _unwrap(base.response.body)
    value = copy.deepcopy(value)
    for _ in range(draw(st.integers(1, 4))):
        slots = _slots(value)
        if not slots:
            break
        container, key = slots[draw(st.integers(0, len(slots) - 1))]
        action = draw(st.sampled_from(["replace", "replace", "delete", "duplicate"]))
        if action == "replace":
            container[key] = draw(JSON_VALUES)
        elif action == "delete":
            del container[key]
        elif isinstance(container, list):
            container.insert(key, copy.deepcopy(container[key]))
    response = base.response
    body = wrap(value)
    return Interaction(base.request, RecordedResponse(response.status, response.headers, body))


OUTCOMES: Counter[str] = Counter()


@pytest.fixture(scope="module")
def _examples_report():
    # Used by the property alone: under xdist, a worker that runs only the other test of this
    # module must not judge outcomes it never counted.
    yield
    report_examples("mutated views property")
    report("mutated views property", "outcomes", OUTCOMES, 0)
    # Both outcomes occur: the mutations are neither all harmless nor all fatal.
    assert OUTCOMES["view"], OUTCOMES
    assert OUTCOMES["view error"], OUTCOMES


@pytest.mark.usefixtures("_examples_report")
@PROPERTY
@given(mutated())
@counted("mutated provider answers")
def test_a_mutated_answer_gives_a_view_or_a_view_error_and_nothing_else(interaction):
    reason = None
    try:
        result = view(interaction)
    except ViewError as exc:
        reason = str(exc)
        OUTCOMES["view error"] += 1
    else:
        OUTCOMES["view"] += 1
        assert isinstance(result, ProviderView)
        assert isinstance(result.text, str)
        assert all(isinstance(call.arguments, str) for call in result.tool_calls)
    assert reason != ""  # a view error always says why
    assert all(isinstance(line, str) for line in stream_errors(interaction))
