"""Matching a client frame against the one the recording expects next.

A frame is compared as an HTTP body is (:class:`~pytest_toolnexus._session.body_part.BodyPart`):
JSON by value, key order and whitespace never mattering, the ``ignore_body`` paths and the
account-identifier keys left out; other text and bytes exactly. Volatile ids are ignored by
default: OpenAI's client ``event_id``, which the SDK may stamp fresh on every event. A built
frame that is a pattern (:attr:`Frame.pattern`) is compared with what the sent frame holds at
its own paths only: ``{"type": "response.create"}`` matches any ``response.create``. A frame
that does not match is a miss that names the cassette, the connection, the frame expected
(with a path diff) and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pytest_toolnexus._seam.duplex import Message
from pytest_toolnexus._seam.errors import CassetteMissError
from pytest_toolnexus._session.body_part import (
    BodyPart,
    BodyPath,
    Comparable,
    body_diff,
    masked_comparable,
)
from pytest_toolnexus._store.ws_frames import Frame

__all__ = ["VOLATILE", "FrameMatcher", "shown"]

VOLATILE: Final[tuple[BodyPath, ...]] = (("event_id",),)
"""Client frame paths never compared: OpenAI Realtime's client ``event_id``."""


def _comparable_message(part: BodyPart, message: Message | None) -> Comparable:
    if message is None:
        return "close", None
    if isinstance(message, bytes):
        return part.comparable(message)
    stripped = message.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            value: Any = json.loads(message)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict | list):
            return part.comparable(value)
    return part.comparable(message.encode("utf-8", "surrogatepass"))


def shown(message: Message | None, mask: Callable[[str], str], limit: int = 160) -> str:
    """``message`` as a miss or a warning quotes it: masked whole first, then cut to ``limit``
    characters (cut first, a key split at the cut would no longer match its pattern)."""
    if message is None:
        return "a close frame"
    text = mask(message) if isinstance(message, str) else f"{len(message)} bytes of binary"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _within(value: Any, pattern: Any) -> Any:
    """``value`` cut down to the paths ``pattern`` holds: a map's keys the pattern's map
    names (a key the value lacks stays absent, and so differs), recursively; a list of as
    many items, each cut down to its own pattern; anything else whole."""
    if isinstance(pattern, dict) and isinstance(value, dict):
        return {key: _within(value[key], sub) for key, sub in pattern.items() if key in value}
    if isinstance(pattern, list) and isinstance(value, list) and len(pattern) == len(value):
        return [_within(item, sub) for item, sub in zip(value, pattern, strict=True)]
    return value


@dataclass(frozen=True, slots=True)
class FrameMatcher:
    """Compares client frames with ``part`` (the session's body rules plus :data:`VOLATILE`);
    ``mask`` hides secrets in what a miss quotes."""

    part: BodyPart
    path: Path
    url: str
    record_mode: str
    mask: Callable[[str], str]

    def differences(self, expected: Frame, sent: Message) -> tuple[list[str], list[str]]:
        """Lines for each place where ``sent`` differs from ``expected`` (none: it matches),
        and the dotted paths ``ignore_body`` could name."""
        if expected.kind == "close":
            quoted = shown(sent, self.mask)
            return [f"the recording expects the client to close here, and it sent {quoted}"], []
        was = _comparable_message(self.part, expected.message)
        now = _comparable_message(self.part, sent)
        if expected.pattern and was[0] == now[0] == "json":
            now = "json", _within(now[1], was[1])
        if was == now:
            return [], []
        # Masked before the diff, which cuts long values: a cut key would escape the mask.
        lines, paths = body_diff(
            masked_comparable(was, self.mask), masked_comparable(now, self.mask)
        )
        return lines or ["the frames differ only inside a secret, masked here"], paths

    def miss(
        self, sent: Message, expected: Frame | None, number: int, lines: list[str], paths: list[str]
    ) -> CassetteMissError:
        """The error for client frame ``number`` (0-based) of this connection, which the
        recording does not expect."""
        head = (
            f"client frame #{number} on the WebSocket {self.url} does not match the recording "
            f"in cassette {self.path} (record mode {self.record_mode!r})\n"
            f"  sent: {shown(sent, self.mask)}\n"
        )
        if expected is None:
            body = (
                f"  the recording of this connection has no client frame #{number}: the client "
                "sent more than it did when it was recorded\n"
            )
        else:
            what = (
                f"expected a frame holding (a built pattern, at {expected.t:.1f} ms)"
                if expected.pattern
                else f"expected (recorded at {expected.t:.1f} ms)"
            )
            body = f"  {what}: {shown(expected.message, self.mask)}\n" + "".join(
                f"    {self.mask(line)}\n" for line in lines
            )
        hint = (
            f"  if these paths change on every run, ignore them: ignore_body={paths!r} on the "
            "cassette marker\n"
            if paths
            else ""
        )
        fix = (
            "  Fix the code under test, or the session's turns where the cassette is built "
            "(pytest_toolnexus.build: RealtimeTurn's asks)."
            if expected is not None and expected.pattern
            else "  Fix the code under test, or record the session again: "
            "--cassette-record=all (or record='all' on the marker)."
        )
        return CassetteMissError(head + body + hint + fix, path=str(self.path))
