"""An independent reader of vcrpy cassettes (and of response-only fixtures, which hold
``{status, headers, body}`` and no request), to check the importer against.

It shares no code with pytest_toolnexus: it parses the YAML or JSON with PyYAML or json,
undoes gzip, deflate and brotli itself, splits event streams and NDJSON itself, and reads an
imported cassette straight from its msgpack. What it expects of a body is written out here
from the HTTP and SSE specifications, not from the importer's rules.
"""

import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import brotli
import msgpack
import yaml

CORPUS = Path(__file__).resolve().parent.parent / "data" / "vcr_corpus"
NOT_CASSETTES = {"LICENSE", "MANIFEST.md"}
FIXTURE_KEYS = {"status", "headers", "body"}


def corpus_files():
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name not in NOT_CASSETTES)


def read_document(path):
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if path.name.removesuffix(".gz").endswith(".json"):
        return json.loads(data)
    return yaml.load(data, Loader=yaml.CSafeLoader)


def read_imported(path):
    """The interactions of a msgpack cassette, as plain maps."""
    return msgpack.unpackb(path.read_bytes(), raw=False)["interactions"]


@dataclass
class Expected:
    """What one body must be after import: its kind and content. The kind ``any`` is a
    request body that matches whatever is sent (a fixture's request has no body to keep)."""

    kind: str
    value: object = None
    events: list = field(default_factory=list)
    tail: str = ""


def _bytes(value):
    """(bytes, written as binary) of a vcrpy body value."""
    if value is None:
        return b"", False
    if isinstance(value, dict):
        return _bytes(value.get("string"))
    if isinstance(value, bytes):
        return value, True
    return value.encode(), False


def _media(headers):
    for name, values in (headers or {}).items():
        if name.lower() == "content-type":
            value = values[0] if isinstance(values, list) else values
            if isinstance(value, bytes):  # a few cassettes hold header values as !!binary
                value = value.decode("latin-1")
            return value.split(";")[0].strip().lower()
    return None


def _header(headers, wanted):
    for name, values in (headers or {}).items():
        if name.lower() == wanted:
            return values if isinstance(values, list) else [values]
    return []


def _json(data):
    try:
        return True, json.loads(data.decode())
    except (ValueError, UnicodeDecodeError):
        return False, None


def _unzip(data, coding):
    if coding in ("gzip", "x-gzip"):
        return gzip.decompress(data)
    if coding == "deflate":
        try:
            return zlib.decompress(data)
        except zlib.error:
            return zlib.decompress(data, -15)
    if coding == "br":
        return brotli.decompress(data)
    raise AssertionError(f"unexpected coding {coding}")


def decoded_response(response):
    """The response body's bytes as the server meant them, and whether they came as binary."""
    if "status_code" in response:  # vcrpy's old httpx form held the decoded content
        return _bytes(response.get("content"))[0], False
    data, binary = _bytes(response.get("body"))
    if not binary or not data:
        return data, binary
    codings = [
        c.strip().lower()
        for v in _header(response.get("headers"), "content-encoding")
        for c in (v.decode("latin-1") if isinstance(v, bytes) else v).split(",")
    ]
    codings = [c for c in codings if c and c != "identity"]
    if not codings and data[:2] == b"\x1f\x8b":
        codings = ["gzip"]
    for coding in reversed(codings):
        data = _unzip(data, coding)
    return data, binary


def sse_events(data):
    """(events, tail) of an event stream, per the WHATWG rules: blocks end at a blank line;
    a field's value loses one leading space; data lines join with newlines."""
    text = data.decode().replace("\r\n", "\n").replace("\r", "\n")
    blocks = text.split("\n\n")
    tail = blocks.pop()
    events = []
    for block in blocks:
        event = {}
        data_lines = []
        comments = []
        for line in block.split("\n"):
            if line.startswith(":"):
                comments.append(line[1:].removeprefix(" "))
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data_lines.append(value)
            elif name in ("event", "id"):
                event[name] = value
            elif name == "retry":
                event[name] = int(value)
        if data_lines:
            event["data"] = "\n".join(data_lines)
        if comments:
            event["comments"] = comments
        if event:
            events.append(event)
    return events, tail


