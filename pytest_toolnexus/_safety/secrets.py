"""The secret scan run before any cassette is written, and by ``pytest-toolnexus check``.

Every string leaf of every interaction is read: URLs, header values, JSON values, SSE event
payloads and comments, NDJSON lines, text bodies, byte chunks decoded as text, error messages.
A hit names the interaction and the path inside it, and what kind of secret it looks like;
the secret itself is never printed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._store.cassette import (
    BytesBody,
    ChunksBody,
    EventStreamBody,
    Interaction,
    JsonBody,
    NdjsonBody,
    RecordedError,
    SseBody,
    TextBody,
)

from .joined import threads
from .mask import (
    PATTERNS,
    credential_environment,
    is_credential_name,
)

__all__ = ["PATTERNS", "SecretHit", "SecretScanner", "credential_environment", "is_credential_name"]

# The patterns and the credential-name rule live in a leaf module, so that the reprs of the
# cassette and seam types can mask with them too.

_HIDDEN: Final = "<secret>"


@dataclass(frozen=True, slots=True)
class SecretHit:
    """One secret found: where it sits and what it looks like (never the value)."""

    interaction: int | None
    """The interaction's position; None for the cassette's ``meta``."""
    path: str
    kind: str
    across: int = 0
    """For a secret found only in a stream's pieces joined, how many pieces it spans (their
    index range is in ``path``); 0 for one found whole in one string."""

    def __str__(self) -> str:
        spread = f", spread across {self.across} pieces" if self.across else ""
        if self.interaction is None:
            return f"{self.path}: {self.kind}{spread}"
        return f"interaction #{self.interaction}, {self.path}: {self.kind}{spread}"


class SecretScanner:
    """Finds secret-shaped strings and the values of credential-like environment variables.

    ``allow`` lists exact strings that are known fakes; a match that is one of them, or that
    sits inside one of them, is not a hit.
    """

    def __init__(
        self,
        *,
        allow: Iterable[str] = (),
        environ: Mapping[str, str] | None = None,
        seen: Iterable[tuple[str, str]] = (),
    ) -> None:
        self._allow = tuple(a for a in allow if a)
        # ``seen``: credential values captured earlier (when each request was sent), which a
        # monkeypatch may have taken out of the environment by the time of the scan.
        pairs = {*credential_environment(environ).items(), *seen}
        self._env_values = sorted(pairs, key=lambda pair: -len(pair[1]))

    def _allowed(self, text: str, start: int, end: int) -> bool:
        found = text[start:end]
        return any(found in fake or fake in found for fake in self._allow)

    def spans(self, text: str) -> Iterator[tuple[str, int, int]]:
        """``(kind, start, end)`` of every secret in ``text`` that is not allowed."""
        for name, value in self._env_values:
            at = text.find(value)
            while at >= 0:
                if not self._allowed(text, at, at + len(value)):
                    yield f"the value of the environment variable {name}", at, at + len(value)
                at = text.find(value, at + 1)
        for kind, pattern in PATTERNS:
            for match in pattern.finditer(text):
                if not self._allowed(text, match.start(), match.end()):
                    yield kind, match.start(), match.end()

    def kind_of(self, text: str) -> str | None:
        """What secret ``text`` holds, or None."""
        if not text:
            return None
        for name, value in self._env_values:
            at = text.find(value)
            if at >= 0 and not self._allowed(text, at, at + len(value)):
                return f"the value of the environment variable {name}"
        for kind, pattern in PATTERNS:
            for match in pattern.finditer(text):
                if not self._allowed(text, match.start(), match.end()):
                    return kind
        return None

    def mask(self, text: str) -> str:
        """``text`` with every secret in it replaced by ``[secret]``."""
        for _, value in self._env_values:
            if value in text and not any(value in fake for fake in self._allow):
                text = text.replace(value, "[secret]")
        for _, pattern in PATTERNS:
            text = pattern.sub(
                lambda m: (
                    m.group(0)
                    if any(m.group(0) in fake or fake in m.group(0) for fake in self._allow)
                    else "[secret]"
                ),
                text,
            )
        return text

    def scan(self, interactions: Iterable[Interaction]) -> list[SecretHit]:
        """Every hit in ``interactions``, in order."""
        hits: list[SecretHit] = []
        for number, interaction in enumerate(interactions):
            for path, text in _leaves(interaction):
                kind = self.kind_of(text)
                if kind is not None:
                    hits.append(SecretHit(number, self._scrub(path), kind))
            response = interaction.response
            if response is not None:
                hits.extend(self._joined(number, response.body, "response.body"))
        return hits

    def _joined(self, number: int, body: object, path: str) -> Iterator[SecretHit]:
        """The secrets a stream's pieces spell only when joined: a match that lies inside one
        part was found as that part's own hit, and one over parts that are all the same
        string (an id repeated in every event) is no streamed text."""
        for thread in threads(body, path):
            seen: set[tuple[int, int]] = set()  # one secret, one hit: the likeliest kind
            for kind, start, end in self.spans(thread.text()):
                first, last = thread.span(start, end)
                if last - first < 2 or len(set(thread.parts[first:last])) == 1:
                    continue
                if (first, last) in seen:
                    continue
                seen.add((first, last))
                across = len(set(thread.pieces[first:last]))
                yield SecretHit(number, self._scrub(thread.named(first, last)), kind, across)

    def scan_meta(self, meta: Mapping[str, Any]) -> list[SecretHit]:
        """Every hit in a cassette's ``meta`` (keys and values, at any depth)."""
        hits: list[SecretHit] = []
        for path, text in _json_leaves(dict(meta), "meta"):
            kind = self.kind_of(text)
            if kind is not None:
                hits.append(SecretHit(None, self._scrub(path), kind))
        return hits

    def scan_cassette(
        self, meta: Mapping[str, Any], interactions: Iterable[Interaction]
    ) -> list[SecretHit]:
        """Every hit in a cassette: its ``meta``, then its interactions."""
        return [*self.scan_meta(meta), *self.scan(interactions)]

    def _scrub(self, path: str) -> str:
        """``path`` with every secret in it (a map key can be one) replaced by a placeholder,
        so that naming where a secret sits never prints it."""
        for _, value in self._env_values:
            path = path.replace(value, _HIDDEN)
        for _, pattern in PATTERNS:
            path = pattern.sub(_HIDDEN, path)
        return path


