"""The error vocabulary of the seam: one base class, and a type per kind of failure.

Transport failures are values with a kind, not httpx exceptions, so a client written against the
seam never imports httpx. The http bridge turns each one back into the matching httpx or httpx2
exception for SDK code.
"""

from __future__ import annotations

__all__ = [
    "AlreadyInstalledError",
    "CassetteError",
    "CassetteExpiredWarning",
    "CassetteFormatError",
    "CassetteMissError",
    "CassetteNotFoundError",
    "CassetteSetAsideWarning",
    "CassetteSymlinkWarning",
    "CassetteVersionError",
    "CassetteWriteError",
    "ConnectError",
    "ConnectTimeout",
    "ContractError",
    "NetworkBlockedError",
    "PoolTimeout",
    "ReadError",
    "ReadTimeout",
    "RecorderWarning",
    "RemoteProtocolError",
    "ReplayError",
    "SecretFoundError",
    "SessionClosedError",
    "SwallowedMissWarning",
    "ToolnexusError",
    "TransportCancelled",
    "TransportError",
    "VcrpyMissError",
    "VirtualClockWarning",
    "WireCheckError",
    "WriteError",
    "WriteTimeout",
]


class ToolnexusError(Exception):
    """Base class of every error pytest-toolnexus raises on purpose."""


class ContractError(ToolnexusError):
    """A Transport broke a rule of the seam (see docs/transport.md)."""


class TransportError(ToolnexusError):
    """The request could not be completed: no status, or a body cut short.

    ``kind`` names the failure in the cassette format and maps onto the httpx exception of
    the same name.
    """

    kind = "TransportError"


class ConnectError(TransportError):
    """The connection could not be opened (refused, reset, or a failed name lookup)."""

    kind = "ConnectError"


class ConnectTimeout(TransportError):
    """Opening the connection took longer than the timeout."""

    kind = "ConnectTimeout"


class ReadTimeout(TransportError):
    """No bytes arrived from the server within the timeout."""

    kind = "ReadTimeout"


class WriteTimeout(TransportError):
    """The request could not be sent within the timeout."""

    kind = "WriteTimeout"


class PoolTimeout(TransportError):
    """No connection became free within the timeout."""

    kind = "PoolTimeout"


class ReadError(TransportError):
    """Reading from the connection failed (for example a reset mid-body)."""

    kind = "ReadError"


class WriteError(TransportError):
    """Sending the request failed."""

    kind = "WriteError"


class RemoteProtocolError(TransportError):
    """The peer broke HTTP, for example by closing the connection halfway through a body."""

    kind = "RemoteProtocolError"


class TransportCancelled(TransportError):
    """The request's cancellation token fired; the transport stopped and released the connection."""

    kind = "TransportCancelled"


ERROR_KINDS: dict[str, type[TransportError]] = {
    cls.kind: cls
    for cls in (
        TransportError,
        ConnectError,
        ConnectTimeout,
        ReadTimeout,
        WriteTimeout,
        PoolTimeout,
        ReadError,
        WriteError,
        RemoteProtocolError,
        TransportCancelled,
    )
}


