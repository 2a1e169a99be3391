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
(reference counting still frees everything else at once). A session freezes only when nothing
is frozen yet (another session open at the same time, or a program that froze its own start-up
with ``gc.freeze``, keeps what it froze, and the session leaves the collector as it is), and
only when the collector is enabled.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator

__all__ = ["freeze", "paused"]


@contextlib.contextmanager
def paused() -> Iterator[bool]:
    """The cyclic collector off for the block, and back on after it if it was on; gives
    whether it was."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield collecting
    finally:
        if collecting:
            gc.enable()


def _nothing() -> None:
    return None


def freeze(collecting: bool) -> Callable[[], None]:
    """Move everything tracked now to the permanent generation, when nothing is frozen yet and
    the collector is on (``collecting``: it was, before :func:`paused`); returns what gives it
    back (``gc.unfreeze``), to call once, when the session closes (a no-op when nothing was
    frozen here)."""
    if not collecting or gc.get_freeze_count():
        return _nothing
    gc.freeze()
    done = False

    def unfreeze() -> None:
        nonlocal done
        if not done:
            done = True
            gc.unfreeze()

    return unfreeze
