"""A key streamed a few characters at a time (issue 23, row 2): no stored piece holds it, the
pieces joined do. The scan reads each stream's pieces joined, along the raw data and along
every string place of the payloads (where the provider views read text and tool-call
arguments), and refuses the write and fails ``check``, naming the interaction and the range
of pieces the secret spans, never the value.

Every secret here is a fake built at run time.
"""

import json

import pytest

from pytest_toolnexus import (
    ByteStream,
    Cassette,
    CassetteSession,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    SecretFoundError,
    TransportRequest,
    TransportResponse,
    build,
    load_cassette,
)
from pytest_toolnexus._cli.main import main as cli
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._store.cassette import JsonBody, NdjsonBody, SseBody
from pytest_toolnexus.views import view
from tests.test_secret_scan import FAKES, NDJSON, SSE

KEY = FAKES["an OpenAI project key (sk-proj-...)"]
CHAT = "https://api.openai.example.invalid/v1/chat/completions"
OLLAMA = "http://localhost:11434/api/chat"


def pieces(text, count):
    """``text`` cut into ``count`` pieces of nearly equal length."""
    size, extra = divmod(len(text), count)
    out, at = [], 0
    for index in range(count):
        step = size + (index < extra)
        out.append(text[at : at + step])
        at += step
    assert "".join(out) == text
    assert all(out)
    return out


def chat_chunk(content):
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"content": content}}]}


def chat_stream(parts):
    events = [b'data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n']
    events += [f"data: {json.dumps(chat_chunk(p))}\n\n".encode() for p in parts]
    return [*events, b"data: [DONE]\n\n"]


def ollama_lines(parts):
    lines = [
        json.dumps({"message": {"role": "assistant", "content": p}, "done": False}) for p in parts
    ]
    return [(line + "\n").encode() for line in [*lines, '{"done":true}']]


# name -> (URL, content type, the wire pieces, the path named, the piece range)
STREAMS = {
    "19 SSE content deltas": (
        CHAT,
        SSE,
        chat_stream(pieces(KEY, 19)),
        "response.body.events[1..19]['data']['choices'][0]['delta']['content'] (joined)",
    ),
    "an event split mid-prefix": (
        CHAT,
        SSE,
        [b"data: sk-\n\n", f"data: {KEY[3:]}\n\n".encode(), b"data: [DONE]\n\n"],
        "response.body.events[0..1] (the data joined)",
    ),
    "14 NDJSON lines": (
        OLLAMA,
        NDJSON,
        ollama_lines(pieces(KEY, 14)),
        "response.body.lines[0..13]['value']['message']['content'] (joined)",
    ),
}


@pytest.mark.parametrize("name", list(STREAMS))
def test_a_key_streamed_in_pieces_is_refused_at_the_write(tmp_path, name):
    url, headers, wire, where = STREAMS[name]
    path = tmp_path / "c.msgpack"

    def live(request):
        return TransportResponse(200, headers, ByteStream(list(wire)))

    session = CassetteSession(path, record="all", timing="instant", live=live)
    session.transport(TransportRequest("POST", url, body={"stream": True})).body.read()

    with pytest.raises(SecretFoundError) as caught:
        session.close()

    message = str(caught.value)
    assert f"interaction #0, {where}: an OpenAI project key (sk-proj-...)" in message
    assert KEY not in message
    assert KEY[3:] not in message
    assert not path.exists()


DIGITS_KEY = "sk-proj-" + "Ab3dE" * 4 + "2024" + "xY9zQ" * 4  # a token of digits inside


