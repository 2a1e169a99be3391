"""The parts of a match: the method, the URL with its query, the headers and the body.

Each part is a small frozen object with a setting or two (what ``match_on`` and the ignore
lists make of it). It turns its field of a request into a key, a string or tuple made once per
request, which the match index hashes; and it says in words how a recorded request and a sent
one differ on that field, comparing exactly what its key compares. :class:`.match.MatchRules`
composes them; a part that ``match_on`` leaves out keys every request alike and explains
nothing. The body part, the largest, is in :mod:`.body_part`.

Credential query values are compared by presence only (a cassette holds them redacted), so a
redacted URL still matches; so are credential headers.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pytest_toolnexus._safety.redact import CREDENTIAL_QUERY_PARAMS, redact_headers
from pytest_toolnexus._seam.headers import Headers

__all__ = [
    "MATCH_PARTS",
    "MATCH_PRESETS",
    "URL_PARTS",
    "HeadersPart",
    "MethodPart",
    "QueryPart",
    "UrlPart",
    "match_parts",
    "normalize_url",
]

MATCH_PARTS: Final = ("method", "scheme", "host", "port", "path", "query", "body", "headers")
"""What ``match_on`` may name. ``headers`` compares every request header (less
``ignore_headers`` and ``x-stainless-*``); the others are parts of the request line and body."""

MATCH_PRESETS: Final[dict[str, tuple[str, ...]]] = {
    "default": ("method", "scheme", "host", "port", "path", "query", "body"),
    "vcrpy": ("method", "scheme", "host", "port", "path", "query"),
}
"""Named ``match_on`` values. ``vcrpy`` is vcrpy's default ``match_on``: the body and the
headers are not compared."""

URL_PARTS: Final = frozenset(("scheme", "host", "port", "path", "query"))
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_WIRE_HEADERS: Final = frozenset(("content-encoding", "content-length", "transfer-encoding"))


def match_parts(value: str | Iterable[str]) -> frozenset[str]:
    """The parts a ``match_on`` value names: a preset name, or a list of :data:`MATCH_PARTS`
    (vcrpy's ``uri`` stands for scheme, host, port, path and query; ``raw_body`` for body)."""
    if isinstance(value, str):
        if value in MATCH_PRESETS:
            return frozenset(MATCH_PRESETS[value])
        items: Iterable[str] = [v.strip() for v in value.split(",") if v.strip()]
    else:
        items = value
    parts: set[str] = set()
    for item in items:
        name = str(item).strip().lower()
        if name == "uri":
            parts |= URL_PARTS
        elif name == "raw_body":
            parts.add("body")
        elif name in MATCH_PARTS:
            parts.add(name)
        else:
            known = ", ".join((*MATCH_PARTS, "uri"))
            presets = " or ".join(repr(p) for p in MATCH_PRESETS)
            raise ValueError(
                f"match_on cannot compare {item!r}: name a preset ({presets}) or a list of {known}"
            )
    if not parts:
        raise ValueError("match_on names nothing to compare; give a preset or some parts")
    return frozenset(parts)


# ---------------------------------------------------------------------------------------------
# The method


@dataclass(frozen=True, slots=True)
class MethodPart:
    """The request method, in upper case; ``compared=False`` answers any method."""

    compared: bool = True

    def key(self, method: str) -> str:
        return method.upper() if self.compared else ""

    def explain(self, recorded: str, sent: str) -> list[str]:
        if self.key(recorded) == self.key(sent):
            return []
        return [f"method: recorded {recorded}, sent {sent}"]


# ---------------------------------------------------------------------------------------------
# The URL and its query


def _normal_query(query: str, masked: frozenset[str], ignored: frozenset[str]) -> str:
    """A query string sorted, with the values of ``masked`` names emptied and ``ignored``
    names dropped (names compared in lower case)."""
    return urlencode(
        sorted(
            (name, "" if name.lower() in masked else value)
            for name, value in parse_qsl(query, keep_blank_values=True)
            if name.lower() not in ignored
        )
    )


@functools.lru_cache(maxsize=4096)
def normalize_url(url: str, masked_query: frozenset[str] = CREDENTIAL_QUERY_PARAMS) -> str:
    """Lower-case scheme and host, no default port, sorted query, masked credential values."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    query = _normal_query(parts.query, masked_query, frozenset())
    return urlunsplit((scheme, netloc, parts.path or "/", query, ""))


@dataclass(frozen=True, slots=True)
class QueryPart:
    """The query parameters, in any order. ``masked`` names are compared by presence only (a
    cassette holds them redacted); ``ignored`` names never matter (``ignore_query``)."""

    masked: frozenset[str] = CREDENTIAL_QUERY_PARAMS
    ignored: frozenset[str] = frozenset()

    def key(self, query: str) -> str:
        return _normal_query(query, self.masked, self.ignored)

    def differences(self, recorded: str, sent: str) -> list[tuple[str, str]]:
        """Each compared parameter that differs between two normalised query strings, with
        a line saying how."""
        if recorded == sent:
            return []
        before = dict(parse_qsl(recorded, keep_blank_values=True))
        after = dict(parse_qsl(sent, keep_blank_values=True))
        found: list[tuple[str, str]] = []
        for name in sorted(set(before) | set(after)):
            if name.lower() in self.ignored or before.get(name) == after.get(name):
                continue
            if name not in after:
                line = f"query {name}: only in the recording ({before[name]!r})"
            elif name not in before:
                line = f"query {name}: only in the sent request ({after[name]!r})"
            else:
                line = f"query {name}: recorded {before[name]!r}, sent {after[name]!r}"
            found.append((name, line))
        return found


@functools.lru_cache(maxsize=4096)
def _url_key(
    url: str, parts: frozenset[str], masked: frozenset[str], ignored: frozenset[str]
) -> str:
    """The URL reduced to the parts that are compared (the others left empty), its query as
    :meth:`QueryPart.key` gives it. Cached by what hashes in C: it runs for every request."""
    if parts >= URL_PARTS and not ignored:
        return normalize_url(url, masked)
    split = urlsplit(url)
    scheme = split.scheme.lower() if "scheme" in parts else ""
    host = (split.hostname or "").lower() if "host" in parts else ""
    port = ""
    if "port" in parts:
        number = split.port if split.port is not None else _DEFAULT_PORTS.get(split.scheme.lower())
        port = "" if number is None else str(number)
    path = (split.path or "/") if "path" in parts else ""
    compared_query = _normal_query(split.query, masked, ignored) if "query" in parts else ""
    return f"{scheme}|{host}|{port}|{path}|{compared_query}"


@dataclass(frozen=True, slots=True)
class UrlPart:
    """The URL: those of scheme, host, port, path and query that ``parts`` names, scheme and
    host in lower case, a default port the same as none, the query as :class:`QueryPart`
    compares it."""

    parts: frozenset[str] = URL_PARTS
    query: QueryPart = QueryPart()

    def key(self, url: str) -> str:
        return _url_key(url, self.parts, self.query.masked, self.query.ignored)

    def explain(self, recorded: str, sent: str) -> list[str]:
        """The two URLs when they differ as compared, then each query parameter that does."""
        if self.key(recorded) == self.key(sent):
            return []
        was, now = (normalize_url(url, self.query.masked) for url in (recorded, sent))
        lines = [f"url: recorded {was}, sent {now}"]
        return lines + [line for _, line in self.query_differences(recorded, sent)]

    def query_differences(self, recorded: str, sent: str) -> list[tuple[str, str]]:
        """The query parameters that differ between two URLs with the same path (which
        ``ignore_query`` could name), each with a line saying how."""
        if "query" not in self.parts:
            return []
        was = urlsplit(normalize_url(recorded, self.query.masked))
        now = urlsplit(normalize_url(sent, self.query.masked))
        if was.path != now.path:
            return []
        return self.query.differences(was.query, now.query)


# ---------------------------------------------------------------------------------------------
# The headers


@dataclass(frozen=True, slots=True)
class HeadersPart:
    """The headers: each of ``named`` must be equal (``match_headers``), and with ``every``
    all of them but the ``ignored``, ``x-stainless-*`` and those that describe the body's wire
    form (``match_on`` naming ``headers``). Credential headers are redacted in a cassette, so
    they are compared by presence only. None are compared by default."""

    named: tuple[str, ...] = ()
    every: bool = False
    ignored: frozenset[str] = frozenset()

    @property
    def compared(self) -> bool:
        return bool(self.named) or self.every

    def key(self, headers: Headers) -> tuple[Any, ...]:
        values: tuple[Any, ...] = ()
        if self.named:
            safe = redact_headers(headers)
            values = tuple(tuple(safe.get_list(name)) for name in self.named)
        if self.every:
            values = (*values, self.all_compared(headers))
        return values

    def all_compared(self, headers: Headers) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The headers ``every`` compares, by name; a compressed body is stored decoded,
        without the headers of its wire form, so those are left out."""
        safe = redact_headers(headers)
        names = sorted(
            {
                name.lower()
                for name in safe
                if name.lower() not in self.ignored
                and name.lower() not in _WIRE_HEADERS
                and not name.lower().startswith("x-stainless-")
            }
        )
        return tuple((name, tuple(safe.get_list(name))) for name in names)

    def explain(self, recorded: Headers, sent: Headers) -> list[str]:
        lines: list[str] = []
        for name in self.named:
            was = redact_headers(recorded).get_list(name)
            now = redact_headers(sent).get_list(name)
            if was != now:
                lines.append(f"header {name}: recorded {was}, sent {now}")
        if self.every:
            was_all = dict(self.all_compared(recorded))
            now_all = dict(self.all_compared(sent))
            for name in sorted(set(was_all) | set(now_all)):
                if was_all.get(name) != now_all.get(name):
                    lines.append(
                        f"header {name}: recorded {list(was_all.get(name, ()))}, "
                        f"sent {list(now_all.get(name, ()))}"
                    )
        return lines
