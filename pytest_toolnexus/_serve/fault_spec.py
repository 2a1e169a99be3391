"""Faults asked for over the control API: JSON in, the faults of docs/faults.md out.

``{"kind": "prepend", "status": 429, "retry_after": "1"}`` is ``faults.prepend(429,
retry_after="1")``: each kind is a function of :mod:`pytest_toolnexus.faults`, called with the
object's other keys as its keyword arguments, so its defaults and its checks (of types as well
as values) are the ones a Python test gets, and nothing here repeats them. What this module adds
is what JSON needs said: which kinds there are, a key the function does not take, one it needs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Final

from pytest_toolnexus import faults
from pytest_toolnexus._session.faults import Fault

__all__ = ["KINDS", "FaultSpecError", "faults_from"]

KINDS: Final[dict[str, Callable[..., Fault]]] = {
    "prepend": faults.prepend,
    "rechunk": faults.rechunk,
    "stall": faults.stall,
    "disconnect": faults.disconnect,
    "connect_timeout": faults.connect_timeout,
    "read_timeout": faults.read_timeout,
    "error_event": faults.error_event,
    "ws_drop": faults.ws_drop,
    "ws_close": faults.ws_close,
    "ws_stall": faults.ws_stall,
    "ws_error": faults.ws_error,
    "ws_slow_handshake": faults.ws_slow_handshake,
    "ws_refuse": faults.ws_refuse,
}


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
    make = KINDS.get(kind)
    if make is None:
        raise FaultSpecError(f"{where}: no fault is called {kind!r}; one of {', '.join(KINDS)}")
    arguments: dict[str, Any] = {key: value for key, value in spec.items() if key != "kind"}
    parameters = inspect.signature(make).parameters
    unknown = sorted(set(arguments) - set(parameters))
    if unknown:
        raise FaultSpecError(
            f"{where} ({kind}) takes no {', '.join(unknown)}; it takes "
            f"{', '.join(sorted(parameters))}"
        )
    for name, parameter in parameters.items():
        if parameter.default is inspect.Parameter.empty and name not in arguments:
            raise FaultSpecError(f"{where} ({kind}) needs {name}")
    try:
        return make(**arguments)
    except (TypeError, ValueError) as exc:
        raise FaultSpecError(f"{where} ({kind}): {exc}") from None
