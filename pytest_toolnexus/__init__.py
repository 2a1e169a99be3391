"""pytest-toolnexus: record and replay LLM and HTTP traffic through one Transport seam.

The public API serves two audiences (README.md, "Public API"):

- pytest users: the ``cassette`` handle (:class:`CassetteSession`, :func:`use_cassette` outside
  pytest) and what it holds, the ``assert_*`` helpers, :class:`ModelTransport`, the modules
  ``faults``, ``build`` and ``views``, and the errors and warnings a test may meet;
- seam authors: :class:`Transport`, :class:`AsyncTransport`, :class:`DualTransport`, the request
  and response types, the byte streams, :class:`Headers`, :class:`CancelToken`,
  :class:`HTTPBridge`, :class:`LiveTransport`, and the transport errors.

Every other module is private.

Names are imported on first use (PEP 562), so that loading the pytest plugin, which
imports this package, costs little until a test uses a cassette.
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ._version import __version__

if _TYPE_CHECKING:
    from ._answers.model import ModelTransport
    from ._answers.model import Turn as ModelTurn
    from ._bridges.httpx import HTTPBridge
    from ._bridges.live import LiveTransport
    from ._patching.outside import use_cassette
    from ._seam.cancel import CancelToken
    from ._seam.errors import (
        AlreadyInstalledError,
        CassetteError,
        CassetteExpiredWarning,
        CassetteFormatError,
        CassetteMissError,
        CassetteNotFoundError,
        CassetteSetAsideWarning,
        CassetteVersionError,
        CassetteWriteError,
        ConnectError,
        ConnectTimeout,
        ContractError,
        NetworkBlockedError,
        PoolTimeout,
        ReadError,
        ReadTimeout,
        RecorderWarning,
        RemoteProtocolError,
        ReplayError,
        SecretFoundError,
        SessionClosedError,
        SwallowedMissWarning,
        ToolnexusError,
        TransportCancelled,
        TransportError,
        VcrpyMissError,
        VirtualClockWarning,
        WireCheckError,
        WriteError,
        WriteTimeout,
    )
    from ._seam.headers import Headers
    from ._seam.transport import (
        AsyncByteStream,
        AsyncTransport,
        ByteStream,
        DualTransport,
        Transport,
        TransportRequest,
        TransportResponse,
    )
    from ._session.session import (
        CassetteSession,
        SentRequest,
        UnusedInteractionsWarning,
    )
    from ._store.cassette import (
        Cassette,
        Interaction,
        RecordedError,
        RecordedRequest,
        RecordedResponse,
        load_cassette,
    )
    from ._timing.expect import (
        assert_attempts,
        assert_incremental,
        assert_time_to_first_event,
        assert_waits,
    )
    from ._timing.virtual import Sleep

__all__ = [
    "AlreadyInstalledError",
    "AsyncByteStream",
    "AsyncTransport",
    "ByteStream",
    "CancelToken",
    "Cassette",
    "CassetteError",
    "CassetteExpiredWarning",
    "CassetteFormatError",
    "CassetteMissError",
    "CassetteNotFoundError",
    "CassetteSession",
    "CassetteSetAsideWarning",
    "CassetteVersionError",
    "CassetteWriteError",
    "ConnectError",
    "ConnectTimeout",
    "ContractError",
    "DualTransport",
    "HTTPBridge",
    "Headers",
    "Interaction",
    "LiveTransport",
    "ModelTransport",
    "ModelTurn",
    "NetworkBlockedError",
    "PoolTimeout",
    "ReadError",
    "ReadTimeout",
    "RecordedError",
    "RecordedRequest",
    "RecordedResponse",
    "RecorderWarning",
    "RemoteProtocolError",
    "ReplayError",
    "SecretFoundError",
    "SentRequest",
    "SessionClosedError",
    "Sleep",
    "SwallowedMissWarning",
    "ToolnexusError",
    "Transport",
    "TransportCancelled",
    "TransportError",
    "TransportRequest",
    "TransportResponse",
    "UnusedInteractionsWarning",
    "VcrpyMissError",
    "VirtualClockWarning",
    "WireCheckError",
    "WriteError",
    "WriteTimeout",
    "__version__",
    "assert_attempts",
    "assert_incremental",
    "assert_time_to_first_event",
    "assert_waits",
    "load_cassette",
    "use_cassette",
]

# Each public name and the private module it lives in, as (module, name there).
_WHERE: dict[str, tuple[str, str]] = {
    "AlreadyInstalledError": ("._seam.errors", "AlreadyInstalledError"),
    "AsyncByteStream": ("._seam.transport", "AsyncByteStream"),
    "AsyncTransport": ("._seam.transport", "AsyncTransport"),
    "ByteStream": ("._seam.transport", "ByteStream"),
    "CancelToken": ("._seam.cancel", "CancelToken"),
    "Cassette": ("._store.cassette", "Cassette"),
    "CassetteError": ("._seam.errors", "CassetteError"),
    "CassetteExpiredWarning": ("._seam.errors", "CassetteExpiredWarning"),
    "CassetteFormatError": ("._seam.errors", "CassetteFormatError"),
    "CassetteMissError": ("._seam.errors", "CassetteMissError"),
    "CassetteNotFoundError": ("._seam.errors", "CassetteNotFoundError"),
    "CassetteSession": ("._session.session", "CassetteSession"),
    "CassetteSetAsideWarning": ("._seam.errors", "CassetteSetAsideWarning"),
    "SwallowedMissWarning": ("._seam.errors", "SwallowedMissWarning"),
    "VcrpyMissError": ("._seam.errors", "VcrpyMissError"),
    "VirtualClockWarning": ("._seam.errors", "VirtualClockWarning"),
    "CassetteVersionError": ("._seam.errors", "CassetteVersionError"),
    "CassetteWriteError": ("._seam.errors", "CassetteWriteError"),
    "ConnectError": ("._seam.errors", "ConnectError"),
    "ConnectTimeout": ("._seam.errors", "ConnectTimeout"),
    "ContractError": ("._seam.errors", "ContractError"),
    "DualTransport": ("._seam.transport", "DualTransport"),
    "HTTPBridge": ("._bridges.httpx", "HTTPBridge"),
    "Headers": ("._seam.headers", "Headers"),
    "Interaction": ("._store.cassette", "Interaction"),
    "LiveTransport": ("._bridges.live", "LiveTransport"),
    "ModelTransport": ("._answers.model", "ModelTransport"),
    "ModelTurn": ("._answers.model", "Turn"),
    "NetworkBlockedError": ("._seam.errors", "NetworkBlockedError"),
    "PoolTimeout": ("._seam.errors", "PoolTimeout"),
    "ReadError": ("._seam.errors", "ReadError"),
    "ReadTimeout": ("._seam.errors", "ReadTimeout"),
    "RecordedError": ("._store.cassette", "RecordedError"),
    "RecordedRequest": ("._store.cassette", "RecordedRequest"),
    "RecordedResponse": ("._store.cassette", "RecordedResponse"),
    "RecorderWarning": ("._seam.errors", "RecorderWarning"),
    "RemoteProtocolError": ("._seam.errors", "RemoteProtocolError"),
    "ReplayError": ("._seam.errors", "ReplayError"),
    "SecretFoundError": ("._seam.errors", "SecretFoundError"),
    "SentRequest": ("._session.session", "SentRequest"),
    "SessionClosedError": ("._seam.errors", "SessionClosedError"),
    "Sleep": ("._timing.virtual", "Sleep"),
    "ToolnexusError": ("._seam.errors", "ToolnexusError"),
    "Transport": ("._seam.transport", "Transport"),
    "TransportCancelled": ("._seam.errors", "TransportCancelled"),
    "TransportError": ("._seam.errors", "TransportError"),
    "TransportRequest": ("._seam.transport", "TransportRequest"),
    "TransportResponse": ("._seam.transport", "TransportResponse"),
    "UnusedInteractionsWarning": ("._session.session", "UnusedInteractionsWarning"),
    "WireCheckError": ("._seam.errors", "WireCheckError"),
    "WriteError": ("._seam.errors", "WriteError"),
    "WriteTimeout": ("._seam.errors", "WriteTimeout"),
    "assert_attempts": ("._timing.expect", "assert_attempts"),
    "assert_incremental": ("._timing.expect", "assert_incremental"),
    "assert_time_to_first_event": ("._timing.expect", "assert_time_to_first_event"),
    "assert_waits": ("._timing.expect", "assert_waits"),
    "load_cassette": ("._store.cassette", "load_cassette"),
    "use_cassette": ("._patching.outside", "use_cassette"),
}


def __getattr__(name: str) -> _Any:
    try:
        module, attribute = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(_importlib.import_module(module, __name__), attribute)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