def _json_leaves(value: Any, path: str) -> Iterator[tuple[str, str]]:
    # Iterative, in document order: a cassette nested deeper than the recursion limit is
    # still scanned instead of crashing the scan.
    stack: list[tuple[str, Any, bool]] = [(path, value, False)]
    while stack:
        where, item, is_key = stack.pop()
        if is_key or isinstance(item, str):
            yield where, str(item)
        elif isinstance(item, dict):
            pending: list[tuple[str, Any, bool]] = []
            for key, child in item.items():
                pending.append((f"{where}[{key!r}] (key)", key, True))
                pending.append((f"{where}[{key!r}]", child, False))
            stack.extend(reversed(pending))
        elif isinstance(item, list):
            stack.extend(
                (f"{where}[{index}]", child, False)
                for index, child in reversed(list(enumerate(item)))
            )


def _body_leaves(body: object, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(body, JsonBody):
        yield from _json_leaves(body.value, f"{path}.value")
    elif isinstance(body, TextBody):
        yield f"{path}.text", body.text
    elif isinstance(body, BytesBody):
        yield f"{path}.data", body.data.decode("utf-8", "ignore")
    elif isinstance(body, SseBody):
        for index, event in enumerate(body.events):
            yield from _json_leaves(dict(event), f"{path}.events[{index}]")
        yield f"{path}.tail", body.tail
    elif isinstance(body, NdjsonBody):
        for index, line in enumerate(body.lines):
            yield from _json_leaves(dict(line), f"{path}.lines[{index}]")
        yield f"{path}.tail", body.tail
    elif isinstance(body, EventStreamBody):
        for index, frame in enumerate(body.frames):
            where = f"{path}.frames[{index}]"
            data = frame.get("data")
            if isinstance(data, bytes):
                yield f"{where}.data", data.decode("utf-8", "ignore")
            yield from _json_leaves(dict(frame), where)  # headers, payload and text
        yield f"{path}.tail", body.tail.decode("utf-8", "ignore")
    elif isinstance(body, ChunksBody):
        joined = b"".join(
            c["data"]
            for c in body.chunks
            if isinstance(c, Mapping) and isinstance(c.get("data"), bytes)
        )
        # Joined, so a secret split across two chunks is still found.
        yield f"{path}.chunks", joined.decode("utf-8", "ignore")


def _error_leaves(error: RecordedError | None, path: str) -> Iterator[tuple[str, str]]:
    if error is not None:
        yield f"{path}.message", error.message


def _header_leaves(headers: Headers, path: str) -> Iterator[tuple[str, str]]:
    # The name is read too: a key pasted where a header name goes is written like any value.
    for name, value in headers.multi_items():
        yield f"{path}[{name!r}] (name)", name
        yield f"{path}[{name!r}]", value


def _leaves(interaction: Interaction) -> Iterator[tuple[str, str]]:
    request = interaction.request
    yield "request.url", request.url
    yield from _header_leaves(request.headers, "request.headers")
    yield from _body_leaves(request.body, "request.body")
    response = interaction.response
    if response is not None:
        yield from _header_leaves(response.headers, "response.headers")
        yield from _body_leaves(response.body, "response.body")
        yield from _error_leaves(response.error, "response.error")
    yield from _error_leaves(interaction.error, "error")
