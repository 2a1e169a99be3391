"""Whether an answer is a stream, decided by what the server sends.

A request may hint that it wants a stream (OpenAI's ``"stream": true``, Gemini's
``:streamGenerateContent``), but the answer is what decides whether its timing is kept: a
``text/event-stream``, an NDJSON or an AWS event stream answer is a stream whatever the
request said, and so, to a client that reads bytes as they come (an http bridge), is any body
whose length the server did not announce up front.
"""

from __future__ import annotations

from typing import Final, Literal

from .headers import Headers

__all__ = [
    "EVENTSTREAM_TYPE",
    "NDJSON_TYPES",
    "SSE_TYPE",
    "StreamKind",
    "hands_on_stream",
    "media_type",
    "stream_kind",
]

SSE_TYPE: Final = "text/event-stream"
EVENTSTREAM_TYPE: Final = "application/vnd.amazon.eventstream"
NDJSON_TYPES: Final = frozenset(
    {
        "application/x-ndjson",
        "application/ndjson",
        "application/jsonl",
        "application/x-jsonl",
        "application/jsonlines",
        "application/x-jsonlines",
        "application/json-seq",
    }
)
"""The newline-delimited JSON family, split into one stored line per newline."""

StreamKind = Literal["sse", "ndjson", "eventstream"]

_BODILESS: Final = frozenset({204, 304})


def media_type(content_type: str) -> str:
    """The media type of a ``content-type`` value: lower case, parameters dropped."""
    return content_type.split(";", 1)[0].strip().lower()


def stream_kind(content_type: str) -> StreamKind | None:
    """Which stream a content type names, or None for a body that is not one by nature."""
    media = media_type(content_type)
    if media == SSE_TYPE:
        return "sse"
    if media in NDJSON_TYPES:
        return "ndjson"
    if media == EVENTSTREAM_TYPE:
        return "eventstream"
    return None


def hands_on_stream(
    headers: Headers, *, method: str, status: int, asked: bool, bridged: bool, incremental: bool
) -> bool:
    """Whether a live answer goes to the client as a stream (chunk by chunk, each timed)
    rather than read whole first.

    ``headers`` are the answer's as the server sent them (``content-length`` and
    ``transfer-encoding`` included). It streams when the request ``asked`` for a stream. For
    a client behind an http bridge (``bridged``), which reads the bytes itself, it also streams
    when the content type is a stream type (SSE, NDJSON, AWS event stream), whatever the
    request said; and for one that reads the body as it comes (``incremental``: httpx and
    aiohttp always, urllib3 with ``preload_content=False``), when the server did not announce
    the body's length (a chunked body, or one that runs until the connection closes). A seam
    caller that did not ask gets the whole body, as the seam promises. A HEAD, a 204 or a
    304 has no body to stream.
    """
    if asked:
        return True
    if method.upper() == "HEAD" or status in _BODILESS or not bridged:
        return False
    if stream_kind(headers.get("content-type", "")) is not None:
        return True
    return incremental and "content-length" not in headers
