"""The secret scan run before any cassette is written, and by ``pytest-toolnexus check``.

Every string leaf of every interaction is read: URLs, header values, JSON values, SSE event
payloads and comments, NDJSON lines, text bodies, byte chunks decoded as text, error messages.
Each path segment of a URL in any of them is also read on its own, percent-decoded.
A hit names the interaction and the path inside it, and what kind of secret it looks like;
the secret itself is never printed.

The strings (:mod:`.leaves`) of many interactions are read together first (:mod:`.probes`:
each rule once over them, in C); only an interaction that pass finds something in is then
read string by string, and only those hits count. A stream's pieces joined are read for every
stream.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote

from pytest_toolnexus._store.records import Interaction

from .joined import threads
from .leaves import Batch, batches, json_leaves, leaves
from .mask import credential_environment, is_credential_name
from .probes import SEPARATOR, touched
from .rules import FIELD_KIND, KEYWORD_VALUE, RULES, is_credential_field, is_opaque

__all__ = ["PATTERNS", "SecretHit", "SecretScanner", "credential_environment", "is_credential_name"]

PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (kind, pattern) for kind, _, _, pattern in RULES
)
"""What a secret looks like: a description, and the pattern (:data:`.rules.RULES`, whose
provenance each rule records)."""

# The rules live in a leaf module (.rules), which the masking of the cassette and seam types'
# reprs (.mask) imports only when it first masks: a replay that writes nothing compiles none.

_HIDDEN: Final = "<secret>"
_NAME_LIMIT: Final = 64


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
        """``(kind, start, end)`` of every secret in ``text`` that is not allowed, the value
        of a credential environment variable first, then each rule's matches in the order of
        :data:`.rules.RULES`, then values bound to a credential name (``password=...``)."""
        for name, value in self._env_values:
            at = text.find(value)
            while at >= 0:
                if not self._allowed(text, at, at + len(value)):
                    yield f"the value of the environment variable {name}", at, at + len(value)
                at = text.find(value, at + 1)
        for kind, _, needles, pattern in RULES:
            if needles and not any(needle in text for needle in needles):
                continue
            for match in pattern.finditer(text):
                if not self._allowed(text, match.start(), match.end()):
                    yield kind, match.start(), match.end()
        for start, end in _keyword_values(text):
            if not self._allowed(text, start, end):
                yield FIELD_KIND, start, end
        for segment, start, end, previous in _path_segments(text):
            yield from self._segment_spans(text, segment, start, end, previous)

    def _segment_spans(
        self, text: str, segment: str, start: int, end: int, previous: str
    ) -> Iterator[tuple[str, int, int]]:
        """The secrets in one path segment of a URL in ``text`` (``text[start:end]``, which
        reads ``segment`` once percent-decoded), read as a text of its own: a rule that wants
        a token to stand alone is not blocked by the ``/`` around it, and an opaque segment
        after a credential-named one (``/v1/clientSecret/<value>``) is a field's value."""
        exact = segment == text[start:end]  # not percent-encoded: a match maps back
        for kind, _, needles, pattern in RULES:
            if needles and not any(needle in segment for needle in needles):
                continue
            for match in pattern.finditer(segment):
                if self._allowed(segment, match.start(), match.end()):
                    continue
                if exact:
                    yield kind, start + match.start(), start + match.end()
                else:
                    yield kind, start, end
        if (
            previous
            and is_credential_field(previous)
            and is_opaque(segment)
            and not self._allowed(segment, 0, len(segment))
        ):
            yield FIELD_KIND, start, end

    def kind_of(self, text: str, name: str | None = None) -> str | None:
        """What secret ``text`` holds, or None; ``name`` is the field, header or form field
        it is the value of, if any: an opaque value under a credential name is one too."""
        if not text:
            return None
        if (
            name is not None
            and is_credential_field(name)
            and is_opaque(text)
            and not self._allowed(text, 0, len(text))
        ):
            return FIELD_KIND
        return next((kind for kind, _, _ in self.spans(text)), None)

    def mask(self, text: str) -> str:
        """``text`` with every secret in it replaced by ``[secret]``."""
        cuts = sorted((start, end) for _, start, end in self.spans(text))
        if not cuts:
            return text
        out: list[str] = []
        at = 0
        for start, end in cuts:
            if end <= at:
                continue
            out.append(text[at:start] if start > at else "")
            out.append("[secret]")
            at = max(at, end)
        out.append(text[at:])
        return "".join(out)

    def scan(self, interactions: Iterable[Interaction], *, start: int = 0) -> list[SecretHit]:
        """Every hit in ``interactions``, in order, numbered from ``start``. They are read in
        batches as they come, so an iterator of them is never held whole."""
        hits: list[SecretHit] = []
        for batch in batches(enumerate(interactions, start)):
            suspects = self._suspects(batch)
            for number, interaction in batch.interactions:
                if number in suspects:
                    for path, text, name in leaves(interaction):
                        kind = self.kind_of(text, name)
                        if kind is not None:
                            hits.append(SecretHit(number, self._scrub(path), kind))
                response = interaction.response
                if response is not None:
                    hits.extend(self._joined(number, response.body, "response.body"))
        return hits

    def _suspects(self, batch: Batch) -> set[int]:
        """The numbers of the interactions of ``batch`` that may hold a secret: an opaque value
        under a credential name, or a string that the first pass over them all reaches."""
        suspects = set(batch.named)
        text = SEPARATOR.join(batch.texts)
        starts = batch.starts
        for begin, end in touched(text, [value for _, value in self._env_values]):
            first = bisect.bisect_right(starts, begin) - 1
            last = bisect.bisect_right(starts, max(begin, end - 1)) - 1
            suspects.update(batch.numbers[first : last + 1])
        return suspects

    def _joined(self, number: int, body: object, path: str) -> Iterator[SecretHit]:
        """The secrets a stream's pieces spell only when joined: a match that lies inside one
        part was found as that part's own hit, and one over parts that are all the same
        string (an id repeated in every event) is no streamed text."""
        values = [value for _, value in self._env_values]
        for thread in threads(body, path):
            text = thread.text()
            if next(touched(text, values), None) is None:
                continue  # the first pass finds nothing a rule could match
            seen: set[tuple[int, int]] = set()  # one secret, one hit: the likeliest kind
            for kind, start, end in self.spans(text):
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
        for path, text, name in json_leaves(dict(meta), "meta"):
            kind = self.kind_of(text, name)
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
        for _, _, needles, pattern in RULES:
            if not needles or any(needle in path for needle in needles):
                path = pattern.sub(_HIDDEN, path)
        return path


