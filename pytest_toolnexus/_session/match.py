"""Matching a live request to a recorded one: method, normalised URL and semantic body.

Key order and whitespace never matter; headers do not match unless named; body paths the
user names are ignored; credential query values are ignored, so a redacted URL still matches.
``match_on`` narrows what is compared to some of method, scheme, host, port, path, query, body
and headers: the preset ``"vcrpy"`` compares what vcrpy compares by default (no body).
Lookups go through a hash index, so the cost of a match does not grow with the cassette.

Why one module of over 400 lines: the miss explanations (:func:`describe_difference`,
:func:`body_diff`, :func:`query_differences`) must compare exactly what :class:`MatchRules` and
:class:`Index` compare, through the same normalising helpers; split apart, the two would drift.
"""

from __future__ import annotations

import functools
import json
import re
import reprlib
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pytest_toolnexus._safety.redact import (
    ACCOUNT_KEYS,
    CREDENTIAL_QUERY_PARAMS,
    mask_keys,
    redact_headers,
)
from pytest_toolnexus._seam.bodies import encode_json, is_json_type
from pytest_toolnexus._seam.codings import decoded
from pytest_toolnexus._seam.errors import expected_error
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import RequestBody, TransportRequest
from pytest_toolnexus._store.cassette import (
    AnyBody,
    Body,
    EmptyBody,
    Interaction,
    JsonBody,
    RecordedRequest,
)
from pytest_toolnexus._store.streams import parse_json_text

__all__ = [
    "MATCH_PARTS",
    "MATCH_PRESETS",
    "BodyPath",
    "Candidate",
    "Index",
    "MatchRules",
    "Matcher",
    "body_diff",
    "normalize_url",
    "parse_body_path",
]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error

Matcher: TypeAlias = Callable[[TransportRequest, RecordedRequest], bool | None]
"""Decides whether a recorded request answers a live one; None leaves it to the rules."""

PathPart: TypeAlias = str | int
BodyPath: TypeAlias = tuple[PathPart, ...]
"""A path into a JSON body; ``"*"`` stands for every key or index at that level."""

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}

MATCH_PARTS: Final = ("method", "scheme", "host", "port", "path", "query", "body", "headers")
"""What ``match_on`` may name. ``headers`` compares every request header (less
``ignore_headers`` and ``x-stainless-*``); the others are parts of the request line and body."""

MATCH_PRESETS: Final[dict[str, tuple[str, ...]]] = {
    "default": ("method", "scheme", "host", "port", "path", "query", "body"),
    "vcrpy": ("method", "scheme", "host", "port", "path", "query"),
}
"""Named ``match_on`` values. ``vcrpy`` is vcrpy's default ``match_on``: the body and the
headers are not compared."""

_URL_PARTS: Final = frozenset(("scheme", "host", "port", "path", "query"))
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
            parts |= _URL_PARTS
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


_ROOT_PART = re.compile(r"\[(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"|(\d+)|(\*))\]")


def parse_body_path(spec: str) -> BodyPath:
    """Parse ``"messages.*.content"`` or deepdiff's ``"root['messages'][0]['content']"``.

    In the dotted form a part made of digits is a list index; ``*`` matches anything.
    """
    text = spec.strip()
    if not text:
        raise ValueError("an ignored body path cannot be empty")
    if text.startswith("root"):
        rest = text[4:]
        parts: list[PathPart] = []
        position = 0
        while position < len(rest):
            found = _ROOT_PART.match(rest, position)
            if found is None:
                raise ValueError(
                    f"cannot read body path {spec!r}: expected ['key'] or [index] at "
                    f"{rest[position:]!r}"
                )
            single, double, index, star = found.groups()
            if index is not None:
                parts.append(int(index))
            elif star is not None:
                parts.append("*")
            else:
                parts.append(single if single is not None else double)
            position = found.end()
        return tuple(parts)
    return tuple(int(p) if p.isdigit() else p for p in text.split("."))


def dotted(path: Sequence[PathPart]) -> str:
    """The dotted spelling of a path, as the ``ignore_body`` option takes it."""
    return ".".join(str(p) for p in path)


