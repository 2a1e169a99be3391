"""The bodies of a vcrpy interaction: how they were written down, what they encode, and the
stored body each becomes.

A body reaches the importer in one of the forms vcrpy and the serializers built on it write:
text (plain, quoted, literal ``|`` or folded ``>`` YAML: all read as one string), ``!!binary``
bytes, a ``{string: ...}`` or ``{base64_string: ...}`` map, a ``BytesIO`` or a list of parts
(older vcrpy), or a value already parsed from JSON (pydantic-ai's ``parsed_body``). Anything
else is a :class:`BodyProblem`, never an empty body.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import importlib
import io
import json
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._session.record import BodyRecorder, fixed_body
from pytest_toolnexus._store.cassette import (
    Body,
    BytesBody,
    ChunksBody,
    EmptyBody,
    JsonBody,
    TextBody,
)
from pytest_toolnexus._store.streams import storable

__all__ = [
    "BODY_MAP_KEYS",
    "BodyProblem",
    "RawBody",
    "decode",
    "parsed_body",
    "raw_body",
    "request_body",
    "response_body",
]

BODY_MAP_KEYS: Final = frozenset({"string", "base64_string", "encoding"})
"""The keys a body map may hold. ``encoding`` is Ruby VCR's label for the string's charset
(``UTF-8``, ``ASCII-8BIT``); the string itself is already text or base64, so the label
changes nothing and is the one key read and left out."""

_GZIP_MAGIC: Final = b"\x1f\x8b"
# A body of one of these types is a gzip file, not a gzip-encoded body: never unwrapped.
_GZIP_FILE_TYPES: Final = frozenset({"application/gzip", "application/x-gzip"})
_SSE_STARTS: Final = (b"event:", b"data:", b"id:", b"retry:", b": ")
_SSE_FIELDS: Final = frozenset({"data", "event", "id", "retry"})
# What may stand before an event stream's first field without being part of it.
_LEADING: Final = b"\xef\xbb\xbf \t\r\n"
_TEXT_TYPES: Final = ("text/", "application/xml", "application/javascript")


class BodyProblem(Exception):
    """One interaction cannot be converted without losing or inventing something."""


@dataclass(frozen=True, slots=True)
class RawBody:
    """A body's bytes as the cassette holds them. ``binary`` is true when the cassette wrote
    them as bytes (``!!binary``, base64): only those can still be content-encoded, since
    vcrpy writes a body as text only once it is decoded."""

    data: bytes
    binary: bool


def raw_body(value: object, where: str) -> RawBody:
    """The bytes of a body in any form vcrpy writes; a problem for any other form."""
    if value is None:
        return RawBody(b"", binary=False)
    if isinstance(value, bytes):
        return RawBody(value, binary=True)
    if isinstance(value, str):
        return RawBody(value.encode("utf-8", "surrogateescape"), binary=False)
    if isinstance(value, io.BytesIO):
        return RawBody(value.getvalue(), binary=True)
    if isinstance(value, Mapping):
        unknown = sorted(str(key) for key in value if key not in BODY_MAP_KEYS)
        if unknown:
            raise BodyProblem(
                f"{where} body map has the field(s) {', '.join(map(repr, unknown))}, which "
                f"import-vcr does not understand (it reads {', '.join(sorted(BODY_MAP_KEYS))})"
            )
        if value.get("base64_string") is not None:
            if value.get("string"):
                raise BodyProblem(f"{where} body has both 'string' and 'base64_string'")
            return RawBody(_base64(value["base64_string"], where), binary=True)
        return raw_body(value.get("string"), f"{where} body's 'string':")
    if isinstance(value, list | tuple) and all(isinstance(p, str | bytes) for p in value):
        parts = [raw_body(part, where) for part in value]
        return RawBody(b"".join(p.data for p in parts), any(p.binary for p in parts))
    raise BodyProblem(
        f"{where} body is {_type_name(value)}, not text, bytes or a {{string: ...}} map"
    )


def _type_name(value: object) -> str:
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list | tuple):
        return "a list of " + ", ".join(sorted({type(v).__name__ for v in value}) or {"nothing"})
    return f"a {type(value).__name__} ({str(value)[:40]!r})"


def _base64(encoded: object, where: str) -> bytes:
    if not isinstance(encoded, str | bytes):
        raise BodyProblem(f"{where} body's base64_string is {_type_name(encoded)}")
    try:
        return base64.b64decode(encoded, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise BodyProblem(f"{where} body's base64_string is not base64: {exc}") from exc


def parsed_body(value: object, where: str) -> Body:
    """A body that a serializer stored as its parsed JSON value (pydantic-ai's
    ``parsed_body``)."""
    if not storable(value):
        raise BodyProblem(f"{where} parsed_body is {_type_name(value)}, not a JSON value")
    return JsonBody(value)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Content-encoding


def _brotli_decompress(data: bytes) -> bytes:
    for name in ("brotli", "brotlicffi"):
        try:
            module: Any = importlib.import_module(name)
        except ImportError:
            continue
        result: bytes = module.decompress(data)
        return result
    raise BodyProblem(
        "the response body is brotli-encoded (content-encoding: br) and no brotli module is "
        "installed: pip install brotli, then import again"
    )


def _inflate(data: bytes) -> bytes:
    try:
        return zlib.decompress(data)
    except zlib.error:
        # Some servers send raw deflate, without the zlib wrapper.
        return zlib.decompress(data, -zlib.MAX_WBITS)


_DECODERS: Final[dict[str, Callable[[bytes], bytes]]] = {
    "gzip": gzip.decompress,
    "x-gzip": gzip.decompress,
    "deflate": _inflate,
    "br": _brotli_decompress,
}


def _media(headers: Headers) -> str:
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


def decode(headers: Headers, raw: RawBody) -> tuple[bytes, str]:
    """The body with its content-encodings undone (the last one applied first), and a note
    saying what was done: ``gzip decoded``; ``gzip decoded (no content-encoding; gzip magic)``
    when a body kept as bytes starts with the gzip magic and no header names a coding; or
    ``gzip header over decoded text`` when the header stayed on a body the cassette holds as
    text, which is stored as it is."""
    codings = [
        part.strip().lower()
        for value in headers.get_list("content-encoding")
        for part in value.split(",")
        if part.strip() and part.strip().lower() != "identity"
    ]
    data = raw.data
    if not data:
        return data, ""
    if not raw.binary:
        # vcrpy writes bytes that are not UTF-8 (every gzip, deflate and brotli body) as
        # !!binary; text under a content-encoding was decoded before it was written.
        return data, f"{'+'.join(codings)} header over decoded text" if codings else ""
    if not codings:
        if data.startswith(_GZIP_MAGIC) and _media(headers) not in _GZIP_FILE_TYPES:
            return _undo("gzip", data), "gzip decoded (no content-encoding; gzip magic)"
        return data, ""
    for coding in reversed(codings):
        data = _undo(coding, data)
    return data, f"{'+'.join(codings)} decoded"


def _undo(coding: str, data: bytes) -> bytes:
    decoder = _DECODERS.get(coding)
    if decoder is None:
        raise BodyProblem(
            f"the response body has content-encoding {coding!r}, which import-vcr cannot "
            "decode (it decodes gzip, deflate and br)"
        )
    try:
        return decoder(data)
    except BodyProblem:
        raise
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        raise BodyProblem(
            f"the response body says content-encoding {coding!r} but does not decode as "
            f"{coding}: {exc}"
        ) from exc
    except Exception as exc:  # brotli raises its own error type
        raise BodyProblem(
            f"the response body says content-encoding {coding!r} but does not decode as "
            f"{coding}: {type(exc).__name__}: {exc}"
        ) from exc


# ---------------------------------------------------------------------------------------------
# What the body is


def _sniffed_type(data: bytes) -> str | None:
    """The media type a body without a ``content-type`` evidently has: an event stream, one
    JSON document, or NDJSON (two or more lines, each JSON); None when it is none of them."""
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(_SSE_STARTS) and _is_event_stream(data):
        return "text/event-stream"
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return None
    try:
        json.loads(text)
    except ValueError:
        pass
    else:
        return "application/json"
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    try:
        for line in lines:
            json.loads(line)
    except ValueError:
        return None
    return "application/x-ndjson"


def _is_event_stream(data: bytes) -> bool:
    """Whether every line of ``data`` is an SSE field (``data``, ``event``, ``id``, ``retry``)
    or a comment. A parser drops any other line, so a body that has one (a JSON error sent
    under ``text/event-stream``) is not split into events: it would lose that line."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return False
    for line in text.splitlines():
        if line and not line.startswith(":") and line.split(":", 1)[0] not in _SSE_FIELDS:
            return False
    return True


