"""The corpus proof: 102 real cassettes from three public projects
(tests/data/vcr_corpus/MANIFEST.md gives their provenance and licenses) import with nothing
lost, and every OpenAI and Anthropic answer among them replays through the unmodified SDK.
94 are vcrpy cassettes; 8 are response-only fixtures ({status, headers, body}, no request)
that a JavaScript test mocks fetch with, imported as the answer to the request named with
--request.

"Nothing lost" is checked by an independent reader (tests/support/vcr_oracle.py) that parses
the YAML and JSON itself, undoes the compressions itself and reads the imported msgpack
directly, then compares every request and response body, and every SSE event in order.
"""

import collections
import functools
import io
import json
import sys
from urllib.parse import parse_qsl, urlsplit

import anthropic
import httpx2
import openai
import pytest
import yaml
from anthropic.types import Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent

from pytest_toolnexus import use_cassette
from pytest_toolnexus._cli.main import main
from pytest_toolnexus._store.cassette import Cassette, load_cassette
from tests.support import vcr_oracle
from tests.support.vcr_oracle import CORPUS

# The 8 files of openinference's JS helper hold one response each and no request (MANIFEST:
# "custom JSON, response-only"): import-vcr imports them only as the answer to a request the
# user names. They carry 8 of the manifest's 135 interactions, 3 of its 41 SSE streams.
RESPONSE_ONLY = "Arize-ai__openinference/js/packages/openinference-instrumentation-anthropic/"
ANSWERED = ("POST", "https://api.anthropic.com/v1/messages")
REQUEST = " ".join(ANSWERED)