def _strip(value: Any, paths: Sequence[BodyPath]) -> Any:
    if not paths:
        return value
    here = [p for p in paths if len(p) == 1]
    deeper = [p for p in paths if len(p) > 1]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if any(p[0] in (key, "*") for p in here):
                continue
            sub = [p[1:] for p in deeper if p[0] in (key, "*")]
            out[key] = _strip(item, sub)
        return out
    if isinstance(value, list):
        result: list[Any] = []
        for position, item in enumerate(value):
            if any(p[0] in (position, "*") or p[0] == str(position) for p in here):
                continue
            sub = [p[1:] for p in deeper if p[0] in (position, "*") or p[0] == str(position)]
            result.append(_strip(item, sub))
        return result
    return value


def live_body(request: TransportRequest) -> RequestBody:
    """The body of a live request as the recorder stores it.

    A request that carries only ``content``, or JSON as bytes under a JSON content type, is
    recorded as parsed JSON; it must be compared the same way, or it would never match.
    """
    body = request.body
    if body is None and request.content:
        body = request.content
    if isinstance(body, bytes) and body and "content-encoding" in request.headers:
        body = decoded(request.headers, body)[1]  # stored decoded, so compared decoded
    if isinstance(body, bytes) and body and is_json_type(request.headers.get("content-type", "")):
        try:
            ok, value = parse_json_text(body.decode())
        except UnicodeDecodeError:
            ok, value = False, None
        if ok:
            parsed: RequestBody = value
            return parsed
    return body


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@functools.lru_cache(maxsize=4096)
def normalize_url(url: str, masked_query: frozenset[str] = CREDENTIAL_QUERY_PARAMS) -> str:
    """Lower-case scheme and host, no default port, sorted query, masked credential values."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    query = sorted(
        (name, "" if name.lower() in masked_query else value)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    return urlunsplit((scheme, netloc, parts.path or "/", urlencode(query), ""))


@functools.lru_cache(maxsize=4096)
def _url_key(
    url: str, masked_query: frozenset[str], ignored_query: frozenset[str], parts: frozenset[str]
) -> str:
    """The URL reduced to the parts that are compared: the others are left empty, and
    ignored query parameters are dropped."""
    if parts >= _URL_PARTS and not ignored_query:
        return normalize_url(url, masked_query)
    split = urlsplit(url)
    scheme = split.scheme.lower() if "scheme" in parts else ""
    host = (split.hostname or "").lower() if "host" in parts else ""
    port = ""
    if "port" in parts:
        number = split.port if split.port is not None else _DEFAULT_PORTS.get(split.scheme.lower())
        port = "" if number is None else str(number)
    path = (split.path or "/") if "path" in parts else ""
    query = ""
    if "query" in parts:
        query = urlencode(
            sorted(
                (name, "" if name.lower() in masked_query else value)
                for name, value in parse_qsl(split.query, keep_blank_values=True)
                if name.lower() not in ignored_query
            )
        )
    return f"{scheme}|{host}|{port}|{path}|{query}"


@dataclass(frozen=True, slots=True)
class MatchRules:
    """How requests are compared.

    ``ignore_body`` names body paths whose values never matter (``"metadata.request_id"``,
    ``"messages.*.id"``, or ``"root['user']"``). ``match_headers`` names headers that must be
    equal; none are compared by default, and ``x-stainless-*`` never are. A credential header
    (``authorization``, ``x-api-key`` ...) is redacted in the cassette, so naming one only
    requires it to be present.

    ``parts`` is what ``match_on`` named; ``ignore_query`` names query parameters that never
    matter, and ``ignore_headers`` headers left out when ``headers`` is compared.
    """

    ignore_body: tuple[BodyPath, ...] = ()
    match_headers: tuple[str, ...] = ()
    masked_query: frozenset[str] = CREDENTIAL_QUERY_PARAMS
    masked_keys: frozenset[str] = ACCOUNT_KEYS
    parts: frozenset[str] = frozenset(MATCH_PRESETS["default"])
    ignore_query: frozenset[str] = frozenset()
    ignore_headers: frozenset[str] = frozenset()

    @classmethod
    def build(
        cls,
        *,
        ignore_body: Iterable[str] = (),
        match_headers: Iterable[str] = (),
        match_on: str | Iterable[str] = "default",
        ignore_query: Iterable[str] = (),
        ignore_headers: Iterable[str] = (),
    ) -> MatchRules:
        headers = tuple(
            h.lower() for h in match_headers if not h.lower().startswith("x-stainless-")
        )
        return cls(
            tuple(parse_body_path(p) for p in ignore_body),
            headers,
            parts=match_parts(match_on),
            ignore_query=frozenset(q.lower() for q in ignore_query),
            ignore_headers=frozenset(h.lower() for h in ignore_headers),
        )

    @property
    def preset(self) -> str | None:
        """The name of the preset these parts make, if they make one."""
        for name, parts in MATCH_PRESETS.items():
            if self.parts == frozenset(parts):
                return name
        return None

    def url_key(self, url: str) -> str:
        """The compared form of a URL."""
        return _url_key(url, self.masked_query, self.ignore_query, self.parts)

    def compared_headers(self, headers: Headers) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The headers compared when ``match_on`` names ``headers``: every one but the ignored,
        ``x-stainless-*`` and those that describe the wire form of the body (a compressed body
        is stored decoded, without them), credentials by presence only."""
        safe = redact_headers(headers)
        names = sorted(
            {
                name.lower()
                for name in safe
                if name.lower() not in self.ignore_headers
                and name.lower() not in _WIRE_HEADERS
                and not name.lower().startswith("x-stainless-")
            }
        )
        return tuple((name, tuple(safe.get_list(name))) for name in names)

    def body_value(self, body: RequestBody | Body, *, mask: bool = True) -> tuple[str, Any]:
        """The comparable form of a live or recorded body. ``mask=False`` skips masking
        account keys, for a body known not to hold any."""
        if isinstance(body, AnyBody):
            return "any", None
        if isinstance(body, JsonBody):
            return "json", _strip(mask_keys(body.value, self.masked_keys), self.ignore_body)
        if isinstance(body, EmptyBody) or body is None or body == b"":
            return "raw", b""
        if isinstance(body, bytes):
            return "raw", body
        if isinstance(body, dict | list | str | int | float | bool):
            masked = mask_keys(body, self.masked_keys) if mask else body
            return "json", _strip(masked, self.ignore_body)
        return "raw", body.content()

    def key(
        self,
        method: str,
        url: str,
        headers: Headers,
        body: RequestBody | Body,
        *,
        mask: bool = True,
    ) -> tuple[Any, ...]:
        if "body" in self.parts:
            kind, value = self.body_value(body, mask=mask)
            canonical = _canonical(value) if kind == "json" else value
        else:
            kind, canonical = "unmatched", None
        header_values: tuple[Any, ...] = ()
        if self.match_headers:
            # Credential headers are redacted before a write, so only their presence can match.
            safe = redact_headers(headers)
            header_values = tuple(tuple(safe.get_list(name)) for name in self.match_headers)
        if "headers" in self.parts:
            header_values = (*header_values, self.compared_headers(headers))
        return (
            method.upper() if "method" in self.parts else "",
            self.url_key(url),
            kind,
            canonical,
            header_values,
        )

    def key_of_request(self, request: TransportRequest) -> tuple[Any, ...]:
        content = request.content
        # A body whose bytes name no account key has nothing to mask: skip the walk. Bytes
        # under a content-encoding say nothing until decoded, so those are always walked.
        mask = (
            content is None
            or "content-encoding" in request.headers
            or any(key.encode() in content for key in self.masked_keys)
        )
        body = live_body(request)
        return self.key(request.method, request.url, request.headers, body, mask=mask)

    def key_of_recorded(self, request: RecordedRequest) -> tuple[Any, ...]:
        return self.key(request.method, request.url, request.headers, request.body)

    @property
    def keys_by_bytes(self) -> bool:
        """Whether a request's key follows from its method, URL and body bytes alone (no
        header is compared), so that bytes seen before can stand for the parsed body."""
        return "body" in self.parts and not self.match_headers and "headers" not in self.parts


