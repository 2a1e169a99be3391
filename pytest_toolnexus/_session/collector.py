"""The cyclic garbage collector around a cassette in use.

A loaded cassette is tens or hundreds of thousands of small containers (the decoded maps and
lists, the index that matches requests) that live exactly as long as the session. Left to the
collector, every one of them is traversed by the young collections that follow the load and
then by each full collection while the session is open: hundreds of milliseconds for a
10,000-interaction file, landing in the session's opening or in whichever request happens to
allocate at that moment. So a session opens with the collector paused (:func:`paused`), then
moves what is tracked at that point to the permanent generation (:func:`freeze`, the standard
library's ``gc.freeze``), which no collection traverses, and gives it back when it closes.

``gc.freeze`` works on everything tracked, not only the cassette: objects made before the
session opened and garbage cycles among them wait for the session's close to be collected
(reference counting still frees everything else at once). So a session freezes only what is
worth it: a load that made at least :data:`WORTH_FREEZING` containers (a cassette of a few
hundred interactions or more; a small one costs a young collection or two, less than what a
freeze holds back), only when the collector is enabled, and only when nothing is frozen yet
(another session open at the same time, or a program that froze its own start-up with
``gc.freeze``, keeps what it froze, and the session leaves the collector as it is). What was
frozen before this module was imported does not count (CPython 3.12 starts with a few hundred
of its own objects frozen); the session's close gives it back with the rest, as
``gc.unfreeze`` gives back everything.

Whether a session of this module holds the freeze is kept here, so that the usual opening, of a
small cassette, asks the collector nothing: ``gc.get_freeze_count()`` counts the frozen objects
one by one, and a session that was never closed would otherwise make every later opening pay
for the whole heap it left frozen.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable, Iterator
from typing import Final

__all__ = ["WORTH_FREEZING", "freeze", "paused"]

WORTH_FREEZING: Final = 10_000
"""The containers a load must have made for its session to freeze them."""

_lock = threading.Lock()
_holding = False  # whether a session of this module holds the freeze now
# What was frozen before the package was imported: CPython 3.12 starts with a few hundred of
# its own objects frozen, which is not a program's freeze to respect (a session would then never
# freeze there). What anything freezes after the import is respected.
_FROZEN_AT_IMPORT: Final = gc.get_freeze_count()


@contextlib.contextmanager
def paused() -> Iterator[Callable[[], bool]]:
    """The cyclic collector off for the block, and back on after it if it was on; gives what
    tells, inside the block, whether what the block made so far is worth freezing (the
    collector was on, and the block made at least :data:`WORTH_FREEZING` containers)."""
    collecting = gc.isenabled()
    gc.disable()
    made_before = gc.get_count()[0]

    def worth_freezing() -> bool:
        return collecting and gc.get_count()[0] - made_before >= WORTH_FREEZING

    try:
        yield worth_freezing
    finally:
        if collecting:
            gc.enable()


def freeze(worth_it: bool) -> Callable[[], None] | None:
    """Move everything tracked now to the permanent generation, when it is ``worth_it`` (see
    :func:`paused`) and nothing is frozen yet; returns what gives it back (``gc.unfreeze``),
    to call when the session closes (a second call does nothing), or None when nothing was
    frozen here."""
    global _holding
    if not worth_it:
        return None
    with _lock:
        if _holding or gc.get_freeze_count() > _FROZEN_AT_IMPORT:
            return None
        gc.freeze()
        _holding = True
    done = False

    def unfreeze() -> None:
        global _holding
        nonlocal done
        with _lock:
            if not done:
                done = True
                _holding = False
                gc.unfreeze()

    return unfreeze
