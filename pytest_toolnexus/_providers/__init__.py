"""The provider layer: one module per wire dialect, and the one place that says which
dialect a request speaks.

Every module that knows anything about a provider's API asks here: the recorder (the end of a
stream), the seam's body rules (``_seam/bodies.py``: a URL that asks for a stream), the faults
(the error body and the error event an SDK parses), the builder (endpoints, error answers), the
views (reading an answer) and ``pytest-toolnexus check`` (what to read, and in-stream errors). A
new dialect is one module with a ``DIALECT`` that keeps :class:`Dialect`, listed in
``DIALECTS``.

The layer knows nothing of transports or cassettes: it is asked about method, URL, headers and
parsed pieces, so that the seam's own modules may ask it too.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Final

from ._answer import Name, Piece, ProviderView, ToolCallView, Usage, ViewError, cut, shown
from ._protocol import Dialect, WireRequest
from .anthropic import DIALECT as ANTHROPIC
from .bedrock import DIALECT as BEDROCK
from .bedrock import EXCEPTION_PREFIX
from .gemini import DIALECT as GEMINI
from .gemini_live import DIALECT as GEMINI_LIVE
from .ollama import DIALECT as OLLAMA
from .openai_chat import DIALECT as OPENAI_CHAT
from .openai_realtime import DIALECT as OPENAI_REALTIME
from .openai_responses import DIALECT as OPENAI_RESPONSES

__all__ = [
    "ANTHROPIC",
    "BEDROCK",
    "DIALECTS",
    "EXCEPTION_PREFIX",
    "GEMINI",
    "GEMINI_LIVE",
    "OLLAMA",
    "OPENAI_CHAT",
    "OPENAI_REALTIME",
    "OPENAI_RESPONSES",
    "REALTIME",
    "Dialect",
    "Name",
    "Piece",
    "ProviderView",
    "ToolCallView",
    "Usage",
    "ViewError",
    "WireRequest",
    "dialect_named",
    "ends_stream",
    "provider_of",
    "read",
    "shown",
    "url_asks_for_stream",
]

DIALECTS: Final[tuple[Dialect, ...]] = (
    OPENAI_REALTIME,
    GEMINI_LIVE,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    ANTHROPIC,
    GEMINI,
    OLLAMA,
    BEDROCK,
)
"""Every dialect, in the order they are asked; the first that claims a request speaks it.
The realtime dialects come first: they claim only a WebSocket handshake's ``GET``."""

REALTIME: Final[frozenset[Dialect]] = frozenset({OPENAI_REALTIME, GEMINI_LIVE})
"""The dialects spoken over a WebSocket: their answers are sessions of frames, both ways."""


def provider_of(method: str, url: str, headers: Mapping[str, str] | None = None) -> Dialect | None:
    """The dialect a request speaks, from its method, URL path and headers; None when it is
    no model call a dialect knows (the host, the query and a ``#fragment`` do not count)."""
    request = WireRequest(method, url, headers or {})
    for dialect in DIALECTS:
        if dialect.claims(request):
            return dialect
    return None


def dialect_named(name: str) -> Dialect | None:
    """The dialect a view calls ``name`` (``"anthropic"``, ``"openai-responses"``, ...)."""
    for dialect in DIALECTS:
        if dialect.name == name:
            return dialect
    return None


@functools.lru_cache(maxsize=1024)
def url_asks_for_stream(url: str) -> bool:
    """Whether a URL itself asks for a streamed answer, in any dialect's way (Gemini's
    ``:streamGenerateContent`` or ``alt=sse``, Bedrock's ``/converse-stream``, ...).

    Cached: a test suite sends most of its requests to a handful of URLs, and each call
    otherwise asks every dialect."""
    request = WireRequest("POST", url)
    return any(dialect.streams(request) for dialect in DIALECTS)


def ends_stream(event: str | None, payload: object) -> bool:
    """Whether a stream piece is an end-of-stream marker of any dialect (``[DONE]``,
    ``message_stop``, ``response.completed``, an NDJSON line with ``done: true``, ...)."""
    return any(dialect.ends(event, payload) for dialect in DIALECTS)


def read(dialect: Dialect, pieces: Iterable[Piece], request: WireRequest) -> ProviderView:
    """``dialect``'s view of an answer's pieces. Raises :class:`ViewError`, and nothing else,
    when the answer does not read: whatever a reader meets in a malformed body becomes a
    ``ViewError`` that names the dialect and what went wrong."""
    try:
        return dialect.read(pieces, request)
    except ViewError as exc:
        raise ViewError(f"the {dialect.name} answer does not parse: {exc}") from exc
    except Exception as exc:  # a reader walks untrusted JSON: any failure is the body's
        reason = cut(f"{type(exc).__name__}: {exc}", 300)
        raise ViewError(f"the {dialect.name} answer does not parse: {reason}") from exc
