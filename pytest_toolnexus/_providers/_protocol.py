"""The contract every wire dialect keeps: one small Protocol, and the request it is asked about.

A *dialect* is one provider API's shape on the wire (OpenAI chat completions, Anthropic
Messages, ...). It knows nothing of transports or cassettes: it is asked about a request's
method, URL and headers, about parsed stream pieces, and about error shapes, and it answers in
plain values. The modules that do know transports and cassettes (the recorder, the faults, the
builder, the views, ``check``) ask it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

from ._answer import Name, Piece, ProviderView

__all__ = ["Dialect", "WireRequest"]


@dataclass(frozen=True, slots=True)
class WireRequest:
    """What a dialect is told about a request: its method, URL and headers.

    ``path`` and ``query`` are the URL's, split once; a ``#fragment`` is neither.
    """

    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    path: str = field(init=False)
    query: tuple[tuple[str, str], ...] = field(init=False)

    def __post_init__(self) -> None:
        try:
            parts = urlsplit(self.url)
            path, query = parts.path, tuple(parse_qsl(parts.query, keep_blank_values=True))
        except ValueError:  # an unbalanced IPv6 bracket, say: no dialect's URL
            path, query = "", ()
        object.__setattr__(self, "method", self.method.upper())
        object.__setattr__(self, "path", path.rstrip("/") or "/")
        object.__setattr__(self, "query", query)

    def header(self, name: str) -> str | None:
        """A header's value whatever the case of its name (a plain mapping may be given)."""
        wanted = name.lower()
        for key, value in self.headers.items():
            if key.lower() == wanted:
                return value
        return None

    def asks(self, name: str, value: str) -> bool:
        """Whether the query string carries ``name=value``."""
        return (name, value) in self.query


class Dialect(Protocol):
    """One provider API's wire dialect."""

    @property
    def name(self) -> Name:
        """The provider's name in a view (``ProviderView.provider``)."""
        ...

    @property
    def url(self) -> str:
        """The builder's default endpoint (for Gemini, the base the model name follows)."""
        ...

    @property
    def stream_type(self) -> str:
        """The media type a streamed answer comes as."""
        ...

    def claims(self, request: WireRequest) -> bool:
        """Whether a request is one of this API's model calls, from method, path and headers."""
        ...

    def streams(self, request: WireRequest) -> bool:
        """Whether the URL itself asks for a streamed answer (not the body: that is generic)."""
        ...

    def ends(self, event: str | None, payload: object) -> bool:
        """Whether a piece is this dialect's end-of-stream marker."""
        ...

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The JSON body this API sends with an error ``status``, as its SDK parses it."""
        ...

    def error_event(self, message: str) -> bytes | None:
        """One error event inside a 200 stream, in this API's framing, as its SDK parses it;
        None when the dialect has none to write."""
        ...

    def stream_error(self, event: str | None, payload: object) -> str | None:
        """What a piece that reports an error inside a 2xx answer says; None for any other."""
        ...

    def read(self, pieces: Iterable[Piece], request: WireRequest) -> ProviderView:
        """The view of a successful answer. May raise anything on a malformed body: the
        caller turns it into a ``ViewError``."""
        ...
