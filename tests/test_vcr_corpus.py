"""The corpus proof: 102 real vcrpy cassettes from three public projects
(tests/data/vcr_corpus/MANIFEST.md gives their provenance and licenses) import with nothing
lost, and every OpenAI and Anthropic answer among them replays through the unmodified SDK.

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
from anthropic.types import Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent

from pytest_toolnexus import use_cassette
from pytest_toolnexus._cassette import Cassette, load_cassette
from pytest_toolnexus._cli import main
from tests.support import vcr_oracle
from tests.support.vcr_oracle import CORPUS

# The 8 files of openinference's JS helper hold one response each and no request: there is
# no method or URL to replay them at, so import-vcr refuses them (MANIFEST: "custom JSON,
# response-only"). They carry 8 of the manifest's 135 interactions, 3 of its 41 SSE streams.
RESPONSE_ONLY = "Arize-ai__openinference/js/packages/openinference-instrumentation-anthropic/"


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The whole corpus converted by one batch run of the command line, with its output."""
    out = tmp_path_factory.mktemp("corpus")
    capture = pytest.MonkeyPatch()
    stdout, stderr = io.StringIO(), io.StringIO()
    capture.setattr(sys, "stdout", stdout)
    capture.setattr(sys, "stderr", stderr)
    try:
        code = main(["import-vcr", str(CORPUS), "--out", str(out)])
    finally:
        capture.undo()
    return out, code, stdout.getvalue(), stderr.getvalue()


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


def test_the_batch_run_converts_94_files_and_refuses_the_8_without_a_request(converted):
    out, code, stdout, stderr = converted

    assert code == 1
    assert stdout.rstrip().endswith("102 file(s): 94 written, 8 failed")
    failed = sorted(line for line in stdout.splitlines() if line.startswith("FAIL "))
    assert len(failed) == 8
    assert all(RESPONSE_ONLY in line for line in failed)
    assert stderr.count("holds one response ({status, headers, body}) and no request") == 8
    assert len(list(out.rglob("*.msgpack"))) == 94


def test_127_interactions_253_bodies_842_sse_events_survive_the_import(converted):
    out, _, _, _ = converted
    counts = collections.Counter()
    kinds = collections.Counter()
    statuses = collections.Counter()
    for source in vcr_oracle.corpus_files():
        document = vcr_oracle.read_document(source)
        if relative(source).startswith(RESPONSE_ONLY):
            counts["refused interactions"] += 1
            assert not imported_path(out, source).exists()
            continue
        counts["files"] += 1
        raw = document["interactions"]
        stored = vcr_oracle.read_imported(imported_path(out, source))
        assert len(stored) == len(raw), source
        for number, (before, after) in enumerate(zip(raw, stored, strict=True)):
            where = f"{relative(source)} #{number}"
            request, response = before["request"], before["response"]
            assert after["request"]["method"] == request["method"].upper(), where
            assert after["request"]["url"] == request["uri"], where
            status = response.get("status_code") or response["status"]["code"]
            assert after["response"]["status"] == status, where
            statuses[status] += 1
            counts["interactions"] += 1
            for side, expected in (
                ("request", vcr_oracle.expected_request(request)),
                ("response", vcr_oracle.expected_response(response)),
            ):
                try:
                    pieces = vcr_oracle.compare(expected, after[side]["body"])
                except AssertionError as exc:
                    raise AssertionError(f"{where} {side} body: {exc}") from exc
                kinds[f"{side} {expected.kind}"] += 1
                if expected.kind != "empty":
                    counts["bodies"] += 1
                counts[f"{expected.kind} pieces"] += pieces

    # 135 interactions in the manifest: 127 imported and compared, 8 refused (no request).
    assert counts["files"] == 94
    assert counts["interactions"] == 127
    assert counts["refused interactions"] == 8
    assert counts["interactions"] + counts["refused interactions"] == 135
    assert statuses == {200: 113, 400: 4, 401: 4, 404: 5, 429: 1}
    # The manifest's shapes, less the 3 SSE and 5 JSON answers of the refused files: SSE 41-3
    # less the 3 Gemini 400s whose body is a JSON error under text/event-stream (a JSON
    # document, no event stream: split into events, every line of it would be dropped),
    # NDJSON 1, AWS event-stream 9 + audio 1 as bytes, JSON 82-5 less the one served as
    # text/plain, plus the Vertex JSON-array stream (one JSON document) and the 3 Gemini 400s.
    assert kinds == {
        "response sse": 35,
        "response ndjson": 1,
        "response bytes": 10,
        "response json": 80,
        "response text": 1,
        "request json": 125,
        "request bytes": 1,
        "request empty": 1,
    }
    assert counts["bodies"] == 127 + 126
    assert counts["sse pieces"] == 842  # SSE events compared, each in order
    assert counts["ndjson pieces"] == 714  # NDJSON lines compared (Ollama's /api/chat stream)


# ---------------------------------------------------------------------------------------------
# Replayed through the real SDKs

APIS = {"/chat/completions": "chat", "/responses": "responses", "/messages": "messages"}


def provider_answers(out):
    """(source, number, api, interaction) for each OpenAI-shaped or Anthropic answer."""
    found = []
    for source in vcr_oracle.corpus_files():
        if relative(source).startswith(RESPONSE_ONLY):
            continue
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
    """(text, tool calls) from what the SDK parsed: its typed models and stream events."""
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
        tools = [
            (b.name, b.input) for b in parsed.content if b.type in ("tool_use", "server_tool_use")
        ]
        return text, tools
    text, names, partial = [], {}, {}
    for event in parsed:
        if event.type == "content_block_start" and event.content_block.type in (
            "tool_use",
            "server_tool_use",
        ):
            names[event.index], partial[event.index] = event.content_block.name, ""
        elif event.type == "content_block_delta":
            if event.delta.type == "text_delta":
                text.append(event.delta.text)
            elif event.delta.type == "input_json_delta":
                partial[event.index] += event.delta.partial_json
    calls = [(names[i], json.loads(partial[i] or "{}")) for i in sorted(names)]
    return "".join(text), calls


def test_the_59_openai_and_anthropic_answers_replay_through_the_real_sdks(converted, tmp_path):
    out, _, _, _ = converted
    replayed = collections.Counter()
    for source, number, api, interaction in provider_answers(out):
        where = f"{relative(source)} #{number}"
        single = tmp_path / f"{len(list(tmp_path.iterdir()))}.msgpack"
        Cassette(single, [interaction], {}).save()
        raw = vcr_oracle.read_document(source)["interactions"][number]
        expected = vcr_oracle.expected_response(raw["response"])
        request = vcr_oracle.expected_request(raw["request"])
        streamed = expected.kind == "sse"
        status = interaction.response.status
        cast_to, stream_cls = sdk_types(api)
        params = dict(parse_qsl(urlsplit(interaction.request.url).query))
        with use_cassette(single) as session:
            client, path = sdk_client(api, interaction.request.url, session)
            call = functools.partial(
                client.post,
                path,
                body=request.value,
                cast_to=cast_to,
                stream=streamed,
                stream_cls=stream_cls,
                options={"params": params} if params else {},
            )
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
        replayed[f"{api} {'stream' if streamed else 'whole'}"] += 1
        replayed[f"{api} tool calls"] += len(want[1])

    # 50 answers (OpenAI chat and its compatibles 16, Responses 18, Anthropic Messages 16, of
    # which 13 hold tool calls) and 9 OpenAI-shaped error answers (400, 401, 404).
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
        "messages tool calls": 5,
    }