def _looks_like_sse(data):
    return data.lstrip().startswith((b"data:", b"event:"))


def _only_sse_lines(data):
    """Whether every line is an SSE field or comment: a parser drops any other line, so a
    body with one cannot be stored as events without losing it."""
    for line in data.decode().splitlines():
        name = line.partition(":")[0]
        if line and not line.startswith(":") and name not in ("data", "event", "id", "retry"):
            return False
    return True


def _ndjson(data):
    lines = [line for line in data.decode(errors="replace").splitlines() if line.strip()]
    parsed = [_json(line.encode()) for line in lines]
    return lines, parsed


def expected_body(data, binary, media):
    """What a body must become. ``media`` is the content-type (None when not recorded)."""
    if not data:
        return Expected("empty")
    textual = media is None or media.startswith("text/") or "json" in media
    if binary and not textual:
        return Expected("bytes", data)
    if (media == "text/event-stream" or (media is None and _looks_like_sse(data))) and (
        _only_sse_lines(data)
    ):
        events, tail = sse_events(data)
        return Expected("sse", events=events, tail=tail)
    lines, parsed = _ndjson(data)
    if media == "application/x-ndjson" or (
        media is None and len(lines) > 1 and all(ok for ok, _ in parsed) and not _json(data)[0]
    ):
        return Expected("ndjson", events=[value for _, value in parsed])
    ok, value = _json(data)
    if ok and (media in (None, "text/event-stream") or "json" in media):
        return Expected("json", value)
    try:
        return Expected("text", data.decode())
    except UnicodeDecodeError:
        return Expected("bytes", data)


def expected_request(request):
    data, binary = _bytes(request.get("body"))
    return expected_body(data, binary, _media(request.get("headers")))


def expected_response(response):
    data, binary = decoded_response(response)
    return expected_body(data, binary, _media(response.get("headers")))


def is_response_fixture(document):
    """Whether a document is a response-only fixture: exactly a status, headers and body."""
    return isinstance(document, dict) and set(document) == FIXTURE_KEYS


def fixture_response(document):
    """What a fixture's body must become. Its body is the text a fetch client read, already
    decoded, under headers given as ``{name: value}``."""
    return expected_body(document["body"].encode(), False, _media(document["headers"]))


@dataclass
class Recorded:
    """One interaction as the oracle reads it from the source file."""

    method: str
    url: str
    status: int
    request: Expected
    response: Expected
    request_value: object = None  # the request body a client sent, when one was recorded


def recorded(document, answers):
    """Each interaction of a document. A response-only fixture is one interaction, answering
    ``answers`` (the ``(method, url)`` it was imported for) with any request body."""
    if is_response_fixture(document):
        method, url = answers
        status = document["status"]
        return [Recorded(method, url, status, Expected("any"), fixture_response(document))]
    found = []
    for raw in document["interactions"]:
        request, response = raw["request"], raw["response"]
        status = response.get("status_code") or response["status"]["code"]
        expected = expected_request(request)
        found.append(
            Recorded(
                request["method"].upper(),
                request["uri"],
                status,
                expected,
                expected_response(response),
                expected.value,
            )
        )
    return found


def _event_data(stored):
    if "data" in stored:
        return stored["data"]
    return stored.get("text")