@pytest.mark.parametrize("framing", ["sse", "ndjson"])
def test_a_key_streamed_as_plain_text_with_a_token_of_digits_is_refused(tmp_path, framing):
    # Found by the streamed-secrets fuzzer: a piece "2024" reads as JSON, was stored as the
    # number, and the joined text skipped it, so the key was written.
    head, digits, rest = DIGITS_KEY.partition("2024")
    parts = ["key: ", head, digits, rest, " ok"]
    if framing == "sse":
        headers, wire = SSE, [f"data: {p}\n\n".encode() for p in parts]
    else:
        headers, wire = NDJSON, [f"{p}\n".encode() for p in parts]
    path = tmp_path / "c.msgpack"

    def live(request):
        return TransportResponse(200, headers, ByteStream(list(wire)))

    session = CassetteSession(path, record="all", timing="instant", live=live)
    session.transport(TransportRequest("POST", CHAT, body={"stream": True})).body.read()

    with pytest.raises(SecretFoundError, match="spread across 3 pieces"):
        session.close()
    assert not path.exists()


@pytest.mark.parametrize(
    ("data", "stored"),
    [
        ("42", {"data": 42}),
        ("true", {"data": True}),
        ("null", {"data": None}),
        ("1e5", {"text": "1e5"}),
        ("1.50", {"text": "1.50"}),
        (" 42", {"text": " 42"}),
        ('{"a": 1E2}', {"data": {"a": 100.0}}),
    ],
)
def test_a_bare_number_in_a_piece_is_stored_parsed_only_when_it_reads_back_as_sent(
    tmp_path, data, stored
):
    path = tmp_path / "c.msgpack"

    def live(request):
        return TransportResponse(200, SSE, ByteStream([f"data: {data}\n\n".encode()]))

    session = CassetteSession(path, record="all", timing="instant", live=live)
    session.transport(TransportRequest("POST", CHAT, body={"stream": True})).body.read()
    session.close()

    (event,) = load_cassette(path).interactions[0].response.body.events
    assert {k: v for k, v in event.items() if k != "t"} == stored


def test_check_refuses_a_key_streamed_in_pieces_and_names_the_pieces(tmp_path, capsys):
    events = [{"t": float(i), "data": chat_chunk(p)} for i, p in enumerate(pieces(KEY, 19))]
    interaction = Interaction(
        RecordedRequest("POST", CHAT, Headers(), JsonBody({"stream": True})),
        RecordedResponse(200, SSE, SseBody([*events, {"t": 20.0, "text": "[DONE]"}])),
    )
    path = tmp_path / "streamed.msgpack"
    Cassette(path, [interaction], {}).save(unsafe_verbatim=True)
    capsys.readouterr()

    assert cli(["check", str(path)]) == 1

    out = capsys.readouterr().out
    assert f"FAIL {path}: 1 secret(s)" in out
    assert (
        "interaction #0, response.body.events[0..18]['data']['choices'][0]['delta']['content']"
        " (joined): an OpenAI project key (sk-proj-...), spread across 19 pieces" in out
    )
    assert all(piece not in out for piece in pieces(KEY, 3))


@pytest.mark.parametrize(
    "builder",
    [build.openai_chat, build.openai_responses, build.anthropic_messages],
    ids=["openai-chat", "openai-responses", "anthropic"],
)
def test_a_key_in_tool_call_arguments_streamed_in_pieces_is_refused(tmp_path, builder):
    # The builders stream a tool call's arguments in pieces, as the providers do.
    call = build.ToolCall("login", {"token": KEY})

    with pytest.raises(SecretFoundError) as caught:
        build.build_cassette(tmp_path / "c.msgpack", [builder("", tool_calls=[call])])

    message = str(caught.value)
    assert "(joined): an OpenAI project key (sk-proj-...), spread across" in message
    assert KEY not in message
    assert not (tmp_path / "c.msgpack").exists()


GEMINI = "https://generativelanguage.googleapis.com/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse"