def run_cli(argv):
    """(exit code, stdout, stderr) of one command-line run in this process."""
    capture = pytest.MonkeyPatch()
    stdout, stderr = io.StringIO(), io.StringIO()
    capture.setattr(sys, "stdout", stdout)
    capture.setattr(sys, "stderr", stderr)
    try:
        code = main(argv)
    finally:
        capture.undo()
    return code, stdout.getvalue(), stderr.getvalue()


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The whole corpus converted by one batch run of the command line, with its output."""
    out = tmp_path_factory.mktemp("corpus")
    code, stdout, stderr = run_cli(
        ["import-vcr", str(CORPUS), "--out", str(out), "--request", REQUEST]
    )
    return out, code, stdout, stderr


def relative(path):
    return path.relative_to(CORPUS).as_posix()


def imported_path(out, source):
    name = relative(source).rsplit(".", 1)[0] + ".msgpack"
    return out / name


def test_the_corpus_is_the_manifests_byte_for_byte():
    files = vcr_oracle.corpus_files()
    assert len(files) == 102
    assert sum(p.stat().st_size for p in files) == 2_042_314
    licenses = sorted(relative(p) for p in CORPUS.glob("*/LICENSE"))
    assert licenses == [
        "Arize-ai__openinference/LICENSE",
        "crewAIInc__crewAI/LICENSE",
        "pydantic__logfire/LICENSE",
    ]
    assert sum((CORPUS / name).stat().st_size for name in licenses) == 13_511


def test_the_batch_run_with_request_converts_all_102_files(converted):
    out, code, stdout, stderr = converted

    assert code == 0
    assert stdout.rstrip().endswith("102 file(s): 102 written, 0 failed")
    assert "FAIL " not in stdout
    # The one hand-edited uri of the corpus (the manifest's "googleapis.com", no scheme) is
    # imported as an absolute URL, which the loader requires, and said so.
    (warning,) = stderr.splitlines()
    assert warning.startswith("warning: ")
    assert warning.endswith(
        "TestTokenCounts.test_vertex.yaml: interaction #0 (POST googleapis.com): the uri "
        "'googleapis.com' has no scheme; it is imported as 'https://googleapis.com'"
    )
    assert len(list(out.rglob("*.msgpack"))) == 102
    metas = collections.Counter(
        (load_cassette(path).meta["converted_from"], RESPONSE_ONLY in path.as_posix())
        for path in out.rglob("*.msgpack")
    )
    assert metas == {("vcrpy", False): 94, ("response fixture", True): 8}


def test_without_request_the_8_fixtures_are_refused_with_the_fix(tmp_path):
    folder = CORPUS / RESPONSE_ONLY
    code, stdout, stderr = run_cli(["import-vcr", str(folder), "--out", str(tmp_path)])

    assert code == 1
    assert stdout.rstrip().endswith("8 file(s): 0 written, 8 failed")
    refusals = [line for line in stderr.splitlines() if line.startswith("error: ")]
    sources = sorted(folder.rglob("*.json"))
    assert len(refusals) == len(sources) == 8
    for line, source in zip(refusals, sources, strict=True):
        assert line.startswith(f"error: {source} is a response-only fixture ")
        assert line.endswith(
            f"Name the request it answers: pytest-toolnexus import-vcr {source} --request "
            '"METHOD URL" (for example --request "POST https://api.anthropic.com/v1/messages")'
        )
    assert list(tmp_path.iterdir()) == []


FIXTURE_EVENTS = 19 + 8 + 16  # reasoning-tool-use, redacted-thinking and thinking streams


def test_135_interactions_261_bodies_and_every_sse_event_survive_the_import(converted):
    out, _, _, _ = converted
    counts = collections.Counter()
    kinds = collections.Counter()
    statuses = collections.Counter()
    for source in vcr_oracle.corpus_files():
        document = vcr_oracle.read_document(source)
        fixture = vcr_oracle.is_response_fixture(document)
        assert fixture == relative(source).startswith(RESPONSE_ONLY), source
        counts["fixtures" if fixture else "files"] += 1
        raw = vcr_oracle.recorded(document, ANSWERED)
        stored = vcr_oracle.read_imported(imported_path(out, source))
        assert len(stored) == len(raw), source
        for number, (before, after) in enumerate(zip(raw, stored, strict=True)):
            where = f"{relative(source)} #{number}"
            assert after["request"]["method"] == before.method, where
            # The corpus's one hand-edited uri without a scheme gets https:// (see above).
            fixed = "https://googleapis.com" if before.url == "googleapis.com" else before.url
            assert after["request"]["url"] == fixed, where
            assert after["response"]["status"] == before.status, where
            statuses[before.status] += 1
            counts["interactions"] += 1
            for side, expected in (("request", before.request), ("response", before.response)):
                try:
                    pieces = vcr_oracle.compare(expected, after[side]["body"])
                except AssertionError as exc:
                    raise AssertionError(f"{where} {side} body: {exc}") from exc
                kinds[f"{side} {expected.kind}"] += 1
                if expected.kind not in ("empty", "any"):
                    counts["bodies"] += 1
                counts[f"{expected.kind} pieces"] += pieces
                counts[f"{'fixture' if fixture else 'vcrpy'} {expected.kind} pieces"] += pieces

    # The manifest's 135 interactions: 127 from the 94 vcrpy files, 1 from each fixture.
    assert counts["files"] == 94
    assert counts["fixtures"] == 8
    assert counts["interactions"] == 135
    assert statuses == {200: 121, 400: 4, 401: 4, 404: 5, 429: 1}
    # The manifest's shapes: SSE 41 less the 3 Gemini 400s whose body is a JSON error under
    # text/event-stream (a JSON document, no event stream: split into events, every line of it
    # would be dropped), NDJSON 1, AWS event-stream 9 + audio 1 as bytes, JSON 82 less the one
    # served as text/plain, plus the Vertex JSON-array stream (one JSON document) and the 3
    # Gemini 400s. The fixtures' 8 requests have no body to keep: they match any body.
    assert kinds == {
        "response sse": 38,
        "response ndjson": 1,
        "response bytes": 10,
        "response json": 85,
        "response text": 1,
        "request json": 125,
        "request bytes": 1,
        "request empty": 1,
        "request any": 8,
    }
    assert counts["bodies"] == 135 + 126
    assert counts["sse pieces"] == 842 + FIXTURE_EVENTS  # SSE events compared, each in order
    assert counts["fixture sse pieces"] == FIXTURE_EVENTS
    assert counts["ndjson pieces"] == 714  # NDJSON lines compared (Ollama's /api/chat stream)


# ---------------------------------------------------------------------------------------------
# Replayed through the real SDKs

APIS = {"/chat/completions": "chat", "/responses": "responses", "/messages": "messages"}


def provider_answers(out):
    """(source, number, api, interaction) for each OpenAI-shaped or Anthropic answer."""
    found = []
    for source in vcr_oracle.corpus_files():
        cassette = load_cassette(imported_path(out, source))
        for number, interaction in enumerate(cassette.interactions):
            path = urlsplit(interaction.request.url).path
            for suffix, api in APIS.items():
                if path.endswith(suffix):
                    found.append((source, number, api, interaction))
    return found


def sdk_client(api, url, session):
    """A client of the real SDK whose base URL is the recorded one, and the path to post."""
    parts = urlsplit(url)
    suffix = (
        "/v1/messages" if api == "messages" else next(s for s in APIS if parts.path.endswith(s))
    )
    base = f"{parts.scheme}://{parts.netloc}{parts.path.removesuffix(suffix)}"
    http = httpx2.Client(transport=session.http_transport())
    if api == "messages":
        return anthropic.Anthropic(
            api_key="test-key", base_url=base, http_client=http, max_retries=0
        ), suffix
    return openai.OpenAI(api_key="test-key", base_url=base, http_client=http, max_retries=0), suffix


def sdk_types(api):
    """(cast_to, stream_cls) the SDK itself uses for this API."""
    if api == "chat":
        return ChatCompletion, openai.Stream[ChatCompletionChunk]
    if api == "responses":
        return Response, openai.Stream[ResponseStreamEvent]
    return Message, anthropic.Stream[RawMessageStreamEvent]


def sdk_answer(api, parsed, streamed):
    """(text, tool calls) from what the SDK parsed, its typed models and stream events, and
    for Anthropic's Messages the thinking blocks."""
    if api == "chat":
        text, calls = [], {}
        for chunk in parsed if streamed else [parsed]:
            for choice in chunk.choices:
                part = choice.delta if streamed else choice.message
                text.append(part.content or "")
                for call in part.tool_calls or []:
                    slot = calls.setdefault(getattr(call, "index", None) or 0, ["", ""])
                    slot[0] += call.function.name or ""
                    slot[1] += call.function.arguments or ""
        return "".join(text), [tuple(calls[k]) for k in sorted(calls)]
    if api == "responses":
        if not streamed:
            calls = [(i.name, i.arguments) for i in parsed.output if i.type == "function_call"]
            return parsed.output_text, calls
        text, calls = [], []
        for event in parsed:
            if event.type == "response.output_text.delta":
                text.append(event.delta)
            elif event.type == "response.output_item.done" and event.item.type == "function_call":
                calls.append((event.item.name, event.item.arguments))
        return "".join(text), calls
    if not streamed:
        text = "".join(block.text for block in parsed.content if block.type == "text")
        tools = [(b.name, b.input) for b in parsed.content if b.type in TOOL_BLOCKS]
        thinking = [thinking_block(b) for b in parsed.content if b.type in THINKING_BLOCKS]
        return text, tools, [tuple(block) for block in thinking]
    text, names, partial, thinking = [], {}, {}, {}
    for event in parsed:
        if event.type == "content_block_start" and event.content_block.type in TOOL_BLOCKS:
            names[event.index], partial[event.index] = event.content_block.name, ""
        elif event.type == "content_block_start" and event.content_block.type in THINKING_BLOCKS:
            thinking[event.index] = thinking_block(event.content_block)
        elif event.type == "content_block_delta":
            if event.delta.type == "text_delta":
                text.append(event.delta.text)
            elif event.delta.type == "input_json_delta":
                partial[event.index] += event.delta.partial_json
            elif event.delta.type == "thinking_delta":
                thinking[event.index][1] += event.delta.thinking
            elif event.delta.type == "signature_delta":
                thinking[event.index][2] += event.delta.signature
    calls = [(names[i], json.loads(partial[i] or "{}")) for i in sorted(names)]
    return "".join(text), calls, [tuple(thinking[i]) for i in sorted(thinking)]