@dataclass(frozen=True, slots=True)
class Candidate:
    """A recorded request close to a missed one, with what differs."""

    index: int
    request: RecordedRequest
    differences: tuple[str, ...]
    ignorable: tuple[str, ...]
    played: bool
    query: tuple[str, ...] = ()
    """Names of query parameters that differ, which ``ignore_query`` could name."""


_REMEMBERED: Final = 1024
"""How many live request bodies :class:`Index` keeps the key of, beyond the recorded ones."""


@dataclass
class Index:
    """Unplayed interactions by match key, in recorded order among equals.

    The fast path: most clients send a recorded request again as the very bytes it went out
    as the first time, which for a JSON body is its compact encoding. So each recorded JSON
    request is also filed under ``(method, url, encoded body)``, and a live request whose bytes
    are found there takes that key without its body being parsed, masked and canonicalised.
    Live bodies met on the slow path are remembered the same way (up to ``_REMEMBERED``), for
    a test that sends one request many times. Equal bytes parse to equal values, so both
    paths give the same key; where headers are compared, only the slow path runs.
    """

    rules: MatchRules
    interactions: list[Interaction] = field(default_factory=list)
    allow_repeats: bool = False
    matcher: Matcher | None = None
    _queues: dict[tuple[Any, ...], deque[int]] = field(default_factory=dict)
    _played_by_key: dict[tuple[Any, ...], list[int]] = field(default_factory=dict)
    played: list[bool] = field(default_factory=list)
    _by_bytes: dict[tuple[str, str, bytes], tuple[Any, ...]] = field(default_factory=dict)
    _remembered: int = 0
    _fast: bool = False

    def __post_init__(self) -> None:
        self._fast = self.rules.keys_by_bytes
        existing, self.interactions = self.interactions, []
        for interaction in existing:
            self.add(interaction, played=False)

    @staticmethod
    def _encoded(request: RecordedRequest) -> bytes | None:
        """A recorded JSON body as a client sends it (compact), or None."""
        body = request.body
        if not isinstance(body, JsonBody):
            return None
        try:
            return encode_json(body.value)
        except (TypeError, ValueError, RecursionError, OverflowError):
            return None  # a damaged value: the key's own walk reports it

    def _key_of(self, request: TransportRequest) -> tuple[Any, ...]:
        """``rules.key_of_request(request)``, from the bytes when they were seen before."""
        content = request.content
        fast = (
            content is not None
            and self._fast
            and "content-encoding" not in request.headers
            and is_json_type(request.headers.get("content-type", ""))
        )
        if not fast:
            return self.rules.key_of_request(request)
        assert content is not None
        found = self._by_bytes.get((request.method, request.url, content))
        if found is not None:
            return found
        key = self.rules.key_of_request(request)
        if self._remembered < _REMEMBERED:
            self._remembered += 1
            self._by_bytes[(request.method, request.url, content)] = key
        return key

    def add(self, interaction: Interaction, *, played: bool) -> int:
        position = len(self.interactions)
        self.interactions.append(interaction)
        self.played.append(played)
        request = interaction.request
        # Masked always (unlike a live body): the walk is also the load's check that a stored
        # body is not nested past what matching can compare.
        key = self.rules.key_of_recorded(request)
        if played:
            self._played_by_key.setdefault(key, []).append(position)
        else:
            self._queues.setdefault(key, deque()).append(position)
        if self._fast:  # encoded only where the bytes can stand for the key
            encoded = self._encoded(request)
            if encoded is not None:
                self._by_bytes.setdefault((request.method.upper(), request.url, encoded), key)
        return position

    def take(self, request: TransportRequest) -> int | None:
        """The position of the interaction to play for ``request``, marked played; or None."""
        if self.matcher is not None:
            return self._take_with_matcher(request, self.matcher)
        exact = self._key_of(request)
        # A recorded request whose body is "any" answers whatever body is sent.
        loose = (*exact[:2], "any", None, *exact[4:])
        for key in (exact, loose):
            queue = self._queues.get(key)
            if queue:
                position = queue.popleft()
                self.played[position] = True
                self._played_by_key.setdefault(key, []).append(position)
                return position
        if self.allow_repeats:
            for key in (exact, loose):
                used = self._played_by_key.get(key)
                if used:
                    return used[-1]
        return None

    def _take_with_matcher(self, request: TransportRequest, matcher: Matcher) -> int | None:
        """Slow path: ask ``matcher`` about each candidate in order; None defers to the key."""
        key: tuple[Any, ...] | None = None
        fallback: int | None = None
        for position, interaction in enumerate(self.interactions):
            if self.played[position] and not self.allow_repeats:
                continue
            verdict = matcher(request, interaction.request)
            if verdict is None:
                if key is None:
                    key = self.rules.key_of_request(request)
                recorded = self.rules.key_of_recorded(interaction.request)
                verdict = recorded == key or recorded == (*key[:2], "any", None, *key[4:])
            if not verdict:
                continue
            if not self.played[position]:
                self._mark(position)
                return position
            fallback = position
        return fallback

    def _mark(self, position: int) -> None:
        self.played[position] = True
        key = self.rules.key_of_recorded(self.interactions[position].request)
        queue = self._queues.get(key)
        if queue is not None and position in queue:
            queue.remove(position)
        self._played_by_key.setdefault(key, []).append(position)

    def already_played(self, request: TransportRequest) -> list[int]:
        """Positions of played interactions with the same key as ``request``."""
        exact = self.rules.key_of_request(request)
        loose = (*exact[:2], "any", None, *exact[4:])
        return [*self._played_by_key.get(exact, ()), *self._played_by_key.get(loose, ())]

    def unused(self) -> list[int]:
        return [i for i, done in enumerate(self.played) if not done]

    def nearest(
        self,
        request: TransportRequest,
        limit: int = 1,
        mask: Callable[[str], str] | None = None,
        closeness: Callable[[RecordedRequest], float] | None = None,
    ) -> list[Candidate]:
        """The recorded requests most like ``request``, closest first. ``mask`` is applied to
        every string of both bodies before they are diffed and shortened for display.

        Requests are ranked by method and URL; among several that tie for the closest there,
        by ``closeness`` (higher is closer: how alike the bodies are), which is not asked when
        only one request is that close."""
        url = normalize_url(request.url, self.rules.masked_query)
        path = urlsplit(url).path
        scored: list[tuple[int, float, bool, int]] = []
        for position, interaction in enumerate(self.interactions):
            recorded = interaction.request
            other = normalize_url(recorded.url, self.rules.masked_query)
            score = 0
            if recorded.method.upper() != request.method:
                score += 100
            if other != url:
                score += 10 if urlsplit(other).path == path else 50
            # Among equally close requests, one not yet played is the likelier intended match.
            scored.append((score, 0.0, self.played[position], position))
        best = min((entry[0] for entry in scored), default=0)
        tied = [i for i, entry in enumerate(scored) if entry[0] == best]
        if closeness is not None and len(tied) > 1:
            for i in tied:
                score, _, played, position = scored[i]
                recorded = self.interactions[position].request
                scored[i] = (score, -closeness(recorded), played, position)
        scored.sort()
        result: list[Candidate] = []
        for _, _, _, position in scored[:limit]:
            recorded = self.interactions[position].request
            differences, ignorable = describe_difference(self.rules, recorded, request, mask)
            query = tuple(
                name for name, _ in query_differences(self.rules, recorded.url, request.url)
            )
            result.append(
                Candidate(position, recorded, differences, ignorable, self.played[position], query)
            )
        return result


