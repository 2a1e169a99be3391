"""Building cassettes nobody recorded: provider streams and answers with a chosen cadence.

Each function returns one :class:`Interaction` shaped exactly like what the provider sends, so
the official SDK parses it. The request side matches any body at the provider's URL (the
client's options are not the builder's to guess); pass ``request_body=`` to pin it.

The builders live one module per provider (``build_openai``, ``build_anthropic``,
``build_gemini``, ``build_ollama``) over what they share (``build_base``); this module gathers
them and adds error answers and whole cassettes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_toolnexus._seam.transport import JSONValue
from pytest_toolnexus._session.faults import error_body
from pytest_toolnexus._store.cassette import (
    Body,
    Cassette,
    Interaction,
    JsonBody,
    TextBody,
)

from .build_anthropic import anthropic_messages
from .build_base import (
    ANTHROPIC_URL,
    CREATED,
    DEFAULT_CADENCE,
    GEMINI_BASE,
    OLLAMA_URL,
    OPENAI_CHAT_URL,
    OPENAI_RESPONSES_URL,
    Cadence,
    ToolCall,
    built_request,
    built_response,
    split_text,
)
from .build_gemini import gemini
from .build_gemini_live import GEMINI_LIVE_URL, gemini_live
from .build_ollama import ollama_chat
from .build_openai import chat_chunk, openai_chat, openai_responses, tool_call_deltas
from .build_openai_realtime import OPENAI_REALTIME_URL, openai_realtime
from .build_realtime import RealtimeTurn

__all__ = [
    "ANTHROPIC_URL",
    "CREATED",
    "DEFAULT_CADENCE",
    "GEMINI_BASE",
    "GEMINI_LIVE_URL",
    "OLLAMA_URL",
    "OPENAI_CHAT_URL",
    "OPENAI_REALTIME_URL",
    "OPENAI_RESPONSES_URL",
    "Cadence",
    "RealtimeTurn",
    "ToolCall",
    "anthropic_messages",
    "build_cassette",
    "chat_chunk",
    "error",
    "gemini",
    "gemini_live",
    "ollama_chat",
    "openai_chat",
    "openai_realtime",
    "openai_responses",
    "split_text",
    "tool_call_deltas",
]


# -- errors and files ---------------------------------------------------------------------------


def error(
    status: int,
    *,
    url: str = OPENAI_CHAT_URL,
    method: str = "POST",
    retry_after: str | float | None = None,
    html: bool = False,
    message: str | None = None,
    cadence: Cadence = DEFAULT_CADENCE,
    request_body: JSONValue | None = None,
) -> Interaction:
    """An error answer in the provider's own shape (the provider layer's ``error_body`` of the
    dialect ``url`` speaks), or an HTML page."""
    headers: list[tuple[str, str]] = [("content-type", "text/html" if html else "application/json")]
    if retry_after is not None:
        headers.append(("retry-after", str(retry_after)))
    body: Body
    if html:
        body = TextBody(f"<html><body><h1>{status}</h1><p>{message or 'error'}</p></body></html>")
    else:
        body = JsonBody(error_body(status, url, message))
    end = round(cadence.headers * 1000, 3)
    return Interaction(
        built_request(method, url, request_body),
        built_response(status, headers, body, cadence, end),
    )


def build_cassette(
    path: str | Path,
    interactions: Iterable[Interaction],
    meta: Mapping[str, Any] | None = None,
    *,
    allow_secrets: Iterable[str] = (),
) -> Cassette:
    """Write ``interactions`` as a cassette at ``path`` (marked as built, not recorded).

    The write is :meth:`Cassette.save`'s: the file is redacted and scanned like a recording,
    and a secret-shaped value raises :class:`SecretFoundError` unless ``allow_secrets`` lists
    it as a known fake."""
    cassette = Cassette(
        Path(path),
        list(interactions),
        {"source": "built with pytest_toolnexus.build, not recorded", **(meta or {})},
    )
    cassette.save(allow_secrets=allow_secrets)
    return cassette
