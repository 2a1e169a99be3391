"""Deciding what a body is: JSON to parse, or bytes to keep as they are."""

from __future__ import annotations

import json
import math
import re
from typing import Final

from pytest_toolnexus._providers import url_asks_for_stream

from .depth import deeper_than, may_nest_deeper
from .headers import Headers
from .transport import JSONValue, RequestBody, TransportResponse

__all__ = [
    "body_may_ask_stream",
    "decode_body",
    "encode_json",
    "is_json_type",
    "is_stream_type",
    "keeps_content_length",
    "received",
    "wants_stream",
    "wire_body",
    "wire_content",
    "wire_headers",
    "wire_problem",
    "wire_suspect",
]

_STREAM_TYPES = (
    "text/event-stream",
    "application/x-ndjson",
    "application/jsonl",
    "application/vnd.amazon.eventstream",
)


def is_json_type(content_type: str) -> bool:
    """True for ``application/json`` and ``application/*+json`` media types."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def is_stream_type(content_type: str) -> bool:
    """True for the media types that stream by nature: SSE, NDJSON and AWS event streams."""
    return content_type.split(";", 1)[0].strip().lower() in _STREAM_TYPES


def decode_body(headers: Headers, content: bytes) -> RequestBody:
    """Parse ``content`` when the headers say JSON and it parses; otherwise keep the bytes.

    An empty body stays ``b""`` even when it was declared JSON, so nothing is invented on the
    way back out. JSON nested deeper than ``depth.MAX_DEPTH`` is kept as its bytes too.
    """
    if not is_json_type(headers.get("content-type", "")):
        return content
    if not content:
        return content
    try:
        value: JSONValue = json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return content
    if may_nest_deeper(content) and deeper_than(value):
        return content  # deeper than a cassette may hold: kept as the bytes, as any non-JSON
    return value


def received(status: int, headers: Headers, content: bytes) -> TransportResponse:
    """A complete answer read from a wire, for the seam: its body parsed by
    :func:`decode_body`, and a parsed body's bytes kept as ``content``, so that a bridge hands
    its client exactly what the server sent (spacing, key order, escapes, ``1.0``) while a
    recorder stores the parsed value."""
    body = decode_body(headers, content)
    return TransportResponse(status, headers, body, None if isinstance(body, bytes) else content)


_BODILESS_STATUSES: Final = frozenset({204, 304})


def keeps_content_length(method: str, status: int) -> bool:
    """Whether an answer has no body by definition (to a HEAD, or a 204 or 304), so that its
    ``content-length`` describes the body a GET would have had and must be kept as it came,
    where every other answer's length is that of the bytes it carries."""
    return method.upper() == "HEAD" or status in _BODILESS_STATUSES


# One encoder for every call: ``json.dumps`` with options builds a new one each time.
_COMPACT: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_json(value: JSONValue) -> bytes:
    """Encode a parsed body exactly as ``httpx`` encodes ``json=``: compact, UTF-8, no NaN."""
    return _COMPACT.encode(value).encode()


def wants_stream(url: str, headers: Headers, body: RequestBody) -> bool:
    """Whether a request asks for a streamed answer, from what the request itself says.

    True when the JSON body has ``"stream": true`` (OpenAI, Anthropic, Ollama), when the
    ``Accept`` header names an event-stream, NDJSON or AWS event stream type, or when the URL
    asks for a stream in a provider dialect's way (the provider layer's ``streams``: Gemini's
    ``:streamGenerateContent`` with or without ``alt=sse``, Bedrock's ``/converse-stream``).
    """
    if isinstance(body, dict) and body.get("stream") is True:
        return True
    accept = headers.get("accept", "").lower()
    if any(kind in accept for kind in _STREAM_TYPES):
        return True
    return url_asks_for_stream(url)


_ASKS_STREAM: Final = re.compile(rb'"stream"\s*:\s*true')


def body_may_ask_stream(content: bytes) -> bool:
    """False when the JSON ``content`` cannot parse to an object with ``"stream": true``, so
    that :func:`wants_stream` can be answered from the URL and headers with the body unparsed.
    True is a maybe: the pair may be nested, a key written with ``\\u`` escapes, or the text
    in UTF-16 or UTF-32, which ``json.loads`` reads too (their ASCII holds NUL bytes).
    (Substring searches first: a regular expression alone tries every position in turn.)"""
    if b"\\u" in content or b"\x00" in content:
        return True
    return b'"stream"' in content and _ASKS_STREAM.search(content) is not None