_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = 4
_short.maxdict = 4
_short.maxlevel = 2


def describe_difference(
    rules: MatchRules,
    recorded: RecordedRequest,
    request: TransportRequest,
    mask: Callable[[str], str] | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Human lines for each difference, and dotted body paths that could be ignored."""
    lines: list[str] = []
    if "method" in rules.parts and recorded.method.upper() != request.method:
        lines.append(f"method: recorded {recorded.method}, sent {request.method}")
    if rules.url_key(recorded.url) != rules.url_key(request.url):
        recorded_url = normalize_url(recorded.url, rules.masked_query)
        sent_url = normalize_url(request.url, rules.masked_query)
        lines.append(f"url: recorded {recorded_url}, sent {sent_url}")
        lines += [line for _, line in query_differences(rules, recorded.url, request.url)]
    for name in rules.match_headers:
        was = redact_headers(recorded.headers).get_list(name)
        now = redact_headers(request.headers).get_list(name)
        if was != now:
            lines.append(f"header {name}: recorded {was}, sent {now}")
    if "headers" in rules.parts:
        was_all = dict(rules.compared_headers(recorded.headers))
        now_all = dict(rules.compared_headers(request.headers))
        for name in sorted(set(was_all) | set(now_all)):
            if was_all.get(name) != now_all.get(name):
                lines.append(
                    f"header {name}: recorded {list(was_all.get(name, ()))}, "
                    f"sent {list(now_all.get(name, ()))}"
                )
    if "body" not in rules.parts:
        return tuple(lines), ()
    recorded_body = rules.body_value(recorded.body)
    sent_body = rules.body_value(live_body(request))
    if mask is not None:
        # Masked before the diff shortens anything: a shortened secret is no longer one the
        # mask would recognise.
        recorded_body, sent_body = _masked(recorded_body, mask), _masked(sent_body, mask)
    body_lines, paths = body_diff(recorded_body, sent_body)
    return tuple(lines + body_lines), tuple(paths)


def _masked(comparable: tuple[str, Any], mask: Callable[[str], str]) -> tuple[str, Any]:
    kind, value = comparable
    if kind == "raw" and isinstance(value, bytes):
        return kind, mask(value.decode("utf-8", "surrogateescape")).encode(
            "utf-8", "surrogateescape"
        )
    if kind != "json":
        return comparable

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return mask(item)
        if isinstance(item, dict):
            return {mask(k): walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    return kind, walk(value)


def query_differences(rules: MatchRules, recorded_url: str, sent_url: str) -> list[tuple[str, str]]:
    """Each compared query parameter that differs between two URLs with the same path, with
    a line saying how."""
    was = urlsplit(normalize_url(recorded_url, rules.masked_query))
    now = urlsplit(normalize_url(sent_url, rules.masked_query))
    if "query" not in rules.parts or was.path != now.path or was.query == now.query:
        return []
    before = dict(parse_qsl(was.query, keep_blank_values=True))
    after = dict(parse_qsl(now.query, keep_blank_values=True))
    found: list[tuple[str, str]] = []
    for name in sorted(set(before) | set(after)):
        if name.lower() in rules.ignore_query or before.get(name) == after.get(name):
            continue
        if name not in after:
            line = f"query {name}: only in the recording ({before[name]!r})"
        elif name not in before:
            line = f"query {name}: only in the sent request ({after[name]!r})"
        else:
            line = f"query {name}: recorded {before[name]!r}, sent {after[name]!r}"
        found.append((name, line))
    return found


def body_diff(
    recorded: tuple[str, Any], sent: tuple[str, Any], limit: int = 8
) -> tuple[list[str], list[str]]:
    """Path-level differences between two comparable bodies (deepdiff for JSON)."""
    (was_kind, was), (now_kind, now) = recorded, sent
    if was_kind != now_kind:
        return [f"body: recorded a {was_kind} body, sent a {now_kind} body"], []
    if was_kind == "raw":
        if was == now:
            return [], []
        at = next((i for i, (a, b) in enumerate(zip(was, now, strict=False)) if a != b), None)
        at = min(len(was), len(now)) if at is None else at
        return [
            f"body bytes differ from byte {at}: recorded {_short.repr(was[at : at + 40])}, "
            f"sent {_short.repr(now[at : at + 40])} ({len(was)} vs {len(now)} bytes)"
        ], []
    if _canonical(was) == _canonical(now):
        return [], []
    from deepdiff import DeepDiff  # imported on a miss only: it is slow to import

    diff = DeepDiff(was, now, verbose_level=2, ignore_order=False)
    lines: list[str] = []
    paths: list[str] = []
    for report_type, items in diff.tree.items():
        for item in items:
            path = item.path()
            parts = item.path(output_format="list")
            if report_type.endswith("_added"):
                lines.append(f"{path}: only in the sent request ({_short.repr(item.t2)})")
            elif report_type.endswith("_removed"):
                lines.append(f"{path}: only in the recording ({_short.repr(item.t1)})")
            else:
                lines.append(
                    f"{path}: recorded {_short.repr(item.t1)}, sent {_short.repr(item.t2)}"
                )
            if parts:
                paths.append(dotted(parts))
    lines.sort()
    extra = len(lines) - limit
    shown = lines[:limit]
    if extra > 0:
        shown.append(f"... and {extra} more difference{'s' if extra > 1 else ''}")
    return shown, sorted(set(paths))[:limit]