# dialect -> (URL, one stored event carrying a piece of text)
DIALECTS = {
    "anthropic": (
        "https://api.anthropic.com/v1/messages",
        lambda i, p: {
            "event": "content_block_delta",
            "data": {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": p},
            },
        },
    ),
    "gemini": (
        GEMINI,
        lambda i, p: {
            "data": {
                "candidates": [{"content": {"role": "model", "parts": [{"text": p}]}}],
                "responseId": "rid" + "Xy7" * 6,
            }
        },
    ),
    "openai-responses": (
        "https://api.openai.com/v1/responses",
        lambda i, p: {
            "event": "response.output_text.delta",
            "data": {"type": "response.output_text.delta", "delta": p, "sequence_number": i},
        },
    ),
    "openai-chat": (CHAT, lambda i, p: {"data": chat_chunk(p)}),
}


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_a_key_in_the_views_streamed_text_is_refused_in_every_dialect(dialect):
    url, event = DIALECTS[dialect]
    events = [{"t": float(i), **event(i, p)} for i, p in enumerate(pieces(KEY, 6))]
    interaction = Interaction(
        RecordedRequest("POST", url, Headers(), JsonBody({"stream": True})),
        RecordedResponse(200, SSE, SseBody(events)),
    )
    if dialect != "openai-responses":  # its view reads the final response, not built here
        assert view(interaction).text == KEY  # what the provider view reads

    hits = SecretScanner(environ={}).scan([interaction])

    assert [(hit.kind, hit.across) for hit in hits] == [("an OpenAI project key (sk-proj-...)", 6)]
    assert hits[0].path.startswith("response.body.events[0..5]")


def test_a_key_whole_in_one_piece_is_named_once_not_again_joined():
    events = [{"t": 0.0, "data": chat_chunk("a")}, {"t": 1.0, "data": chat_chunk(f"k {KEY}")}]
    interaction = Interaction(
        RecordedRequest("POST", CHAT, Headers(), JsonBody({})),
        RecordedResponse(200, SSE, SseBody(events)),
    )

    hits = SecretScanner(environ={}).scan([interaction])

    assert [hit.path for hit in hits] == [
        "response.body.events[1]['data']['choices'][0]['delta']['content']"
    ]


def test_a_streamed_environment_value_and_an_allowed_fake_are_judged_joined(monkeypatch):
    value = "plainValue" * 3
    lines = [{"t": float(i), "value": {"response": p}} for i, p in enumerate(pieces(value, 5))]
    interaction = Interaction(
        RecordedRequest("POST", "http://localhost:11434/api/generate", Headers(), JsonBody({})),
        RecordedResponse(200, NDJSON, NdjsonBody(lines)),
    )

    found = SecretScanner(environ={"ACME_TOKEN": value}).scan([interaction])
    allowed = SecretScanner(environ={"ACME_TOKEN": value}, allow=[value]).scan([interaction])

    assert [str(hit) for hit in found] == [
        "interaction #0, response.body.lines[0..4]['value']['response'] (joined): the value of "
        "the environment variable ACME_TOKEN, spread across 5 pieces"
    ]
    assert allowed == []


def test_ordinary_streams_and_repeated_ids_are_not_secrets():
    # Every event repeats a 24-character id; the text is ordinary prose; a base64 audio
    # stream's chunks join into one long run of base64.
    words = [
        "The",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "the",
        "lazy",
        "dog",
        "and",
        "keeps",
        "running",
    ]
    events = [
        {"t": float(i), "data": {"id": "resp_" + "Ab12Cd34Ef56" * 2, "delta": w + " "}}
        for i, w in enumerate(words)
    ]
    audio = [
        {"t": float(i), "data": {"delta": {"audio": {"data": chunk}}}}
        for i, chunk in enumerate(pieces("UklGRiQAAABXQVZFZm10IBAAAAABAAEA" * 40, 16))
    ]
    interactions = [
        Interaction(
            RecordedRequest("POST", CHAT, Headers(), JsonBody({})),
            RecordedResponse(200, SSE, SseBody(body)),
        )
        for body in (events, audio)
    ]

    assert SecretScanner(environ={}).scan(interactions) == []
