"""pytest-toolnexus: record and replay LLM and HTTP traffic through one Transport seam.

The public API serves two audiences (README.md, "Public API"):

- pytest users: the ``cassette`` handle (:class:`CassetteSession`, :func:`use_cassette` outside
  pytest) and what it holds, the ``assert_*`` helpers, :class:`ModelTransport`, the modules
  ``faults``, ``build`` and ``views``, and the errors and warnings a test may meet;
- seam authors: :class:`Transport`, :class:`AsyncTransport`, :class:`DualTransport`, the request
  and response types, the byte streams, :class:`Headers`, :class:`CancelToken`,
  :class:`HTTPBridge`, :class:`LiveTransport`, and the transport errors.

Every other module is private.
"""

from ._answers.model import ModelTransport
from ._answers.model import Turn as ModelTurn
from ._bridges.httpx import HTTPBridge
from ._bridges.live import LiveTransport
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
    ToolnexusError,
    TransportCancelled,
    TransportError,
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
from ._session.session import CassetteSession, SentRequest, UnusedInteractionsWarning, use_cassette
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
from ._version import __version__

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
    "ToolnexusError",
    "Transport",
    "TransportCancelled",
    "TransportError",
    "TransportRequest",
    "TransportResponse",
    "UnusedInteractionsWarning",
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
