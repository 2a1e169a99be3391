"""What a loaded interaction must satisfy before it is replayed, and the errors that mean a
stored value is damaged.

Loading checks the shape of every interaction, and leaves the values inside bodies for replay
(a long stream costs no parsing at load). A value that reached the file by damage, such as
NaN or bytes in a JSON body, or a header no HTTP library can send, then fails in the middle of
replay with an error of Python's own, and one nested deeper than ``_seam.depth.MAX_DEPTH``
with :class:`MalformedCassette` (the same on every Python). The session checks each
interaction here as it is played, and turns these errors into a :class:`CassetteFormatError`
that names the file and the interaction.
"""

from __future__ import annotations

import re
from typing import Final

from pytest_toolnexus._store.cassette import Interaction, JsonBody, MalformedCassette, damage_reason

__all__ = ["DAMAGE", "check_playable", "damage_reason"]

_UNSENDABLE: Final = re.compile("[\r\n\0]")

DAMAGE: Final = (TypeError, ValueError, RecursionError, OverflowError, UnicodeError)
"""What a damaged stored value raises from the standard library (``json``, ``urllib.parse``,
``datetime``, codecs) when replay encodes, parses or times it."""


def check_playable(interaction: Interaction) -> bytes | None:
    """Raise :class:`MalformedCassette` when the response of ``interaction`` cannot be handed
    to an HTTP client: a header no wire could carry (a name that is not ASCII, CR, LF or NUL,
    text that does not encode; a value that is not ASCII is sent as the bytes it arrived as),
    or a JSON body that does not encode as JSON.

    Returns the encoded body of a JSON answer that arrived in one piece (the check had to make
    it), so that replay hands those bytes over instead of encoding the body again."""
    response = interaction.response
    if response is None:
        return None
    for name, value in response.headers.multi_items():
        if name.isascii() and value.isascii() and _UNSENDABLE.search(name + value) is None:
            continue  # the usual header: nothing more to check
        shown = name.encode("ascii", "backslashreplace").decode()
        if not name.isascii() or _UNSENDABLE.search(name + value) is not None:
            raise MalformedCassette(
                f"response header {shown!r} holds a character no header can carry (a name "
                "that is not ASCII, or CR, LF or NUL)"
            )
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise MalformedCassette(
                    f"response header {shown!r} holds text that does not encode as bytes"
                ) from None
    body = response.body
    if isinstance(body, JsonBody):
        try:
            encoded = body.content()  # MalformedCassette past the depth a cassette holds
        except DAMAGE as exc:
            raise MalformedCassette(
                f"the response's JSON body does not encode as JSON ({damage_reason(exc)})"
            ) from None
        return encoded if body.times is None else None
    return None