_SAFE_INTEGER: Final = 2**53
# A tuple made once: an ``X | Y`` written in an isinstance call builds a union at every call.
_SEQUENCES: Final = (list, tuple)


_DIGITS_AS_ZERO: Final = bytes.maketrans(b"123456789", b"000000000")
_SIXTEEN_DIGITS: Final = b"0" * 16


def wire_suspect(content: bytes | None) -> bool:
    """False when encoded ``content`` cannot hold NaN, an infinity or a 16-digit number, so
    the body it parsed to needs no :func:`wire_problem` walk. JSON in UTF-16 or UTF-32
    (NUL bytes in its ASCII) is always suspect. (Every digit read as 0 and sixteen 0s looked
    for: several times quicker than a regular expression, which tries each position of the
    body in turn.)"""
    return (
        content is None
        or b"\x00" in content
        or b"NaN" in content
        or b"Infinity" in content
        or _SIXTEEN_DIGITS in content.translate(_DIGITS_AS_ZERO)
    )


def _wire_safe(value: object) -> bool:
    """The quick pass of :func:`wire_problem`: no paths built unless something is wrong.
    Level by level, never recursing, so a body of any depth is walked on every Python."""
    level = [value]
    while level:
        below: list[object] = []
        for item in level:
            if isinstance(item, dict):
                below += item.values()
            elif isinstance(item, _SEQUENCES):
                below += item
            elif isinstance(item, float):
                if not math.isfinite(item):
                    return False
            elif isinstance(item, int) and abs(item) > _SAFE_INTEGER:  # never a bool
                return False
        level = below
    return True


def wire_problem(value: object) -> str | None:
    """Where a parsed body holds what no wire could carry, or None.

    NaN and the infinities are not JSON (``json.dumps(allow_nan=False)`` refuses them), and an
    integer beyond 2**53 does not survive a JSON parser that reads numbers as doubles. The
    first such value in document order is named, by its path from ``root``.
    """
    if _wire_safe(value):
        return None
    pending: list[tuple[str, object]] = [("root", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, float) and not math.isfinite(item):
            return f"{path} is {item!r}, which is not JSON"
        if isinstance(item, int) and abs(item) > _SAFE_INTEGER:
            return f"{path} is {item}, beyond 2**53, where JSON numbers lose precision"
        if isinstance(item, dict):
            pending += [(f"{path}[{key!r}]", child) for key, child in reversed(item.items())]
        elif isinstance(item, _SEQUENCES):
            pending += [(f"{path}[{index}]", item[index]) for index in reversed(range(len(item)))]
    return None


def wire_content(response: TransportResponse, method: str) -> bytes:
    """The bytes of a response whose body is not a stream, as a bridge hands them to a client
    (see :func:`wire_body`)."""
    body = response.body
    if (
        (body is None or body == b"")
        and keeps_content_length(method, response.status)
        and "content-length" in response.headers
    ):
        return b""
    if isinstance(body, bytes):
        return body
    given = response.content
    return given if given is not None else encode_json(body)  # type: ignore[arg-type]


def wire_headers(response: TransportResponse, method: str, content: bytes) -> list[tuple[str, str]]:
    """The header pairs that go with :func:`wire_content`'s ``content`` (see
    :func:`wire_body`). They follow from the headers, the method, the status, whether the
    body is bytes, and the length of ``content``, and from nothing else."""
    headers = response.headers
    if (
        not content
        and response.body in (b"", None)
        and keeps_content_length(method, response.status)
        and "content-length" in headers
    ):
        return headers.multi_items()
    typed = isinstance(response.body, bytes) or "content-type" in headers
    pairs = [(k, v) for k, v in headers.multi_items() if k.lower() != "content-length"]
    if not typed:
        pairs.append(("content-type", "application/json"))
    pairs.append(("content-length", str(len(content))))
    return pairs


def wire_body(response: TransportResponse, method: str) -> tuple[list[tuple[str, str]], bytes]:
    """Header pairs and bytes for a response whose body is not a stream, as a bridge hands it
    to a client. The length is that of the bytes sent, except for an answer that has no body
    by definition (to a HEAD, a 204 or a 304), whose recorded content-length describes the
    body a GET would have had."""
    content = wire_content(response, method)
    return wire_headers(response, method, content), content
