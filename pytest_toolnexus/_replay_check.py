"""What a loaded interaction must satisfy before it is replayed, and the errors that mean a
stored value is damaged.

Loading checks the shape of every interaction, and leaves the values inside bodies for replay
(a long stream costs no parsing at load). A value that reached the file by damage, such as
NaN or bytes in a JSON body, a header no HTTP library can send, or a list nested past the
recursion limit, then fails in the middle of replay with an error of Python's own. The session
checks each interaction here as it is played, and turns these errors into a
:class:`CassetteFormatError` that names the file and the interaction.
"""

from __future__ import annotations

from typing import Final

from ._bodies import encode_json
from ._cassette import Interaction, JsonBody, MalformedCassette, damage_reason

__all__ = ["DAMAGE", "check_playable", "damage_reason"]

DAMAGE: Final = (TypeError, ValueError, RecursionError, OverflowError, UnicodeError)
"""What a damaged stored value raises from the standard library (``json``, ``urllib.parse``,
``datetime``, codecs) when replay encodes, parses or times it."""


def check_playable(interaction: Interaction) -> None:
    """Raise :class:`MalformedCassette` when the response of ``interaction`` cannot be handed
    to an HTTP client: a header that is not ASCII (httpx and httpx2 send header text as ASCII),
    or a JSON body that does not encode as JSON."""
    response = interaction.response
    if response is None:
        return
    for name, value in response.headers.multi_items():
        if not (name.isascii() and value.isascii()):
            raise MalformedCassette(
                f"response header {name.encode('ascii', 'backslashreplace').decode()!r} holds "
                "text that is not ASCII, which httpx cannot send as a header"
            )
    body = response.body
    if isinstance(body, JsonBody):
        try:
            encode_json(body.value)
        except DAMAGE as exc:
            raise MalformedCassette(
                f"the response's JSON body does not encode as JSON ({damage_reason(exc)})"
            ) from None
