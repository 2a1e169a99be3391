"""A cassette's timeline as plain data: each request's recorded arrivals, headers, end and
error, in the documented JSON schema of docs/report.md (``pytest-toolnexus show --json``).

Times are milliseconds from the moment the request was sent, as the cassette keeps them.
Nothing here draws; :mod:`.page` turns this data into HTML.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from pytest_toolnexus._safety.redact import redact_headers, redact_url
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._store.cassette import (
    Body,
    ChunksBody,
    EventStreamBody,
    Interaction,
    JsonBody,
    NdjsonBody,
    SseBody,
    WebSocketBody,
)

__all__ = [
    "LABEL",
    "SCHEMA_VERSION",
    "cassette_timeline",
    "distinct_leaves",
    "dumps",
    "frame_name",
    "interaction_timeline",
    "recorded_pieces",
    "short",
]

SCHEMA_VERSION: Final = 1
"""The version of the timeline and run documents; a field is only ever added within it."""

LABEL: Final = 32
"""Characters of a piece's label (a longer one ends in ``...``)."""


def short(value: Any, width: int = LABEL) -> str:
    """``value`` as one line of at most ``width`` characters."""
    if isinstance(value, bytes):
        text = f"{len(value)} bytes"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def frame_name(frame: Mapping[str, Any]) -> str:
    """What an event stream frame is: its ``:event-type`` (or ``:exception-type``)."""
    for name, _, value in frame.get("headers", []):
        if name in (":event-type", ":exception-type"):
            return str(value)
    return "frame"


def _piece(t: Any, label: str) -> dict[str, Any]:
    return {"t": round(float(t), 3), "label": label}


def _leaves(value: Any) -> dict[str, Any]:
    """A JSON value's scalar leaves by dotted path (``choices.0.delta.content``)."""
    found: dict[str, Any] = {}
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict) and item:
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in item.items())
        elif isinstance(item, list) and item:
            stack.extend((f"{path}.{i}" if path else str(i), v) for i, v in enumerate(item))
        else:
            found[path] = item
    return dict(sorted(found.items()))


def distinct_leaves(payloads: Sequence[Any]) -> list[dict[str, Any] | None]:
    """Each JSON piece's scalar leaves less those that are the same in every piece (an OpenAI
    chunk repeats its ``id`` and ``model``; its delta is what tells them apart); None for a
    piece that is not JSON."""
    flat = [_leaves(p) if isinstance(p, dict | list) else None for p in payloads]
    structured = [f for f in flat if f is not None]
    constant: set[str] = set()
    if len(structured) >= 2:
        first = structured[0]
        constant = {
            path
            for path, value in first.items()
            if all(other.get(path, _leaves) == value for other in structured[1:])
        }
    return [None if f is None else {p: v for p, v in f.items() if p not in constant} for f in flat]


def _labels(payloads: Sequence[Any]) -> list[str]:
    """A label per piece: a JSON piece by the leaves that tell it from the others."""
    labels = []
    for payload, leaves in zip(payloads, distinct_leaves(payloads), strict=True):
        if leaves is None:
            labels.append(short(payload))
            continue
        shown = ", ".join(f"{path}={short(value)}" for path, value in leaves.items())
        labels.append(short(shown or "(the same as the other pieces)"))
    return labels


_ARROWS: Final = {"client": "client > ", "server": "< server "}


def _frame_pieces(body: WebSocketBody) -> list[dict[str, Any]]:
    """Each frame of a WebSocket session, both ways, on the one time axis: its time, a label
    that says its direction (``client > ...``, ``< server ...``) and ``from``, its sender."""
    frames = [f for f in body.frames if isinstance(f, Mapping)]
    contents = [
        f"close {f.get('code', '')} {f.get('reason', '')}".rstrip()
        if f.get("kind") == "close"
        else f.get("data", "")
        for f in frames
    ]
    pieces = []
    for frame, text in zip(frames, _labels(contents), strict=True):
        sender = str(frame.get("from"))
        piece = _piece(frame.get("t", 0.0), _ARROWS.get(sender, "? ") + text)
        piece["from"] = sender
        pieces.append(piece)
    return pieces


