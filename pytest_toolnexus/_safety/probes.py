"""Where in many strings at once a secret could be: the fast first pass of the secret scan.

The scan reads every string of a cassette, and a 30 MB cassette holds over a million. Trying
each rule on each string costs a Python loop per string and per rule (about 20 µs a string,
25 s for such a cassette), so the scan joins the strings of many interactions into one text,
with :data:`SEPARATOR` between them, and :func:`touched` looks for each rule once over that
text, in C. Only an interaction whose strings a span of :func:`touched` reaches is then scanned
string by string with the rules themselves (:meth:`.secrets.SecretScanner.scan`), and only that
scan's hits count. So a probe may report too much, never too little: for every match a rule
makes in one string alone, :func:`touched` reports a span that reaches into that string.

Why that holds:

- The separator is a line break, a NUL and a line break. A rule's edges (``\\b``, the
  lookarounds) read the line break beside a string as they read the string's end, and a
  quantifier that runs on past the end still matches where it started, so a rule's match in
  one string alone is a match at the same place in the joined text. (A match across a
  separator is a false alarm, which the string-by-string scan then clears.)
- A rule is looked for with its own pattern unless :data:`_PROBES` gives it a probe: a pattern
  that matches, in the joined text, wherever the rule does, starting inside the rule's match (a
  part every match must hold: the ``:`` and the 35 characters after it of a Telegram token).
  ``re.finditer`` reports matches that do not overlap, and each next search starts where the
  last match ended, so the string of every match of the probe is reached by a reported span.
- A URL's path segments, which the scan also reads one by one, percent-decoded (a rule that
  wants a token to stand alone is blocked by the ``/`` around it in the whole text), are
  joined and probed the same way; the segments taken are those after every ``://`` up to
  where a URL ends, with or without a scheme before it, a superset of the scan's. A segment
  after a credential-named one is reached when it is opaque, as the scan reads it.
- A condition skips a rule only when no match is possible: none of its needles is in the text
  (each match holds one), none of its ``folded`` needles is in the casefolded text (a pattern
  matched ignoring case: each character it matches as ``a`` casefolds to ``a``), or the text
  holds no run of ``run`` characters of :data:`RUN_CHARACTERS`.

``tests/test_secret_probes.py`` holds each probe to that, on matches drawn from the rule itself.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from .rules import KEYWORD_VALUE, RULES, is_credential_field, is_opaque

__all__ = ["KEYWORD_NEEDLES", "PROBES", "RUN_CHARACTERS", "SEPARATOR", "Probe", "touched"]

SEPARATOR: Final = "\n\x00\n"
"""What joins the strings of a batch: no rule can match across it."""

RUN_CHARACTERS: Final = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+"
)
"""The characters of an AWS secret access key standing alone (base64 without ``=``)."""

# Each byte of the batch's UTF-8 to 1 when it is one of RUN_CHARACTERS, else to 0: a run of n
# ones is a run of n such characters (a character outside ASCII is bytes >= 0x80, all zeros).
_RUN_TABLE: Final = bytes(1 if b in RUN_CHARACTERS else 0 for b in range(256))

KEYWORD_NEEDLES: Final = ("pass", "pwd", "secret", "token", "key", "contrase")
"""The casefolded starts of the credential words :data:`.rules.KEYWORD_VALUE` begins with
(``password``, ``passwd`` and ``pass`` start with ``pass``; ``contraseña`` with ``contrase``)."""


@dataclass(frozen=True, slots=True)
class Probe:
    """How to look for one rule over a batch: conditions that skip it when no match is
    possible, then the pattern whose matches are reported (the rule's own when None)."""

    needles: tuple[str, ...] = ()
    folded: tuple[str, ...] = ()
    run: int = 0
    pattern: re.Pattern[str] | None = None


# Probes for the rules that have no literal a match must hold, or whose pattern the regular
# expression engine can only try at every position (one starting with \b or a lookbehind),
# keyed by the rule's pattern. Every other rule is looked for with its pattern after its own
# needles.
_PROBES: Final[dict[str, Probe]] = {
    # AWS access key id: 20 characters of [0-9A-Z], an A first: a literal the engine skips to.
    r"\b(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}\b": Probe(
        pattern=re.compile(r"A[3BCKS][0-9A-Z]{18}")
    ),
    # AWS secret access key after an aws... name (ignoring case).
    (r"aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?['\"]([0-9a-zA-Z/+]{40})['\"]"): Probe(
        folded=("aws",)
    ),
    # AWS secret access key standing alone: a run of 40 base64 characters.
    (
        r"(?<![A-Za-z0-9/+_.-])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])"
        r"(?=[A-Za-z0-9/+]{0,39}[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=_.-])"
    ): Probe(run=40),
    # Slack tokens (ignoring case).
    r"xox(?:a|b|p|o|s|r)-(?:\d+-)+[a-z0-9]+": Probe(folded=("xox",)),
    # Discord bot token: from its first dot on.
    r"[MNO][a-zA-Z\d_-]{23,25}\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}": Probe(
        needles=(".",), pattern=re.compile(r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}")
    ),
    # Telegram bot token: from its colon on.
    r"\d{8,10}:[0-9A-Za-z_-]{35}": Probe(needles=(":",), pattern=re.compile(r":[0-9A-Za-z_-]{35}")),
    # Twilio: AC or SK and 32 characters, without the word boundaries.
    r"\b(?:AC[a-z0-9]{32}|SK[a-z0-9]{32})\b": Probe(
        needles=("AC", "SK"), pattern=re.compile(r"AC[a-z0-9]{32}|SK[a-z0-9]{32}")
    ),
}

PROBES: Final[tuple[tuple[Probe, re.Pattern[str]], ...]] = tuple(
    (_PROBES.get(pattern.pattern, Probe(needles=needles)), pattern)
    for _, _, needles, pattern in RULES
)
"""For each rule of :data:`.rules.RULES`, in order: its probe and its own pattern."""


# For each needle, the shorter needles inside it: where one of those is absent, so is it.
_NEEDLES: Final = frozenset(needle for probe, _ in PROBES for needle in probe.needles)
_INSIDE: Final[dict[str, tuple[str, ...]]] = {
    needle: tuple(other for other in _NEEDLES if other != needle and other in needle)
    for needle in _NEEDLES
}


def _holds(text: str, needle: str, found: dict[str, bool]) -> bool:
    known = found.get(needle)
    if known is None:
        known = all(_holds(text, inner, found) for inner in _INSIDE[needle]) and needle in text
        found[needle] = known
    return known


def _has_run(text: str, length: int) -> bool:
    mapped = text.encode("utf-8", "surrogatepass").translate(_RUN_TABLE)
    return b"\x01" * length in mapped


def touched(text: str, values: Sequence[str] = ()) -> Iterator[tuple[int, int]]:
    """Spans of ``text`` (strings joined with :data:`SEPARATOR`) that reach every place a rule
    (in the text, or in a URL's path segment read alone), a credential word bound to a value
    (:data:`.rules.KEYWORD_VALUE`) or one of ``values`` (credential values from the
    environment) could match in one of the strings."""
    for value in values:
        at = text.find(value)
        while at >= 0:
            yield at, at + len(value)
            at = text.find(value, at + 1)
    folded: list[str] = []
    yield from _ruled(text, folded)
    yield from _keyworded(text, folded[0] if folded else text.casefold())
    yield from _segments(text)


def _ruled(text: str, folded: list[str]) -> Iterator[tuple[int, int]]:
    """The spans every rule's probe reports in ``text``; ``folded`` gets the casefolded text
    when one was made."""
    found: dict[str, bool] = {}  # each needle looked for once (sk- before sk-ant-, say)
    for probe, own in PROBES:
        if probe.needles and not any(_holds(text, needle, found) for needle in probe.needles):
            continue
        if probe.folded:
            if not folded:
                folded.append(text.casefold())
            if not any(needle in folded[0] for needle in probe.folded):
                continue
        if probe.run and not _has_run(text, probe.run):
            continue
        for match in (probe.pattern or own).finditer(text):
            yield match.span()


def _segments(text: str) -> Iterator[tuple[int, int]]:
    """The path segments of the URLs in ``text`` that a rule could match read alone, or that
    are opaque after a credential-named segment: where each sits in ``text``."""
    segments: list[str] = []
    places: list[tuple[int, int]] = []
    for segment, start, end, previous in _url_segments(text):
        if previous and is_credential_field(previous) and is_opaque(segment):
            yield start, end
        else:
            segments.append(segment)
            places.append((start, end))
    if not segments:
        return
    starts: list[int] = []
    at = 0
    for segment in segments:
        starts.append(at)
        at += len(segment) + len(SEPARATOR)
    for begin, end in _ruled(SEPARATOR.join(segments), []):
        first = bisect.bisect_right(starts, begin) - 1
        last = bisect.bisect_right(starts, max(begin, end - 1)) - 1
        yield from places[first : last + 1]


_URL_END: Final = re.compile(r"[\s\"'<>`?#]")
"""Where the path of a URL in text ends, as the scan's URL pattern has it."""


def _url_segments(text: str) -> Iterator[tuple[str, int, int, str]]:
    """Each path segment after each ``://`` in ``text`` (up to where a URL ends): the segment
    percent-decoded, where it sits, and the segment before it (``""`` for the first). Every
    segment the scan reads is among them, with the same segment before it."""
    at = text.find("://")
    while at >= 0:
        stop = _URL_END.search(text, at + 3)
        end = len(text) if stop is None else stop.start()
        slash = text.find("/", at + 3, end)
        if slash >= 0:
            place = slash + 1
            previous = ""
            for raw in text[slash + 1 : end].split("/"):
                if raw:
                    segment = unquote(raw) if "%" in raw else raw
                    yield segment, place, place + len(raw), previous
                    previous = segment
                place += len(raw) + 1
        at = text.find("://", at + 3)


def _keyworded(text: str, folded: str) -> Iterator[tuple[int, int]]:
    """The spans of ``text`` where a credential word is bound to a value."""
    if len(folded) != len(text):
        # A character that casefolds to more than one (ß to ss) moves the positions: the
        # pattern itself, over the whole text.
        for match in KEYWORD_VALUE.finditer(text):
            yield match.span()
        return
    for needle in KEYWORD_NEEDLES:
        at = folded.find(needle)
        while at >= 0:
            bound = KEYWORD_VALUE.match(text, at)
            if bound is not None:
                yield bound.span()
            at = folded.find(needle, at + 1)
