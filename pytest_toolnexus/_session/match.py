"""Matching a live request to a recorded one: the parts of a match composed, and the index.

:class:`MatchRules` composes the parts of a match (method, URL with its query, body, headers:
:mod:`.parts`, :mod:`.body_part`) as ``match_on`` and the ignore lists configure them: a
request's key is the tuple of its parts' keys, and how a recorded request differs from a sent
one is each part's own explanation, in the same order. The preset ``match_on="vcrpy"``
compares what vcrpy compares by default (no body). :class:`Index` files the recorded requests
by key, so the cost of a match does not grow with the cassette.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, TypeAlias
from urllib.parse import urlsplit

from pytest_toolnexus._safety.redact import ACCOUNT_KEYS, CREDENTIAL_QUERY_PARAMS
from pytest_toolnexus._seam.bodies import encode_json, is_json_type
from pytest_toolnexus._seam.depth import TOO_DEEP, deeper_than, may_nest_deeper
from pytest_toolnexus._seam.errors import expected_error
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import RequestBody, TransportRequest
from pytest_toolnexus._store.cassette import (
    Body,
    Interaction,
    JsonBody,
    MalformedCassette,
    RecordedRequest,
)

from .body_part import ANY_BODY, BodyPart, Comparable, live_body, parse_body_path
from .parts import (
    MATCH_PRESETS,
    URL_PARTS,
    HeadersPart,
    MethodPart,
    QueryPart,
    UrlPart,
    match_parts,
    normalize_url,
)

__all__ = ["Candidate", "Index", "MatchKey", "MatchRules", "Matcher"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error

Matcher: TypeAlias = Callable[[TransportRequest, RecordedRequest], bool | None]
"""Decides whether a recorded request answers a live one; None leaves it to the rules."""


class MatchKey(NamedTuple):
    """A request as the index files it: each part's key, made once per request."""

    method: str
    url: str
    body: Comparable
    headers: tuple[Any, ...]

    @property
    def any_body(self) -> MatchKey:
        """The key of a recorded request like this one whose body is "any"."""
        return MatchKey(self.method, self.url, ANY_BODY, self.headers)