TOOL_BLOCKS = ("tool_use", "server_tool_use")
THINKING_BLOCKS = ("thinking", "redacted_thinking")


def thinking_block(block):
    """An SDK thinking block as [type, thinking, signature]; a redacted one as [type, data]."""
    if block.type == "thinking":
        return ["thinking", block.thinking, block.signature]
    return ["redacted_thinking", block.data]


def fixture_call(client, streamed):
    """The call a user makes through the SDK's own API to get a fixture's answer. The fixture
    was imported with an any request body, so whatever the SDK sends is answered."""
    return functools.partial(
        client.messages.create,
        model="claude-sonnet-4-6",
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=[{"role": "user", "content": "What is 27 * 453?"}],
        stream=streamed,
    )


def test_the_67_openai_and_anthropic_answers_replay_through_the_real_sdks(converted, tmp_path):
    out, _, _, _ = converted
    replayed = collections.Counter()
    for source, number, api, interaction in provider_answers(out):
        where = f"{relative(source)} #{number}"
        single = tmp_path / f"{len(list(tmp_path.iterdir()))}.msgpack"
        Cassette(single, [interaction], {}).save()
        document = vcr_oracle.read_document(source)
        fixture = vcr_oracle.is_response_fixture(document)
        before = vcr_oracle.recorded(document, ANSWERED)[number]
        expected = before.response
        streamed = expected.kind == "sse"
        status = interaction.response.status
        cast_to, stream_cls = sdk_types(api)
        params = dict(parse_qsl(urlsplit(interaction.request.url).query))
        with use_cassette(single) as session:
            client, path = sdk_client(api, interaction.request.url, session)
            call = functools.partial(
                client.post,
                path,
                body=before.request_value,
                cast_to=cast_to,
                stream=streamed,
                stream_cls=stream_cls,
                options={"params": params} if params else {},
            )
            if fixture:
                call = fixture_call(client, streamed)
            if status != 200:
                with pytest.raises((openai.APIStatusError, anthropic.APIStatusError)) as caught:
                    call()
                assert caught.value.status_code == status, where
                assert caught.value.response.json() == expected.value, where
                replayed[f"{api} error"] += 1
                continue
            got = sdk_answer(api, call(), streamed)
            assert session.unused() == [], where
        want = vcr_oracle.recorded_answer(api, expected)
        assert got == want, where
        assert want[0] or want[1], f"{where}: the recording has neither text nor tool calls"
        kind = f"{api} {'fixture ' if fixture else ''}{'stream' if streamed else 'whole'}"
        replayed[kind] += 1
        replayed[f"{api} tool calls"] += len(want[1])
        if api == "messages":
            replayed["messages thinking blocks"] += len(want[2])
            replayed["messages redacted thinking blocks"] += sum(
                block[0] == "redacted_thinking" for block in want[2]
            )

    # 58 answers (OpenAI chat and its compatibles 16, Responses 18, Anthropic Messages 16 from
    # vcrpy cassettes and 8 from the fixtures, with 7 tool calls and 10 thinking blocks, 2 of
    # them redacted, among them) and 9 OpenAI-shaped error answers (400, 401, 404).
    assert replayed == {
        "chat whole": 6,
        "chat stream": 10,
        "chat error": 9,
        "chat tool calls": 4,
        "responses whole": 14,
        "responses stream": 4,
        "responses tool calls": 4,
        "messages whole": 6,
        "messages stream": 10,
        "messages fixture whole": 5,
        "messages fixture stream": 3,
        "messages tool calls": 7,
        "messages thinking blocks": 10,
        "messages redacted thinking blocks": 2,
    }


