"""pytest-toolnexus: record and replay LLM and HTTP traffic through one Transport seam.

The public API serves two audiences (README.md, "Public API"):

- pytest users: the ``cassette`` handle (:class:`CassetteSession`, :func:`use_cassette` outside
  pytest) and what it holds (:class:`SentRequest`, :class:`WebSocketLog`), the ``assert_*``
  helpers, :class:`ModelTransport`, the modules ``faults``, ``build`` and ``views``, and the
  errors and warnings a test may meet;
- seam authors: :class:`Transport`, :class:`AsyncTransport`, :class:`DualTransport`, the request
  and response types, the byte streams, :class:`Headers`, :class:`CancelToken`,
  :class:`HTTPBridge`, :class:`LiveTransport`, and the transport errors.

Every other module is private.

Each public name is stated once, in the imports below, one per line, which type checkers read
as they stand. They are not run: names are imported on first use (PEP 562), from the module
those lines name, so that loading the pytest plugin, which imports this package, costs little
until a test uses a cassette. ``__all__`` is every name they state, and ``__version__``.
"""

import importlib as _importlib
from functools import cache as _cache
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ._version import __version__ as __version__

if _TYPE_CHECKING:
    from ._answers.model import ModelTransport as ModelTransport
    from ._answers.model import ModelTurn as ModelTurn
    from ._bridges.httpx import HTTPBridge as HTTPBridge
    from ._bridges.live import LiveTransport as LiveTransport
    from ._patching.outside import use_cassette as use_cassette
    from ._realtime.log import WebSocketFrame as WebSocketFrame
    from ._realtime.log import WebSocketLog as WebSocketLog
    from ._seam.cancel import CancelToken as CancelToken
    from ._seam.errors import AlreadyInstalledError as AlreadyInstalledError
    from ._seam.errors import CassetteError as CassetteError
    from ._seam.errors import CassetteExpiredWarning as CassetteExpiredWarning
    from ._seam.errors import CassetteFormatError as CassetteFormatError
    from ._seam.errors import CassetteMissError as CassetteMissError
    from ._seam.errors import CassetteNotFoundError as CassetteNotFoundError
    from ._seam.errors import CassetteSetAsideWarning as CassetteSetAsideWarning
    from ._seam.errors import CassetteSymlinkWarning as CassetteSymlinkWarning
    from ._seam.errors import CassetteVersionError as CassetteVersionError
    from ._seam.errors import CassetteWriteError as CassetteWriteError
    from ._seam.errors import ConnectError as ConnectError
    from ._seam.errors import ConnectTimeout as ConnectTimeout
    from ._seam.errors import ContractError as ContractError
    from ._seam.errors import NetworkBlockedError as NetworkBlockedError
    from ._seam.errors import PoolTimeout as PoolTimeout
    from ._seam.errors import ReadError as ReadError
    from ._seam.errors import ReadTimeout as ReadTimeout
    from ._seam.errors import RecorderWarning as RecorderWarning
    from ._seam.errors import RemoteProtocolError as RemoteProtocolError
    from ._seam.errors import ReplayError as ReplayError
    from ._seam.errors import SecretFoundError as SecretFoundError
    from ._seam.errors import SessionClosedError as SessionClosedError
    from ._seam.errors import SwallowedMissWarning as SwallowedMissWarning
    from ._seam.errors import ToolnexusError as ToolnexusError
    from ._seam.errors import TransportCancelled as TransportCancelled
    from ._seam.errors import TransportError as TransportError
    from ._seam.errors import VcrpyMissError as VcrpyMissError
    from ._seam.errors import VirtualClockWarning as VirtualClockWarning
    from ._seam.errors import WireCheckError as WireCheckError
    from ._seam.errors import WriteError as WriteError
    from ._seam.errors import WriteTimeout as WriteTimeout
    from ._seam.headers import Headers as Headers
    from ._seam.transport import AsyncByteStream as AsyncByteStream
    from ._seam.transport import AsyncTransport as AsyncTransport
    from ._seam.transport import ByteStream as ByteStream
    from ._seam.transport import DualTransport as DualTransport
    from ._seam.transport import Transport as Transport
    from ._seam.transport import TransportRequest as TransportRequest
    from ._seam.transport import TransportResponse as TransportResponse
    from ._session.session import CassetteSession as CassetteSession
    from ._session.session import SentRequest as SentRequest
    from ._session.session import UnusedInteractionsWarning as UnusedInteractionsWarning
    from ._store.cassette import Cassette as Cassette
    from ._store.cassette import load_cassette as load_cassette
    from ._store.records import Interaction as Interaction
    from ._store.records import RecordedError as RecordedError
    from ._store.records import RecordedRequest as RecordedRequest
    from ._store.records import RecordedResponse as RecordedResponse
    from ._timing.expect import assert_attempts as assert_attempts
    from ._timing.expect import assert_incremental as assert_incremental
    from ._timing.expect import assert_time_to_first_event as assert_time_to_first_event
    from ._timing.expect import assert_waits as assert_waits
    from ._timing.virtual import Sleep as Sleep


@_cache
def _where() -> dict[str, tuple[str, str]]:
    """Each public name and the private module it lives in, as (module, name there): read
    from the imports above, the one place they are stated."""
    import ast
    import linecache

    # The file, or what the module's loader says it holds (from a zip, say).
    source = "".join(linecache.getlines(__file__, globals()))
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "_TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom)
                module = "." * statement.level + (statement.module or "")
                for alias in statement.names:
                    found[alias.asname or alias.name] = (module, alias.name)
    if not found:
        raise ImportError(f"{__name__} is installed without the source of {__file__}: reinstall")
    return found


def _order(name: str) -> tuple[int, str]:
    """``__all__``'s order (ruff's RUF022): CONSTANTS, then Classes, then everything else."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2), name


def __getattr__(name: str) -> _Any:
    if name == "__all__":
        return sorted([*_where(), "__version__"], key=_order)
    try:
        module, attribute = _where()[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(_importlib.import_module(module, __name__), attribute)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_where()))