class CassetteError(ToolnexusError):
    """A cassette file could not be used. ``path`` names the file."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class CassetteNotFoundError(CassetteError):
    """Replay needed a cassette file that does not exist."""


class CassetteFormatError(CassetteError):
    """The file is truncated, corrupt, or not a pytest-toolnexus cassette."""


class CassetteVersionError(CassetteError):
    """The cassette was written by a newer format version than this library reads."""


class CassetteWriteError(CassetteError):
    """A recording could not be written to its cassette (a full disk, a read-only folder, a
    path through a file, an unexpected failure such as ``MemoryError``). ``rescued`` names the
    file in the temp folder the recording was saved to instead, or is None when nothing could
    be saved (or nothing was recorded yet)."""

    def __init__(self, message: str, *, path: str, rescued: str | None = None) -> None:
        super().__init__(message, path=path)
        self.rescued = rescued


class CassetteSetAsideWarning(UserWarning):
    """A file was kept beside a cassette, under the name the message gives: record mode
    ``all`` replaced an unreadable cassette and kept the old file, or a recording the run
    stopped in (Ctrl-C) was kept there instead of being written over the cassette."""


class CassetteSymlinkWarning(UserWarning):
    """A cassette named inside the project leads out of it through a symlink (the cassette
    folder, a folder below it, or the file itself): the message names the link and the file
    really read, and where a recording is written. Said once per cassette per run. A shared
    cassette store is a setup of its own, so this is a warning; turn it into an error
    (``-W error::pytest_toolnexus.CassetteSymlinkWarning``) to refuse such cassettes."""


class SecretFoundError(CassetteError):
    """A secret was found in what was about to be written; nothing was written."""


class NetworkBlockedError(ToolnexusError, OSError):
    """A connection was attempted while a replay-only cassette was active."""


class WireCheckError(ToolnexusError, ValueError):
    """A request body holds a value no JSON encoder would put on the wire (NaN, Infinity, or an
    integer beyond 2**53)."""


class CassetteMissError(BaseException):
    """No recording answers a request, and the record mode forbids recording one: the cassette
    has no unplayed match for it, or the cassette file does not exist.

    Like the exception of ``pytest.fail``, it derives from :class:`BaseException`, not
    :class:`Exception`: an SDK's retry loop (openai and anthropic retry on any ``Exception``
    and then wrap it in ``APIConnectionError``) and code under test that catches ``Exception``
    let it through, so the test stops at the first miss and its report leads with the miss
    message. Catch it by name (``pytest.raises(CassetteMissError)``). ``path`` names the
    cassette file, when there is one.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class VcrpyMissError(CassetteMissError, Exception):
    """A :class:`CassetteMissError` that ``except Exception`` catches, as vcrpy's
    ``CannotOverwriteExistingCassetteException`` is: what a session matching as vcrpy did
    (``match_on="vcrpy"``, which ``migrate`` writes) raises, so that a migrated suite whose code
    swallows a best-effort request's failure passes as it did under vcrpy. The plugin reports a
    swallowed one as a :class:`SwallowedMissWarning` instead of failing the test
    (docs/misses.md). ``except CassetteMissError`` catches it too."""


class SwallowedMissWarning(UserWarning):
    """The code under test caught a cassette miss (a :class:`VcrpyMissError`) and went on, as
    best-effort code under vcrpy did: the test passes, and the request that had no recording
    is named."""


class ReplayError(ToolnexusError):
    """A recorded interaction could not be replayed as the client asked for it."""


class AlreadyInstalledError(ToolnexusError, RuntimeError):
    """A cassette could not be installed: another one is installed in this process. The
    message names both owners (cassette paths, test ids)."""


class SessionClosedError(ToolnexusError, RuntimeError):
    """A closed cassette session (or installation) was asked to start again, or to send."""


class CassetteExpiredWarning(UserWarning):
    """A cassette is older than its ``max_age``, or has no date to tell its age by."""


class RecorderWarning(UserWarning):
    """The recorder could not parse what it recorded (the body is kept as timed raw chunks);
    the client read the server's stream untouched."""


class VirtualClockWarning(UserWarning):
    """The virtual clock reaches a time function only by its name in the ``time`` module on
    this interpreter (PyPy, a free-threaded build, an unknown layout): the message names the
    functions, the reason, and what keeps reading real time."""


def expected_error(excinfo: object) -> bool:
    """Whether pytest hides the plugin's frames from a traceback: the ``__tracebackhide__`` of
    every function on a request's path (bridges, patching, session, replay, matching).

    pytest calls it with the failure's ``ExceptionInfo``. The frames go when the error is one
    the plugin raises on purpose: a :class:`CassetteMissError`, a :class:`ToolnexusError`
    (a usage or contract error, a blocked connection), or an HTTP library's exception made from
    one (a replayed timeout or a cut stream). The test's line and the message are then what
    the report shows. Any other error would be a bug of the plugin's own, so its frames stay
    where it happened. ``--full-trace`` shows every frame either way.
    """
    error = getattr(excinfo, "value", None)
    return isinstance(error, ToolnexusError | CassetteMissError) or isinstance(
        getattr(error, "__cause__", None), ToolnexusError
    )


# Tracebacks and pytest's short summary name the public spelling (pytest_toolnexus.X), the one
# users import and catch, rather than this private module.
for _name in __all__:
    globals()[_name].__module__ = "pytest_toolnexus"
del _name