def _typed(headers: Headers, data: bytes) -> Headers:
    """The headers to classify the body by: the recorded ones, or, when they name no
    content-type, one sniffed from the body (the stored headers are left as recorded)."""
    if "content-type" in headers:
        if _media(headers) != "text/event-stream" or _is_event_stream(data):
            return headers
        headers = headers.without("content-type")
    sniffed = _sniffed_type(data)
    return headers if sniffed is None else headers.with_value("content-type", sniffed)


def _binary_type(headers: Headers) -> bool:
    media = _media(headers)
    return bool(media) and not media.startswith(_TEXT_TYPES) and "json" not in media


def request_body(headers: Headers, raw: RawBody) -> Body:
    """A request body stored as the recorder stores one: JSON parsed (under a JSON
    content-type, or with none when it parses), else text, else bytes."""
    if not raw.data:
        return EmptyBody()
    if raw.binary and _binary_type(headers):
        return BytesBody(raw.data)
    return fixed_body(_typed(headers, raw.data), raw.data)


def _leading_space(headers: Headers, data: bytes) -> tuple[bytes, str]:
    """``data`` without the whitespace before its first SSE field when that whitespace alone
    keeps it from reading as an event stream (``" data: ..."``, a BOM, a blank line of
    spaces), and a warning saying so; else ``data`` unchanged and no warning."""
    if _media(headers) not in ("", "text/event-stream"):
        return data, ""
    head = data.lstrip(_LEADING)
    if (
        len(head) == len(data)
        or not head.startswith(_SSE_STARTS)
        or _is_event_stream(data)
        or not _is_event_stream(head)
    ):
        return data, ""
    dropped = len(data) - len(head)
    return head, (
        f"the event stream begins with {dropped} byte(s) of whitespace before its first field "
        f"({_preview(data)}); they were dropped and the stream was split into events, though "
        "an SSE client given those bytes skips the first field"
    )


