"""Redaction of whole interactions: what every write of a cassette applies before its bytes
reach the disk.

:mod:`._redact` knows the rules for one header list, one URL and one JSON value; this module
walks an interaction with them: the request's URL, headers and body, the response's headers
and body, SSE events, NDJSON lines and event stream frames included. A recording session
applies it to each interaction as it is recorded, and the store applies it again at every
write (it is idempotent), so a cassette made by hand or by ``RecordingTransport`` is redacted
as well.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pytest_toolnexus._store.bodies import (
    Body,
    EventStreamBody,
    JsonBody,
    NdjsonBody,
    SseBody,
    TextBody,
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
    """One stored SSE event or NDJSON line with account-identifier keys masked."""
    if key in piece:
        masked: Mapping[str, Any] = deep_mask_keys(dict(piece))
        return masked
    text = piece.get("text")
    if isinstance(text, str):
        safe = _masked_text(text)
        if safe is not text:
            return {**piece, "text": safe}
    return piece


def masked_body(body: Body, *, in_text: bool = True) -> Body:
    """``body`` with account-identifier keys masked, inside SSE, NDJSON and event stream
    payloads too, and (``in_text``) inside JSON that is stored as text. Request text bodies
    match live requests byte for byte, so they are left as they are."""
    if isinstance(body, JsonBody):
        value = deep_mask_keys(body.value)
        return body if value is body.value else JsonBody(value, body.times)
    if isinstance(body, TextBody) and in_text:
        text = _masked_text(body.text)
        return body if text is body.text else TextBody(text)
    if isinstance(body, SseBody):
        return SseBody([_masked_piece(e, "data") for e in body.events], body.tail)
    if isinstance(body, NdjsonBody):
        return NdjsonBody([_masked_piece(line, "value") for line in body.lines], body.tail)
    if isinstance(body, EventStreamBody):
        return EventStreamBody([_masked_piece(f, "payload") for f in body.frames], body.tail)
    return body


def redacted(interaction: Interaction) -> Interaction:
    """``interaction`` with its credential headers and query values ``REDACTED`` and its
    account-identifier keys masked, in the request and the response."""
    request = interaction.request
    safe_request = RecordedRequest(
        request.method,
        redact_url(request.url),
        redact_headers(request.headers),
        masked_body(request.body, in_text=False),
    )
    response = interaction.response
    if response is not None:
        response = replace(
            response, headers=redact_headers(response.headers), body=masked_body(response.body)
        )
    return Interaction(safe_request, response, interaction.error)
