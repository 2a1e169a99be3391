"""Redaction of whole interactions: what every write of a cassette applies before its bytes
reach the disk.

:mod:`._redact` knows the rules for one header list, one URL and one JSON value; this module
walks an interaction with them: the request's URL, headers and body, the response's headers
and body, SSE events, NDJSON lines, event stream frames and WebSocket frames (both
directions) included. A recording session
applies it to each interaction as it is recorded, and the store applies it again at every
write (it is idempotent), so a cassette made by hand or by ``RecordingTransport`` is redacted
as well.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_toolnexus._store.bodies import (
    Body,
    EventStreamBody,
    JsonBody,
    NdjsonBody,
    SseBody,
    TextBody,
    WebSocketBody,
)
from pytest_toolnexus._store.records import Interaction, RecordedRequest

from .redact import ACCOUNT_KEYS, deep_mask_keys, mask_keys, redact_headers, redact_url

__all__ = ["masked_body", "redacted"]


def _masked_text(text: str) -> str:
    """JSON kept as text (numbers msgpack cannot carry, or a non-JSON content type) with its
    account-identifier keys masked; any other text as it is."""
    if not any(key in text for key in ACCOUNT_KEYS):
        return text
    try:
        value = json.loads(text)
        masked = mask_keys(value)
    except (ValueError, RecursionError):
        return text
    if masked is value:
        return text
    return json.dumps(masked, ensure_ascii=False, separators=(",", ":"))


def _masked_piece(piece: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """One stored SSE event or NDJSON line with account-identifier keys masked (``piece``
    itself when it holds none)."""
    if key in piece:
        # A map with nothing to mask comes back as it is, anything else as a new map.
        masked: Mapping[str, Any] = deep_mask_keys(piece if type(piece) is dict else dict(piece))
        return masked
    text = piece.get("text")
    if isinstance(text, str):
        safe = _masked_text(text)
        if safe is not text:
            return {**piece, "text": safe}
    return piece


def _masked_pieces(pieces: Sequence[Mapping[str, Any]], key: str) -> list[Mapping[str, Any]] | None:
    """The pieces of a stream with account-identifier keys masked, or None when none held
    any (a long stream is not copied to be written as it is)."""
    out: list[Mapping[str, Any]] | None = None
    for index, piece in enumerate(pieces):
        masked = _masked_piece(piece, key)
        if masked is not piece:
            if out is None:
                out = list(pieces)
            out[index] = masked
    return out


def masked_body(body: Body, *, in_text: bool = True) -> Body:
    """``body`` with account-identifier keys masked, inside SSE, NDJSON and event stream
    payloads too, and (``in_text``) inside JSON that is stored as text. Request text bodies
    match live requests byte for byte, so they are left as they are. A body with nothing to
    mask is returned as it is."""
    if isinstance(body, JsonBody):
        value = deep_mask_keys(body.value)
        return body if value is body.value else JsonBody(value, body.times)
    if isinstance(body, TextBody) and in_text:
        text = _masked_text(body.text)
        return body if text is body.text else TextBody(text)
    if isinstance(body, SseBody):
        events = _masked_pieces(body.events, "data")
        return body if events is None else SseBody(events, body.tail)
    if isinstance(body, NdjsonBody):
        lines = _masked_pieces(body.lines, "value")
        return body if lines is None else NdjsonBody(lines, body.tail)
    if isinstance(body, EventStreamBody):
        frames = _masked_pieces(body.frames, "payload")
        return body if frames is None else EventStreamBody(frames, body.tail)
    if isinstance(body, WebSocketBody):
        frames = _masked_pieces(body.frames, "data")
        return body if frames is None else WebSocketBody(frames)
    return body


def redacted(interaction: Interaction) -> Interaction:
    """``interaction`` with its credential headers and query values ``REDACTED`` and its
    account-identifier keys masked, in the request and the response; ``interaction`` itself
    when it holds nothing to redact (a loaded cassette is written without a copy of it)."""
    request = interaction.request
    url = redact_url(request.url)
    headers = redact_headers(request.headers)
    body = masked_body(request.body, in_text=False)
    safe_request = request
    if url != request.url or headers is not request.headers or body is not request.body:
        safe_request = RecordedRequest(request.method, url, headers, body)
    response = interaction.response
    safe_response = response
    if response is not None:
        response_headers = redact_headers(response.headers)
        response_body = masked_body(response.body)
        if response_headers is not response.headers or response_body is not response.body:
            safe_response = replace(response, headers=response_headers, body=response_body)
    if safe_request is request and safe_response is response:
        return interaction
    return Interaction(safe_request, safe_response, interaction.error)