def _parsed(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def compare(expected, stored):
    """Assert that a stored body (a msgpack map) holds exactly what was expected; returns the
    number of stream events (or lines) compared."""
    assert stored["kind"] == expected.kind, (stored["kind"], expected.kind)
    if expected.kind in ("empty", "any"):
        assert set(stored) == {"kind"}, stored
        return 0
    if expected.kind == "json":
        assert stored["value"] == expected.value
    elif expected.kind == "text":
        assert stored["text"] == expected.value
    elif expected.kind == "bytes":
        assert stored["data"] == expected.value
    elif expected.kind == "ndjson":
        assert [line.get("value", line.get("text")) for line in stored["lines"]] == expected.events
    elif expected.kind == "sse":
        got = [
            {
                key: value
                for key, value in (
                    ("event", e.get("event")),
                    ("id", e.get("id")),
                    ("retry", e.get("retry")),
                    ("data", _event_data(e)),
                    ("comments", e.get("comments")),
                )
                if value is not None
            }
            for e in stored["events"]
        ]
        want = [{**e, "data": _parsed(e["data"])} if "data" in e else e for e in expected.events]
        assert got == want
        assert stored.get("tail", "") == expected.tail
    return len(expected.events)


# ---------------------------------------------------------------------------------------------
# What a model answered, read from the recorded JSON (an SDK's view is compared with it)


def _chat(documents):
    text, calls = [], {}
    for doc in documents:
        for choice in doc.get("choices") or []:
            part = choice.get("delta") or choice.get("message") or {}
            if part.get("content"):
                text.append(part["content"])
            for call in part.get("tool_calls") or []:
                slot = calls.setdefault(call.get("index") or 0, ["", ""])
                function = call.get("function") or {}
                slot[0] += function.get("name") or ""
                slot[1] += function.get("arguments") or ""
    return "".join(text), [tuple(calls[k]) for k in sorted(calls)]


def _responses(documents):
    text, calls = [], []
    for doc in documents:
        kind = doc.get("type")
        if kind == "response.output_text.delta":
            text.append(doc["delta"])
        elif kind == "response.output_item.done" and doc["item"]["type"] == "function_call":
            calls.append((doc["item"]["name"], doc["item"]["arguments"]))
        elif kind is None or kind == "response":  # a whole answer, not a stream event
            for item in doc.get("output") or []:
                if item["type"] == "message":
                    text.extend(
                        part["text"] for part in item["content"] if part["type"] == "output_text"
                    )
                elif item["type"] == "function_call":
                    calls.append((item["name"], item["arguments"]))
    return "".join(text), calls


_TOOL_BLOCKS = ("tool_use", "server_tool_use")
_THINKING_BLOCKS = ("thinking", "redacted_thinking")


def _thinking_block(block):
    """A thinking block as ``[type, thinking, signature]``, a redacted one as ``[type, data]``."""
    if block["type"] == "thinking":
        return ["thinking", block["thinking"], block["signature"]]
    return ["redacted_thinking", block["data"]]


def _anthropic(documents):
    """(text, tool calls, thinking blocks) of a Messages answer, whole or streamed."""
    text, calls, partial, thinking = [], {}, {}, {}
    for doc in documents:
        kind = doc.get("type")
        if kind == "message":
            for index, block in enumerate(doc["content"]):
                if block["type"] == "text":
                    text.append(block["text"])
                elif block["type"] in _TOOL_BLOCKS:
                    calls[index] = (block["name"], block["input"])
                elif block["type"] in _THINKING_BLOCKS:
                    thinking[index] = _thinking_block(block)
        elif kind == "content_block_start" and doc["content_block"]["type"] in _TOOL_BLOCKS:
            calls[doc["index"]] = (doc["content_block"]["name"], None)
            partial[doc["index"]] = ""
        elif kind == "content_block_start" and doc["content_block"]["type"] in _THINKING_BLOCKS:
            thinking[doc["index"]] = _thinking_block(doc["content_block"])
        elif kind == "content_block_delta":
            delta = doc["delta"]
            if delta["type"] == "text_delta":
                text.append(delta["text"])
            elif delta["type"] == "input_json_delta":
                partial[doc["index"]] += delta["partial_json"]
            elif delta["type"] == "thinking_delta":
                thinking[doc["index"]][1] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                thinking[doc["index"]][2] += delta["signature"]
    for index, json_text in partial.items():
        calls[index] = (calls[index][0], json.loads(json_text or "{}"))
    blocks = [tuple(thinking[k]) for k in sorted(thinking)]
    return "".join(text), [calls[k] for k in sorted(calls)], blocks


ANSWER_READERS = {"chat": _chat, "responses": _responses, "messages": _anthropic}


def recorded_answer(api, expected):
    """(text, tool calls) of a recorded answer, and for ``messages`` its thinking blocks:
    ``api`` is chat, responses or messages."""
    if expected.kind == "sse":
        documents = [_parsed(e["data"]) for e in expected.events if "data" in e]
        documents = [d for d in documents if isinstance(d, dict)]
    else:
        documents = [expected.value]
    return ANSWER_READERS[api](documents)