@dataclass(frozen=True, slots=True)
class MatchRules:
    """How requests are compared: the parts of a match, each configured.

    ``ignore_body`` names body paths whose values never matter (``"metadata.request_id"``,
    ``"messages.*.id"``, or ``"root['user']"``). ``match_headers`` names headers that must be
    equal; none are compared by default, and ``x-stainless-*`` never are. A credential header
    (``authorization``, ``x-api-key`` ...) is redacted in the cassette, so naming one only
    requires it to be present. ``match_on`` names the parts compared; ``ignore_query`` names
    query parameters that never matter, and ``ignore_headers`` headers left out when
    ``headers`` is compared.
    """

    parts: frozenset[str]
    method: MethodPart
    url: UrlPart
    body: BodyPart
    headers: HeadersPart

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
        parts = match_parts(match_on)
        named = tuple(h.lower() for h in match_headers if not h.lower().startswith("x-stainless-"))
        return cls(
            parts,
            MethodPart(compared="method" in parts),
            UrlPart(
                parts & URL_PARTS,
                QueryPart(CREDENTIAL_QUERY_PARAMS, frozenset(q.lower() for q in ignore_query)),
            ),
            BodyPart("body" in parts, tuple(parse_body_path(p) for p in ignore_body), ACCOUNT_KEYS),
            HeadersPart(named, "headers" in parts, frozenset(h.lower() for h in ignore_headers)),
        )

    @property
    def preset(self) -> str | None:
        """The name of the preset these parts make, if they make one."""
        for name, parts in MATCH_PRESETS.items():
            if self.parts == frozenset(parts):
                return name
        return None

    @property
    def match_headers(self) -> tuple[str, ...]:
        """The headers that must be equal, as ``match_headers`` named them."""
        return self.headers.named

    @property
    def keys_by_bytes(self) -> bool:
        """Whether a request's key follows from its method, URL and body bytes alone (no
        header is compared), so that bytes seen before can stand for the parsed body."""
        return self.body.compared and not self.headers.compared

    def key(
        self,
        method: str,
        url: str,
        headers: Headers,
        body: RequestBody | Body,
        *,
        mask: bool = True,
    ) -> MatchKey:
        return MatchKey(
            self.method.key(method),
            self.url.key(url),
            self.body.key(body, mask=mask),
            self.headers.key(headers),
        )

    def key_of_request(self, request: TransportRequest) -> MatchKey:
        if not self.body.compared:
            return self.key(request.method, request.url, request.headers, None)
        content = request.content
        # A body whose bytes name no account key has nothing to mask: skip the walk. Bytes
        # under a content-encoding say nothing until decoded, so those are always walked.
        mask = (
            content is None
            or "content-encoding" in request.headers
            or any(key.encode() in content for key in self.body.masked)
        )
        body = live_body(request)
        return self.key(request.method, request.url, request.headers, body, mask=mask)

    def key_of_recorded(self, request: RecordedRequest) -> MatchKey:
        """The key of a stored request. Raises :class:`MalformedCassette` when its JSON body
        nests deeper than a cassette holds, on every Python."""
        body = request.body
        try:
            key = self.key(request.method, request.url, request.headers, body)
        except RecursionError:
            if isinstance(body, JsonBody) and deeper_than(body.value):
                raise MalformedCassette(TOO_DEEP) from None
            raise
        canonical = key.body[1]
        if (
            isinstance(body, JsonBody)
            and isinstance(canonical, str)
            and may_nest_deeper(canonical)
            and deeper_than(body.value)
        ):
            raise MalformedCassette(TOO_DEEP)
        return key

    def explain(
        self,
        recorded: RecordedRequest,
        request: TransportRequest,
        mask: Callable[[str], str] | None = None,
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A line for each difference, part by part, and the dotted body paths that could be
        ignored. ``mask`` is applied to every string of both bodies before they are diffed."""
        lines = [
            *self.method.explain(recorded.method, request.method),
            *self.url.explain(recorded.url, request.url),
            *self.headers.explain(recorded.headers, request.headers),
        ]
        body_lines, paths = self.body.explain(recorded.body, request, mask)
        return tuple(lines + body_lines), tuple(paths)


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
    _queues: dict[MatchKey, deque[int]] = field(default_factory=dict)
    _played_by_key: dict[MatchKey, list[int]] = field(default_factory=dict)
    played: list[bool] = field(default_factory=list)
    _by_bytes: dict[tuple[str, str, bytes], MatchKey] = field(default_factory=dict)
    _remembered: int = 0
    _fast: bool = False
    _any_bodies: bool = False

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

    def _key_of(self, request: TransportRequest) -> MatchKey:
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
        self._any_bodies = self._any_bodies or key.body == ANY_BODY
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
        # A recorded request whose body is "any" answers whatever body is sent: its key is
        # tried second, when the cassette holds one.
        exact = self._key_of(request)
        keys = (exact, exact.any_body) if self._any_bodies else (exact,)
        for key in keys:
            queue = self._queues.get(key)
            if queue:
                position = queue.popleft()
                self.played[position] = True
                self._played_by_key.setdefault(key, []).append(position)
                return position
        if self.allow_repeats:
            for key in keys:
                used = self._played_by_key.get(key)
                if used:
                    return used[-1]
        return None

    def _take_with_matcher(self, request: TransportRequest, matcher: Matcher) -> int | None:
        """Slow path: ask ``matcher`` about each candidate in order; None defers to the key."""
        key: MatchKey | None = None
        fallback: int | None = None
        for position, interaction in enumerate(self.interactions):
            if self.played[position] and not self.allow_repeats:
                continue
            verdict = matcher(request, interaction.request)
            if verdict is None:
                if key is None:
                    key = self.rules.key_of_request(request)
                recorded = self.rules.key_of_recorded(interaction.request)
                verdict = recorded in (key, key.any_body)
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
        return [*self._played_by_key.get(exact, ()), *self._played_by_key.get(exact.any_body, ())]

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
        masked = self.rules.url.query.masked
        url = normalize_url(request.url, masked)
        path = urlsplit(url).path
        scored: list[tuple[int, float, bool, int]] = []
        for position, interaction in enumerate(self.interactions):
            recorded = interaction.request
            other = normalize_url(recorded.url, masked)
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
            differences, ignorable = self.rules.explain(recorded, request, mask)
            query = tuple(
                name for name, _ in self.rules.url.query_differences(recorded.url, request.url)
            )
            result.append(
                Candidate(position, recorded, differences, ignorable, self.played[position], query)
            )
        return result
