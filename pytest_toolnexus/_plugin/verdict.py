"""Whether an error reached whoever reads a report: the question both the pytest plugin and
``use_cassette`` ask of each cassette miss and each damaged part at the end, to tell one the
code under test caught and hid from one that was raised and shown."""

from __future__ import annotations

__all__ = ["shows"]


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
