"""A cassette miss that leaves an async test function, turned into a failure anyio forwards.

A :class:`~pytest_toolnexus._seam.errors.CassetteMissError` is a ``BaseException`` so that code
under test that catches ``Exception`` lets it through. anyio's pytest plugin runs a module's
async tests in one runner task, and takes a ``BaseException`` that is neither an ``Exception``
nor one of pytest's outcomes for Ctrl-C: the test fails as it should, but the runner task also
ends with the miss, and when that task is collected asyncio logs "Task exception was never
retrieved" with the miss's whole traceback. On Python 3.11 the log can run while pytest parses
a module it rewrites, and the nested parse fails the run with ``INTERNALERROR> SystemError: AST
constructor recursion depth mismatch`` (CPython gh-106905).

Past the test function no code under test is left to swallow the miss, so there it becomes an
``Exception`` as well: the same object (so the plugin's end-of-test checks still know it was
shown), of a subclass of both that reports itself under the miss's own name.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any

from pytest_toolnexus._seam.errors import CassetteMissError

__all__ = ["misses_as_failures"]


class _Failed(CassetteMissError, Exception):
    """A :class:`CassetteMissError` that has left an async test function."""


_Failed.__name__ = _Failed.__qualname__ = CassetteMissError.__name__
_Failed.__module__ = CassetteMissError.__module__


def misses_as_failures(test: Any) -> Any:
    """``test`` itself, or for an async test function (not one hypothesis wraps) one that
    awaits it and lets a cassette miss out as an ``Exception`` too."""
    if not inspect.iscoroutinefunction(test) or hasattr(test, "hypothesis"):
        return test
    run: Callable[..., Coroutine[Any, Any, Any]] = test

    @functools.wraps(run)
    async def failing(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        try:
            return await run(*args, **kwargs)
        except CassetteMissError as miss:
            if not isinstance(miss, Exception):
                miss.__class__ = _Failed
            raise

    return failing
