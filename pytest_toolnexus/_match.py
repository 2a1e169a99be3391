"""Matching a live request to a recorded one: method, normalised URL and semantic body.

Key order and whitespace never matter; headers do not match unless named; body paths the
user names are ignored; credential query values are ignored, so a redacted URL still matches.
Lookups go through a hash index, so the cost of a match does not grow with the cassette.
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

from ._bodies import is_json_type
from ._cassette import AnyBody, Body, EmptyBody, Interaction, JsonBody, RecordedRequest
from ._headers import Headers
from ._redact import ACCOUNT_KEYS, CREDENTIAL_QUERY_PARAMS, mask_keys, redact_headers
from ._seam import RequestBody, TransportRequest
from ._streams import parse_json_text

__all__ = [
    "BodyPath",
    "Candidate",
    "Index",
    "MatchRules",
    "Matcher",
    "body_diff",
    "normalize_url",
    "parse_body_path",
]

Matcher: TypeAlias = Callable[[TransportRequest, RecordedRequest], bool | None]
"""Decides whether a recorded request answers a live one; None leaves it to the rules."""

PathPart: TypeAlias = str | int
BodyPath: TypeAlias = tuple[PathPart, ...]
"""A path into a JSON body; ``"*"`` stands for every key or index at that level."""

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
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


@dataclass(frozen=True, slots=True)
class MatchRules:
    """How requests are compared.

    ``ignore_body`` names body paths whose values never matter (``"metadata.request_id"``,
    ``"messages.*.id"``, or ``"root['user']"``). ``match_headers`` names headers that must be
    equal; none are compared by default, and ``x-stainless-*`` never are. A credential header
    (``authorization``, ``x-api-key`` ...) is redacted in the cassette, so naming one only
    requires it to be present.
    """

    ignore_body: tuple[BodyPath, ...] = ()
    match_headers: tuple[str, ...] = ()
    masked_query: frozenset[str] = CREDENTIAL_QUERY_PARAMS
    masked_keys: frozenset[str] = ACCOUNT_KEYS

    @classmethod
    def build(
        cls, *, ignore_body: Iterable[str] = (), match_headers: Iterable[str] = ()
    ) -> MatchRules:
        headers = tuple(
            h.lower() for h in match_headers if not h.lower().startswith("x-stainless-")
        )
        return cls(tuple(parse_body_path(p) for p in ignore_body), headers)

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
        kind, value = self.body_value(body, mask=mask)
        canonical = _canonical(value) if kind == "json" else value
        header_values: tuple[tuple[str, ...], ...] = ()
        if self.match_headers:
            # Credential headers are redacted before a write, so only their presence can match.
            safe = redact_headers(headers)
            header_values = tuple(tuple(safe.get_list(name)) for name in self.match_headers)
        return (
            method.upper(),
            normalize_url(url, self.masked_query),
            kind,
            canonical,
            header_values,
        )

    def key_of_request(self, request: TransportRequest) -> tuple[Any, ...]:
        content = request.content
        # A body whose bytes name no account key has nothing to mask: skip the walk.
        mask = content is None or any(key.encode() in content for key in self.masked_keys)
        body = live_body(request)
        return self.key(request.method, request.url, request.headers, body, mask=mask)

    def key_of_recorded(self, request: RecordedRequest) -> tuple[Any, ...]:
        return self.key(request.method, request.url, request.headers, request.body)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A recorded request close to a missed one, with what differs."""

    index: int
    request: RecordedRequest
    differences: tuple[str, ...]
    ignorable: tuple[str, ...]
    played: bool


@dataclass
class Index:
    """Unplayed interactions by match key, in recorded order among equals."""

    rules: MatchRules
    interactions: list[Interaction] = field(default_factory=list)
    allow_repeats: bool = False
    matcher: Matcher | None = None
    _queues: dict[tuple[Any, ...], deque[int]] = field(default_factory=dict)
    _played_by_key: dict[tuple[Any, ...], list[int]] = field(default_factory=dict)
    played: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        existing, self.interactions = self.interactions, []
        for interaction in existing:
            self.add(interaction, played=False)

    def add(self, interaction: Interaction, *, played: bool) -> int:
        position = len(self.interactions)
        self.interactions.append(interaction)
        self.played.append(played)
        key = self.rules.key_of_recorded(interaction.request)
        if played:
            self._played_by_key.setdefault(key, []).append(position)
        else:
            self._queues.setdefault(key, deque()).append(position)
        return position

    def take(self, request: TransportRequest) -> int | None:
        """The position of the interaction to play for ``request``, marked played; or None."""
        if self.matcher is not None:
            return self._take_with_matcher(request, self.matcher)
        exact = self.rules.key_of_request(request)
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

    def nearest(self, request: TransportRequest, limit: int = 1) -> list[Candidate]:
        """The recorded requests most like ``request``, closest first."""
        url = normalize_url(request.url, self.rules.masked_query)
        path = urlsplit(url).path
        scored: list[tuple[int, bool, int]] = []
        for position, interaction in enumerate(self.interactions):
            recorded = interaction.request
            other = normalize_url(recorded.url, self.rules.masked_query)
            score = 0
            if recorded.method.upper() != request.method:
                score += 100
            if other != url:
                score += 10 if urlsplit(other).path == path else 50
            # Among equally close requests, one not yet played is the likelier intended match.
            scored.append((score, self.played[position], position))
        scored.sort()
        result: list[Candidate] = []
        for _, _, position in scored[:limit]:
            recorded = self.interactions[position].request
            differences, ignorable = describe_difference(self.rules, recorded, request)
            result.append(
                Candidate(position, recorded, differences, ignorable, self.played[position])
            )
        return result


_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = 4
_short.maxdict = 4
_short.maxlevel = 2


def describe_difference(
    rules: MatchRules, recorded: RecordedRequest, request: TransportRequest
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Human lines for each difference, and dotted body paths that could be ignored."""
    lines: list[str] = []
    if recorded.method.upper() != request.method:
        lines.append(f"method: recorded {recorded.method}, sent {request.method}")
    recorded_url = normalize_url(recorded.url, rules.masked_query)
    sent_url = normalize_url(request.url, rules.masked_query)
    if recorded_url != sent_url:
        lines.append(f"url: recorded {recorded_url}, sent {sent_url}")
    for name in rules.match_headers:
        was = redact_headers(recorded.headers).get_list(name)
        now = redact_headers(request.headers).get_list(name)
        if was != now:
            lines.append(f"header {name}: recorded {was}, sent {now}")
    body_lines, paths = body_diff(
        rules.body_value(recorded.body), rules.body_value(live_body(request))
    )
    return tuple(lines + body_lines), tuple(paths)


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
