"""pytest-toolnexus: record and replay LLM and HTTP traffic through one Transport seam."""

from ._bridge import HTTPBridge
from ._cancel import CancelToken
from ._errors import (
    ConnectError,
    ConnectTimeout,
    ContractError,
    PoolTimeout,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    ToolnexusError,
    TransportCancelled,
    TransportError,
    WriteError,
    WriteTimeout,
)
from ._headers import Headers
from ._live import AsyncLiveTransport, LiveTransport
from ._seam import (
    PUSHED,
    AsyncByteStream,
    AsyncTransport,
    ByteStream,
    JSONValue,
    Pushed,
    Transport,
    TransportRequest,
    TransportResponse,
    acall,
    call,
    check_response,
)
from ._version import __version__

__all__ = [
    "PUSHED",
    "AsyncByteStream",
    "AsyncLiveTransport",
    "AsyncTransport",
    "ByteStream",
    "CancelToken",
    "ConnectError",
    "ConnectTimeout",
    "ContractError",
    "HTTPBridge",
    "Headers",
    "JSONValue",
    "LiveTransport",
    "PoolTimeout",
    "Pushed",
    "ReadError",
    "ReadTimeout",
    "RemoteProtocolError",
    "ToolnexusError",
    "Transport",
    "TransportCancelled",
    "TransportError",
    "TransportRequest",
    "TransportResponse",
    "WriteError",
    "WriteTimeout",
    "__version__",
    "acall",
    "call",
    "check_response",
]
