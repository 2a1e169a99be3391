"""Whether an error reached whoever reads a report: the question both the pytest plugin and
``use_cassette`` ask of each cassette miss and each damaged part at the end, to tell one the
code under test caught and hid from one that was raised and shown."""

from __future__ import annotations

import inspect
import unittest
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

__all__ = ["caught_by_the_test", "missed_request", "shows", "unshown"]


def shows(raised: list[BaseException], error: BaseException) -> bool:
    """Whether a report of the errors ``raised`` shows ``error``: it is one of them, or one
    pytest prints with them: in a chain of causes and contexts (a context only where it was
    not suppressed, ``raise ... from None``), or in an exception group."""
    pending = list(raised)
    seen: set[int] = set()
    while pending:
        shown = pending.pop()
        if id(shown) in seen:
            continue
        seen.add(id(shown))
        if shown is error:
            return True
        if isinstance(shown, BaseExceptionGroup):
            pending.extend(shown.exceptions)
        if shown.__cause__ is not None:
            pending.append(shown.__cause__)
        elif shown.__context__ is not None and not shown.__suppress_context__:
            pending.append(shown.__context__)
    return False


def unshown(
    errors: list[BaseException], raised: list[BaseException], item: pytest.Item
) -> list[BaseException]:
    """The ``errors`` nobody saw: neither shown in the report of the errors ``raised`` nor
    caught by the test itself (which expected them)."""
    return [e for e in errors if not shows(raised, e) and not caught_by_the_test(e, item)]


def caught_by_the_test(error: BaseException, item: pytest.Item) -> bool:
    """Whether the test function itself caught ``error``: with ``pytest.raises``, or a ``try``
    of its own. The first frame of an exception's traceback is the one it was caught in; a
    test that catches what it sent for expects it, where code under test that does hides it."""
    function = getattr(item, "function", None)
    function = getattr(function, "__func__", function)  # a method of a test class
    code = getattr(inspect.unwrap(function), "__code__", None) if function is not None else None
    traceback = error.__traceback__
    if traceback is None:
        # unittest's assertRaises keeps the error without its traceback: in a TestCase, only
        # the test's own assertion does that.
        cls = getattr(item, "cls", None)
        return isinstance(cls, type) and issubclass(cls, unittest.TestCase)
    return code is not None and traceback.tb_frame.f_code is code


def missed_request(miss: BaseException) -> str:
    """The request a miss message names (its first line, after the leading words)."""
    first = str(miss).split("\n", 1)[0]
    for lead in ("No recorded interaction matches ",):
        if first.startswith(lead):
            return first[len(lead) :]
    return first
