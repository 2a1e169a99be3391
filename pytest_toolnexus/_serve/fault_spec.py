"""Faults asked for over the control API: JSON in, the faults of docs/faults.md out.

``{"kind": "prepend", "status": 429, "retry_after": "1"}`` is ``faults.prepend(429,
retry_after="1")``: each kind takes the keyword arguments of its function in
:mod:`pytest_toolnexus.faults`, with the same defaults and the same checks, and anything else
is refused with a sentence that names the key and what it takes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from pytest_toolnexus._session.faults import (
    ConnectTimeoutFault,
    DisconnectFault,
    ErrorEventFault,
    Fault,
    PrependFault,
    ReadTimeoutFault,
    RechunkFault,
    StallFault,
)

__all__ = ["FaultSpecError", "faults_from"]

KINDS: Final[dict[str, type[Fault]]] = {
    "prepend": PrependFault,
    "rechunk": RechunkFault,
    "stall": StallFault,
    "disconnect": DisconnectFault,
    "connect_timeout": ConnectTimeoutFault,
    "read_timeout": ReadTimeoutFault,
    "error_event": ErrorEventFault,
}

# What each function of pytest_toolnexus.faults requires that its class has a default for.
_REQUIRED: Final = {"stall": ("seconds",), "disconnect": ("after_event",)}
_NUMBERS: Final = ("seconds",)
_COUNTS: Final = ("status", "count", "size", "after_event", "nth")


class FaultSpecError(ValueError):
    """A fault asked for over the control API cannot be made; the message says why."""


def faults_from(specs: object) -> list[Fault]:
    """The faults a JSON list of ``{"kind": ..., ...}`` objects asks for."""
    if not isinstance(specs, list) or not specs:
        raise FaultSpecError('"faults" must be a non-empty list of {"kind": ...} objects')
    return [_fault(spec, i) for i, spec in enumerate(specs)]


def _fault(spec: object, position: int) -> Fault:
    where = f"fault {position}"
    if not isinstance(spec, Mapping) or not isinstance(spec.get("kind"), str):
        raise FaultSpecError(f'{where} must be an object with a "kind" ({", ".join(KINDS)})')
    kind = spec["kind"]
    cls = KINDS.get(kind)
    if cls is None:
        raise FaultSpecError(f"{where}: no fault is called {kind!r}; one of {', '.join(KINDS)}")
    arguments = {key: value for key, value in spec.items() if key != "kind"}
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(arguments) - known)
    if unknown:
        raise FaultSpecError(
            f"{where} ({kind}) takes no {', '.join(unknown)}; it takes {', '.join(sorted(known))}"
        )
    for key in _REQUIRED.get(kind, ()):
        if key not in arguments:
            raise FaultSpecError(f"{where} ({kind}) needs {key}")
    _check(where, kind, arguments)
    return cls(**arguments)


def _check(where: str, kind: str, arguments: dict[str, Any]) -> None:
    """The checks the functions of pytest_toolnexus.faults make, and the JSON types."""
    for key, value in arguments.items():
        if key in _NUMBERS and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise FaultSpecError(f"{where} ({kind}): {key} must be a number, got {value!r}")
        if key in _COUNTS and value is not None and not _whole(value):
            raise FaultSpecError(f"{where} ({kind}): {key} must be a whole number, got {value!r}")
        if key in ("url", "method") and value is not None and not isinstance(value, str):
            raise FaultSpecError(f"{where} ({kind}): {key} must be a string, got {value!r}")
    if kind == "prepend":
        status = arguments.get("status", 429)
        if not 100 <= status <= 599:
            raise FaultSpecError(f"{where}: status {status} is not an HTTP status")
        if arguments.get("nth", 1) is None:
            raise FaultSpecError(f"{where}: prepend answers the nth request; nth cannot be null")
        if arguments.get("count", 1) < 1 or arguments.get("nth", 1) < 1:
            raise FaultSpecError(f"{where}: count and nth start at 1")
        headers = arguments.get("headers")
        if headers is not None and not (
            isinstance(headers, Mapping) and all(isinstance(v, str) for v in headers.values())
        ):
            raise FaultSpecError(f"{where}: headers must be an object of strings")
    if kind == "rechunk":
        mode, size = arguments.get("mode", "lines"), arguments.get("size", 2)
        if mode not in ("bytes", "lines", "utf8", "merge"):
            raise FaultSpecError(
                f"{where}: rechunk mode {mode!r} is not bytes, lines, utf8 or merge"
            )
        if mode == "merge" and size < 2:
            raise FaultSpecError(f"{where}: merge joins size >= 2 events, got size={size}")
    if arguments.get("seconds", 0) < 0:
        raise FaultSpecError(f"{where} ({kind}): seconds cannot be negative")
    after = arguments.get("after_event")
    if after is not None and after < 0:
        raise FaultSpecError(f"{where} ({kind}): after_event counts events from 0")
    nth = arguments.get("nth")
    if nth is not None and nth < 1:
        raise FaultSpecError(f"{where} ({kind}): nth starts at 1")


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