def _stream_pieces(body: Body) -> list[dict[str, Any]] | None:
    """Each stored piece of a stream body with its arrival, or None for a whole body."""
    if isinstance(body, WebSocketBody):
        return _frame_pieces(body)
    if isinstance(body, SseBody):
        texts = _labels([e.get("data", e.get("text", "")) for e in body.events])
        return [
            _piece(e.get("t", 0.0), f"{e['event']}: {text}" if e.get("event") else text)
            for e, text in zip(body.events, texts, strict=True)
        ]
    if isinstance(body, NdjsonBody):
        texts = _labels([line.get("value", line.get("text")) for line in body.lines])
        return [_piece(x.get("t", 0.0), text) for x, text in zip(body.lines, texts, strict=True)]
    if isinstance(body, ChunksBody):
        return [_piece(c.get("t", 0.0), f"{len(c.get('data', b''))} bytes") for c in body.chunks]
    if isinstance(body, EventStreamBody):
        return [_piece(f.get("t", 0.0), frame_name(f)) for f in body.frames]
    if isinstance(body, JsonBody) and body.times is not None and isinstance(body.value, list):
        texts = _labels(body.value)
        return [_piece(t, text) for t, text in zip(body.times, texts, strict=False)]
    return None


def recorded_pieces(interaction: Interaction) -> list[dict[str, Any]]:
    """The pieces of the recorded response body, each ``{"t": ms, "label": text}``: one per
    SSE event, NDJSON line, chunk, event-stream frame or timed JSON array element, one per
    WebSocket frame either way (with ``"from"``, its sender), or one piece at the end for a
    body delivered whole. An answer that never came has none."""
    response = interaction.response
    if response is None:
        return []
    pieces = _stream_pieces(response.body)
    if pieces is not None:
        return pieces
    return [_piece(response.t_end, f"{response.body.kind} body")]


def _headers(pairs: Iterable[tuple[str, str]]) -> list[list[str]]:
    return [[name, value] for name, value in pairs]


def interaction_timeline(position: int | None, interaction: Interaction) -> dict[str, Any]:
    """One recorded interaction as the schema's ``interaction`` object, its URL and headers
    redacted as the recorder redacts them (a cassette written by hand or ``unsafe_verbatim``
    may hold an opaque key no secret pattern knows)."""
    request = interaction.request
    found: dict[str, Any] = {
        "position": position,
        "method": request.method,
        "url": redact_url(request.url),
        "status": None,
        "kind": None,
        "headers_at": None,
        "end_at": None,
        "complete": None,
        "headers": [],
        "pieces": recorded_pieces(interaction),
        "error": None,
    }
    response = interaction.response
    error = interaction.error
    if response is not None:
        found.update(
            status=response.status,
            kind=response.body.kind,
            headers_at=round(response.t_headers, 3),
            end_at=round(response.t_end, 3),
            complete=response.complete,
            headers=_headers(redact_headers(response.headers).multi_items()),
        )
        error = response.error
    if error is not None:
        found["error"] = {"kind": error.kind, "message": error.message, "t": round(error.t, 3)}
    return found


def cassette_timeline(
    path: Path | str, meta: Mapping[str, Any], interactions: Sequence[Interaction]
) -> dict[str, Any]:
    """A whole cassette as the schema's ``cassette`` document."""
    return {
        "schema": "pytest-toolnexus/cassette-timeline",
        "version": SCHEMA_VERSION,
        "cassette": str(path),
        "meta": {str(k): v for k, v in sorted(meta.items())},
        "interactions": [interaction_timeline(i, x) for i, x in enumerate(interactions)],
    }


def _plain(value: object) -> object:
    """What JSON cannot hold, as text: bytes in ``meta`` by their length, anything else by
    its ``repr``."""
    if isinstance(value, bytes | bytearray):
        return f"({len(value)} bytes)"
    return repr(value)


def dumps(document: Mapping[str, Any], *, indent: int | None = None) -> str:
    """``document`` as JSON text with every secret-shaped string and credential environment
    value masked as ``[secret]``, as ``show`` prints them: the data may come from a cassette
    written before a hook redacted it, or from a request body that was never written."""
    text = json.dumps(document, ensure_ascii=False, indent=indent, default=_plain)
    masked = SecretScanner().mask(text)
    if masked == text:
        return text
    try:
        json.loads(masked)
    except ValueError:
        # A mask across a quote (an environment value holding one): mask leaf by leaf.
        leaves = _mask_leaves(json.loads(text), SecretScanner())
        return json.dumps(leaves, ensure_ascii=False, indent=indent)
    return masked


def _mask_leaves(value: Any, scanner: SecretScanner) -> Any:
    if isinstance(value, str):
        return scanner.mask(value)
    if isinstance(value, list):
        return [_mask_leaves(v, scanner) for v in value]
    if isinstance(value, dict):
        return {scanner.mask(k): _mask_leaves(v, scanner) for k, v in value.items()}
    return value
