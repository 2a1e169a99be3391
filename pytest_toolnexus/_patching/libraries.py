"""The bridges for HTTP libraries other than httpx: each installs when its library is imported.

A cassette in use calls :func:`patch_libraries`; a library not yet imported gets a watch that
installs its bridge the moment it is (:func:`.imports.when_imported`), so no library is
imported by the plugin, and a test that uses none of them pays next to nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from pytest_toolnexus._session.session import CassetteSession

from .imports import when_imported

__all__ = ["SERVED_LIBRARIES", "patch_libraries"]

Undo = Callable[[], None]


def _aiohttp(session: CassetteSession, allow_hosts: tuple[str, ...]) -> Undo:
    from .aiohttp import patch_aiohttp

    return patch_aiohttp(session, allow_hosts)


def _urllib3(session: CassetteSession, allow_hosts: tuple[str, ...]) -> Undo:
    from .urllib3 import patch_urllib3

    return patch_urllib3(session, allow_hosts)


SERVED_LIBRARIES: tuple[tuple[str, Callable[[CassetteSession, tuple[str, ...]], Undo]], ...] = (
    ("aiohttp", _aiohttp),
    ("urllib3", _urllib3),
)
"""Each library's top-level module, and what installs its bridge."""


def patch_libraries(session: CassetteSession, allow_hosts: Iterable[str] = ()) -> Undo:
    """Serve every library of :data:`SERVED_LIBRARIES` through ``session``, now or once it is
    imported; returns the undo, which takes off every bridge and watch in reverse order."""
    allowed = tuple(allow_hosts)
    undos: list[Undo] = []

    def undo() -> None:
        while undos:
            undos.pop()()

    try:
        for name, install in SERVED_LIBRARIES:
            undos.append(when_imported(name, functools.partial(install, session, allowed)))
    except BaseException:
        undo()
        raise
    return undo