def _not_split(typed: Headers, data: bytes) -> str:
    """A warning for a body that looks like an event stream (by its content-type or its
    start) but was kept whole, naming the first line that is no SSE field; else ""."""
    looks = _media(typed) == "text/event-stream" or data.lstrip(_LEADING).startswith(_SSE_STARTS)
    if not looks:
        return ""
    text = data.decode(errors="replace")
    for number, line in enumerate(text.splitlines(), 1):
        if line and not line.startswith(":") and line.split(":", 1)[0] not in _SSE_FIELDS:
            return (
                f"the body looks like an event stream, but its line {number} is no SSE field "
                f"({_preview(line.encode())}), so it was kept whole as text: a client reading "
                "it as a stream would drop that line. Fix the line in the vcrpy cassette and "
                "import it again to have it split into events"
            )
    return ""


def _preview(data: bytes) -> str:
    text = data.decode(errors="replace")
    return repr(text if len(text) <= 40 else text[:37] + "...")


def response_body(headers: Headers, data: bytes, *, binary: bool) -> tuple[Body, str]:
    """The stored body, as a recording would store it, and a warning ("" when none); streams
    are split with every piece at ``t = 0``, since vcrpy keeps no timing. Bytes under a binary
    content-type (audio, an AWS event stream) stay bytes even when they happen to decode as
    UTF-8. Whitespace before an event stream's first field is dropped, with a warning; a body
    that looks like an event stream but is kept whole as text gets a warning too."""
    if not data:
        return EmptyBody(), ""
    data, warning = _leading_space(headers, data)
    typed = _typed(headers, data)
    if binary and _binary_type(typed):
        return BytesBody(data), warning
    recorder = BodyRecorder(typed)
    recorder.feed(data, 0.0)
    body = recorder.finish()
    if isinstance(body, ChunksBody):
        # Not an event stream nor NDJSON: kept whole, as a response read whole is.
        body = fixed_body(typed, data)
    if isinstance(body, EmptyBody):
        raise BodyProblem(f"the response body has {len(data)} byte(s) that would be stored empty")
    if isinstance(body, TextBody):
        warning = warning or _not_split(typed, data)
    return body, warning