def _text_streams():
    """(file, interaction number, body text) of every vcrpy interaction in the corpus whose
    response body is an event stream written as plain text (not !!binary)."""
    found = []
    for source in vcr_oracle.corpus_files():
        if source.suffix != ".yaml":
            continue
        document = vcr_oracle.read_document(source)
        for number, interaction in enumerate(document["interactions"]):
            body = interaction["response"].get("body")
            text = body.get("string") if isinstance(body, dict) else None
            if isinstance(text, str) and text.startswith(("data:", "event:")):
                found.append((source, number, text))
    return found


def _stored_events(path, number):
    return [
        {k: v for k, v in event.items() if k != "t"}
        for event in load_cassette(path).interactions[number].response.body.events
    ]


@pytest.mark.parametrize("lead", [" ", " \n", "\ufeff"], ids=["space", "blank", "bom"])
def test_a_real_event_stream_after_leading_whitespace_is_split_with_a_warning(
    tmp_path, converted, lead
):
    # Given every real plain-text event stream of the corpus, each now beginning with
    # whitespace (as a hand-edited or re-serialized cassette may: " data: {...")
    out, _, _, _ = converted
    streams = _text_streams()
    assert len(streams) >= 10
    for index, (source, number, text) in enumerate(streams):
        document = vcr_oracle.read_document(source)
        document["interactions"][number]["response"]["body"]["string"] = lead + text
        moved = tmp_path / f"{index}.yaml"
        moved.write_text(yaml.safe_dump(document, allow_unicode=True))

        # When it is imported
        code, stdout, stderr = run_cli(["import-vcr", str(moved)])

        # Then its events are the ones the unchanged file imports to, and a warning says
        # what was dropped
        assert code == 0, stderr
        original = imported_path(out, source)
        assert _stored_events(moved.with_suffix(".msgpack"), number) == _stored_events(
            original, number
        ), source
        assert f"warning: {moved}: interaction #{number} (" in stderr
        assert "of whitespace before its first field" in stderr
        assert f"#{number} " in stdout
        assert "sse, " in stdout.splitlines()[number]


def test_a_real_event_stream_with_an_indented_line_is_kept_whole_with_a_warning(tmp_path):
    # Given a real event stream whose second event is indented, which no SSE parser reads
    source, number, text = next(s for s in _text_streams() if "\n\n" in s[2])
    first, rest = text.split("\n\n", 1)
    document = vcr_oracle.read_document(source)
    document["interactions"][number]["response"]["body"]["string"] = f"{first}\n\n  {rest}"
    moved = tmp_path / "indented.yaml"
    moved.write_text(yaml.safe_dump(document, allow_unicode=True))

    code, stdout, stderr = run_cli(["import-vcr", str(moved)])

    # Then it is kept as text (nothing is lost), and the warning names the line and the fix
    assert code == 0, stderr
    assert "text, " in stdout.splitlines()[number]
    line = first.count("\n") + 3
    assert f"warning: {moved}: interaction #{number} (" in stderr
    assert f"the body looks like an event stream, but its line {line} is no SSE field" in stderr
    assert "import it again to have it split into events" in stderr
