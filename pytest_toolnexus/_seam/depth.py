"""How deep a JSON value nests, and the deepest one pytest-toolnexus parses, stores and replays.

A value nested deeper than :data:`MAX_DEPTH` containers is treated the same on every Python:
from the wire it is kept as the bytes or text it came as (nothing is lost, and it matches by
those bytes), and in a cassette it is damage, refused with an error that names the limit.

Asking the interpreter instead (does this raise ``RecursionError``?) gives different answers:
up to 3.11 the C code of ``json`` shares the Python recursion limit, so how deep a value may be
depends on how deep the caller's stack already is; from 3.12 C code has a limit of its own
(about 1,500 levels on 3.12.1, about 10,000 on 3.13), so the same file replayed on 3.11 and
failed on 3.12, or the other way round. The walks here use no recursion, and the limit leaves
the C encoder and decoder half of Python's default recursion limit for the caller's frames.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["MAX_DEPTH", "TOO_DEEP", "deeper_than", "may_nest_deeper"]

MAX_DEPTH: Final = 500
"""Containers (objects and arrays) nested in one JSON value, at most."""

# A tuple made once: an ``X | Y`` written in an isinstance call builds a union at every call.
_CONTAINERS: Final = (dict, list, tuple)

TOO_DEEP: Final = (
    f"a JSON value is nested deeper than {MAX_DEPTH} levels (objects and arrays one in "
    "another), more than a cassette holds"
)
"""Why a stored value that nests deeper than :data:`MAX_DEPTH` is refused."""


def deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests more than ``limit`` containers (dicts, lists, tuples) one in
    another. Walks level by level, never recursing, and stops at the first level past
    ``limit``."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = 0
    while level:
        depth += 1  # ``level`` holds the containers with ``depth - 1`` containers above them
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            below += [child for child in children if isinstance(child, _CONTAINERS)]
        level = below
    return False


def may_nest_deeper(text: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """False when the JSON ``text`` surely nests no more than ``limit`` containers: it has
    no more opening brackets than that. Counting costs far less than parsing, so a caller asks
    :func:`deeper_than` of the parsed value only when this is True."""
    if isinstance(text, bytes):
        return len(text) > limit and text.count(b"[") + text.count(b"{") > limit
    return len(text) > limit and text.count("[") + text.count("{") > limit