def _keyword_values(text: str) -> Iterator[tuple[int, int]]:
    """Where each opaque value bound to a credential name in ``text`` sits (``password=``,
    ``"clientSecret": "..."``, a form field named ``refresh_token``)."""
    if not any(c in text for c in "=:\n"):
        return
    for match in KEYWORD_VALUE.finditer(text):
        begin = match.start()
        low = max(begin - _NAME_LIMIT, 0)
        while begin > low and (text[begin - 1].isalnum() or text[begin - 1] in "_-."):
            begin -= 1
        word_end = match.start() + _word_length(match)
        value = match.group("value")
        if is_credential_field(text[begin:word_end]) and is_opaque(value):
            yield match.start("value"), match.end("value")


_URL: Final = re.compile(r"(?:https?|wss?)://[^\s\"'<>`?#]*", re.IGNORECASE)
"""The scheme, authority and path of a URL in text (the query and fragment are read with the
whole text, where ``name=value`` binds a value to its name)."""


def _path_segments(text: str) -> Iterator[tuple[str, int, int, str]]:
    """Each path segment of each http(s) or ws(s) URL in ``text``: the segment percent-decoded,
    where it sits, and the segment before it (decoded; ``""`` for the first)."""
    if "://" not in text:
        return
    for match in _URL.finditer(text):
        url = match.group(0)
        slash = url.find("/", url.index("://") + 3)
        if slash < 0:
            continue
        at = match.start() + slash + 1
        previous = ""
        for raw in url[slash + 1 :].split("/"):
            if raw:
                segment = unquote(raw) if "%" in raw else raw
                yield segment, at, at + len(raw), previous
                previous = segment
            at += len(raw) + 1


def _word_length(match: re.Match[str]) -> int:
    """The length of the credential word a :data:`KEYWORD_VALUE` match starts with."""
    text = match.group(0)
    at = 0
    while at < len(text) and (text[at].isalpha()):
        at += 1
    return at
