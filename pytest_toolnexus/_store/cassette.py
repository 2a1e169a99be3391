"""The cassette store: format version 1, in msgpack, with safe loads and atomic writes.

This module knows the file format and nothing of how interactions are recorded or replayed.
The body types it stores are in :mod:`bodies` (and importable from here too).
The format is specified in docs/cassette-format.md; keep the two in step.

Why one module of over 400 lines: about 80 of them are its imports and an ``__all__`` that
also re-exports the body types, which most of the package imports from here. The rest is the
records and the file, kept together because the loader turns whatever a record's ``from_doc``
raises into one :class:`CassetteFormatError` naming the file and the interaction. The records
(:class:`RecordedRequest` to :class:`Interaction`) are the part to move out first if this
module grows.
"""

from __future__ import annotations

import contextlib
import gc
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgpack

from pytest_toolnexus._safety.mask import masked_repr
from pytest_toolnexus._seam.errors import (
    CassetteFormatError,
    CassetteVersionError,
)
from pytest_toolnexus._seam.headers import Headers

from .bodies import (
    MAX_TIME_MS,
    AnyBody,
    Body,
    BytesBody,
    ChunksBody,
    EmptyBody,
    EventStreamBody,
    JsonBody,
    MalformedCassette,
    NdjsonBody,
    SseBody,
    StreamBody,
    TextBody,
    body_from_doc,
    brief,
    checked_str,
    checked_time,
    checked_url,
    frame_doc,
    frame_of,
    rounded_ms,
    sse_event_doc,
    sse_event_of,
)
from .read import read_cassette_bytes
from .sniff import looks_like

# The body types and their codec are re-exported: most of the package imports them from here.
__all__ = [
    "FORMAT",
    "MAX_EPOCH",
    "MAX_TIME_MS",
    "VERSION",
    "AnyBody",
    "Body",
    "BytesBody",
    "Cassette",
    "ChunksBody",
    "EmptyBody",
    "EventStreamBody",
    "Interaction",
    "JsonBody",
    "MalformedCassette",
    "NdjsonBody",
    "RecordedError",
    "RecordedRequest",
    "RecordedResponse",
    "SseBody",
    "StreamBody",
    "TextBody",
    "body_from_doc",
    "brief",
    "damage_reason",
    "frame_doc",
    "frame_of",
    "load_cassette",
    "meta_problem",
    "sse_event_doc",
    "sse_event_of",
    "write_atomic",
]

FORMAT: Final = "pytest-toolnexus-cassette"
VERSION: Final = 1


# The latest recording start ``meta.clock_epoch`` may give, in Unix seconds (the year 5138):
# virtual replay starts its wall clock there, and dates past the year 9999 cannot be made.
MAX_EPOCH: Final = 1e11


# ---------------------------------------------------------------------------------------------
# Interactions


@masked_repr
@dataclass(frozen=True, slots=True)
class RecordedError:
    """A transport failure: its kind (a :class:`TransportError` name), message and time."""

    kind: str
    message: str
    t: float

    def to_doc(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "t": rounded_ms(self.t)}

    @classmethod
    def from_doc(cls, doc: object) -> RecordedError:
        if not isinstance(doc, Mapping):
            raise MalformedCassette("an error must be a map")
        t = doc.get("t", 0.0)
        return cls(
            checked_str(doc.get("kind"), "an error kind"),
            checked_str(doc.get("message", ""), "an error message"),
            checked_time({"t": t}, 0.0),
        )


@masked_repr
@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request as recorded: the body parsed, the headers after redaction."""

    method: str
    url: str
    headers: Headers = field(default_factory=Headers)
    body: Body = field(default_factory=EmptyBody)

    def to_doc(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "url": self.url,
            "headers": [list(pair) for pair in self.headers.multi_items()],
            "body": self.body.to_doc(),
        }

    @classmethod
    def from_doc(cls, doc: object) -> RecordedRequest:
        if not isinstance(doc, Mapping):
            raise MalformedCassette("a request must be a map")
        return cls(
            method=checked_str(doc.get("method"), "a request method"),
            url=checked_url(doc.get("url")),
            headers=_headers_from(doc.get("headers", [])),
            body=body_from_doc(doc.get("body", {"kind": "empty"}), timed=False),
        )


@masked_repr
@dataclass(frozen=True, slots=True)
class RecordedResponse:
    """A response as recorded, with its timing in ms from the moment the request was sent.

    ``t_headers`` is when the status and headers arrived, ``t_end`` when the body ended (or was
    abandoned). ``error`` is a transport failure that cut the body short. ``complete`` is false
    when the client closed or cancelled the stream before its end, so the rest was never seen.
    """

    status: int
    headers: Headers = field(default_factory=Headers)
    body: Body = field(default_factory=EmptyBody)
    t_headers: float = 0.0
    t_end: float = 0.0
    error: RecordedError | None = None
    complete: bool = True

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "status": self.status,
            "headers": [list(pair) for pair in self.headers.multi_items()],
            "t_headers": rounded_ms(self.t_headers),
            "t_end": rounded_ms(self.t_end),
            "body": self.body.to_doc(),
        }
        if self.error is not None:
            doc["error"] = self.error.to_doc()
        if not self.complete:
            doc["complete"] = False
        return doc

    @classmethod
    def from_doc(cls, doc: object) -> RecordedResponse:
        if not isinstance(doc, Mapping):
            raise MalformedCassette("a response must be a map")
        status = doc.get("status")
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            raise MalformedCassette(f"a response status must be 100-599, found {brief(status)}")
        complete = doc.get("complete", True)
        if not isinstance(complete, bool):
            raise MalformedCassette("a response's 'complete' must be a boolean")
        error = doc.get("error")
        return cls(
            status=status,
            headers=_headers_from(doc.get("headers", [])),
            body=body_from_doc(doc.get("body", {"kind": "empty"}), timed=True),
            t_headers=checked_time({"t": doc.get("t_headers", 0.0)}, 0.0),
            t_end=checked_time({"t": doc.get("t_end", 0.0)}, 0.0),
            error=None if error is None else RecordedError.from_doc(error),
            complete=complete,
        )


_LIST_TYPE: Final = frozenset({list})


def _headers_from(doc: object) -> Headers:
    if not isinstance(doc, list):
        raise MalformedCassette("headers must be a list of [name, value] pairs")
    # Checked in C where possible: this runs twice for every interaction loaded.
    try:
        if not set(map(type, doc)) <= _LIST_TYPE:
            raise TypeError
        pairs = [(name, value) for name, value in doc]
        "".join([name for name, _ in pairs])
        "".join([value for _, value in pairs])
    except (TypeError, ValueError):
        raise MalformedCassette("each header must be a [name, value] pair of strings") from None
    return Headers.from_checked_pairs(pairs)


@masked_repr
@dataclass(frozen=True, slots=True)
class Interaction:
    """One request and what came of it: a response, or a transport error before any response."""

    request: RecordedRequest
    response: RecordedResponse | None = None
    error: RecordedError | None = None

    def __post_init__(self) -> None:
        if (self.response is None) == (self.error is None):
            raise ValueError("an Interaction has exactly one of response= and error=")

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"request": self.request.to_doc()}
        if self.response is not None:
            doc["response"] = self.response.to_doc()
        if self.error is not None:
            doc["error"] = self.error.to_doc()
        return doc

    @classmethod
    def from_doc(cls, doc: object) -> Interaction:
        if not isinstance(doc, Mapping):
            raise MalformedCassette("an interaction must be a map")
        response = doc.get("response")
        error = doc.get("error")
        if (response is None) == (error is None):
            raise MalformedCassette("an interaction needs exactly one of 'response' and 'error'")
        return cls(
            request=RecordedRequest.from_doc(doc.get("request")),
            response=None if response is None else RecordedResponse.from_doc(response),
            error=None if error is None else RecordedError.from_doc(error),
        )


# The slots behind Interaction's three fields, which a loaded interaction fills on first read.
_SLOTS: Final = {name: Interaction.__dict__[name] for name in ("request", "response", "error")}
_DAMAGE: Final = (MalformedCassette, ValueError, TypeError, RecursionError)


def _part(name: str) -> property:
    slot = _SLOTS[name]

    def read(self: LoadedInteraction) -> Any:
        try:
            return slot.__get__(self, Interaction)
        except AttributeError:  # not decoded yet
            value = self._decode(name)
            slot.__set__(self, value)
            return value

    def write(self: LoadedInteraction, value: Any) -> None:
        # Only Interaction's own __init__ writes (through dataclasses.replace, say): the
        # instance stays frozen to everyone else, as Interaction's __setattr__ sees to.
        slot.__set__(self, value)

    return property(read, write, doc=f"The interaction's {name}, decoded on first read.")


@masked_repr
class LoadedInteraction(Interaction):
    """An :class:`Interaction` read from a file, whose request, response and error are decoded
    from the stored document when first read, not when the file is loaded.

    A session reads every request when it opens (to match them) and only the responses it
    plays, so a test that plays five answers of a thousand decodes five responses. A part
    whose shape is wrong raises :class:`CassetteFormatError` naming the file and the
    interaction when it is first read; ``load_cassette(path, validate=True)`` reads them all.
    It compares, hashes, prints and pickles as the plain :class:`Interaction` it stands for.
    """

    __slots__ = ("_source",)

    _source: tuple[dict[str, Any], str, int]  # the stored map, the file, the position

    request = _part("request")
    response = _part("response")
    error = _part("error")

    @classmethod
    def _of(cls, doc: dict[str, Any], where: str, position: int) -> LoadedInteraction:
        made = object.__new__(cls)
        _SOURCE.__set__(made, (doc, where, position))  # one slot: loading makes thousands
        return made

    def _decode(self, name: str) -> Any:
        try:
            doc, where, position = self._source
        except AttributeError:  # made by __init__, which sets all three parts
            raise AttributeError(name) from None
        raw = doc.get(name)
        try:
            if name == "request":
                return RecordedRequest.from_doc(raw)
            if raw is None:
                return None
            if name == "response":
                return RecordedResponse.from_doc(raw)
            return RecordedError.from_doc(raw)
        except _DAMAGE as exc:
            raise CassetteFormatError(
                f"cassette {where} is corrupt at interaction {position}: "
                f"{damage_reason(exc)}; restore the file from version control, or record it "
                "again with record mode 'all'",
                path=where,
            ) from exc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Interaction):
            return NotImplemented
        return (self.request, self.response, self.error) == (
            other.request,
            other.response,
            other.error,
        )

    __hash__ = Interaction.__hash__

    def __repr__(self) -> str:
        return (
            f"Interaction(request={self.request!r}, response={self.response!r}, "
            f"error={self.error!r})"
        )

    def __reduce__(self) -> tuple[type[Interaction], tuple[Any, ...]]:
        return (Interaction, (self.request, self.response, self.error))


_SOURCE: Final = LoadedInteraction.__dict__["_source"]


# ---------------------------------------------------------------------------------------------
# Files


def _reject_ext(code: int, data: bytes) -> Any:
    raise MalformedCassette(f"msgpack extension type {code} is not part of the cassette format")


@masked_repr
@dataclass(slots=True)
class Cassette:
    """An ordered list of interactions plus metadata, tied to a file path."""

    path: Path
    interactions: list[Interaction] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        """This cassette encoded as it is, neither redacted nor scanned (:meth:`save` does
        both before it writes). The same cassette always encodes to the same bytes."""
        doc = {
            "format": FORMAT,
            "version": VERSION,
            "meta": self.meta,
            "interactions": [i.to_doc() for i in self.interactions],
        }
        try:
            packed: bytes = msgpack.packb(doc, use_bin_type=True, datetime=False)
        except (TypeError, ValueError, OverflowError) as exc:
            raise CassetteFormatError(
                f"cannot write cassette {self.path}: {exc}", path=str(self.path)
            ) from exc
        return packed

    def validate(self) -> None:
        """Check every part that loading leaves for later: each interaction's request, response
        and error, and the events, lines and chunks of its streams.

        Raises :class:`CassetteFormatError` naming the file and the interaction.
        """
        self.decode()
        for index, interaction in enumerate(self.interactions):
            response = interaction.response
            if response is None:
                continue
            body = response.body
            try:
                if isinstance(body, SseBody | NdjsonBody | ChunksBody | EventStreamBody):
                    for _ in body.pieces():
                        pass
            except (MalformedCassette, TypeError, ValueError, RecursionError) as exc:
                raise CassetteFormatError(
                    f"cassette {self.path} is corrupt at interaction {index}: {damage_reason(exc)}",
                    path=str(self.path),
                ) from exc

    def decode(self) -> None:
        """Decode every interaction's request, response and error now, as loading once did
        (it leaves them until first read). Raises :class:`CassetteFormatError` naming the file
        and the first damaged interaction. Stream events are left for :meth:`validate`."""
        for interaction in self.interactions:
            # Reading a part decodes a loaded interaction's, raising on damage.
            interaction.request  # noqa: B018
            interaction.response  # noqa: B018
            interaction.error  # noqa: B018

    def save(self, *, allow_secrets: Iterable[str] = (), unsafe_verbatim: bool = False) -> None:
        """Redact, scan for secrets, then write atomically (a temp file beside the target,
        fsync, then ``os.replace``).

        Credential headers and query values become ``REDACTED`` and account-identifier keys are
        masked in what is written (this object is left as it is). A string that still looks
        like a secret raises :class:`SecretFoundError` naming where it sits, and nothing is
        written; ``allow_secrets`` lists exact values that are known fakes.
        ``unsafe_verbatim=True`` writes the interactions exactly as they are, neither redacted
        nor scanned: for a fixture that must hold a secret on purpose, never for a recording.
        """
        if unsafe_verbatim:
            data = self.to_bytes()
        else:
            # Imported here: the gate imports Cassette from this module.
            from pytest_toolnexus._safety.gate import safe_bytes

            data = safe_bytes(self, allow_secrets=allow_secrets)
        write_atomic(self.path, data)

    @classmethod
    def from_bytes(cls, data: bytes, path: Path) -> Cassette:
        where = str(path)
        if not data:
            raise CassetteFormatError(
                f"cassette {where} is empty (0 bytes); delete it and record again",
                path=where,
            )
        collecting = gc.isenabled()
        # A long stream unpacks into hundreds of thousands of containers; pausing the cyclic
        # collector while they are built halves the load time (msgpack's own advice).
        gc.disable()
        try:
            return cls._from_bytes(data, path, where)
        finally:
            if collecting:
                gc.enable()

    @classmethod
    def _from_bytes(cls, data: bytes, path: Path, where: str) -> Cassette:
        try:
            doc = msgpack.unpackb(
                data,
                raw=False,
                strict_map_key=True,
                ext_hook=_reject_ext,
                use_list=True,
                timestamp=0,
                max_ext_len=0,
            )
        except MalformedCassette as exc:
            raise CassetteFormatError(f"cassette {where} is corrupt: {exc}", path=where) from exc
        except msgpack.ExtraData as exc:
            seen = looks_like(data)
            raise CassetteFormatError(
                f"{where} is not a pytest-toolnexus cassette: {seen}"
                if seen
                else f"cassette {where} has trailing bytes after the document; it is corrupt",
                path=where,
            ) from exc
        except (ValueError, msgpack.UnpackException, TypeError, RecursionError) as exc:
            seen = looks_like(data)
            if seen:
                raise CassetteFormatError(
                    f"{where} is not a pytest-toolnexus cassette: {seen}", path=where
                ) from exc
            if "max_ext_len" in str(exc):
                raise CassetteFormatError(
                    f"cassette {where} is corrupt: it holds a msgpack extension type (such as "
                    "a timestamp), which is not part of the cassette format",
                    path=where,
                ) from exc
            raise CassetteFormatError(
                f"cassette {where} is truncated or not msgpack ({type(exc).__name__}: "
                f"{str(exc)[:120]}); restore it from version control or record it again",
                path=where,
            ) from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            seen = looks_like(data)
            if seen and not isinstance(doc, dict):
                raise CassetteFormatError(
                    f"{where} is not a pytest-toolnexus cassette: {seen}", path=where
                )
            raise CassetteFormatError(
                f"{where} is not a pytest-toolnexus cassette (no format marker "
                f"{FORMAT!r}); is it a file from another tool?",
                path=where,
            )
        version = doc.get("version")
        if isinstance(version, bool) or not isinstance(version, int):
            raise CassetteFormatError(f"cassette {where} has no valid format version", path=where)
        if version > VERSION:
            raise CassetteVersionError(
                f"cassette {where} uses format version {version}, and this pytest-toolnexus "
                f"reads version {VERSION} at most; upgrade pytest-toolnexus",
                path=where,
            )
        if version < 1:
            raise CassetteFormatError(
                f"cassette {where} has format version {version}, which never existed",
                path=where,
            )
        meta = doc.get("meta", {})
        raw = doc.get("interactions")
        if not isinstance(meta, dict) or not isinstance(raw, list):
            raise CassetteFormatError(
                f"cassette {where} is corrupt: 'meta' must be a map and 'interactions' a list",
                path=where,
            )
        epoch = meta.get("clock_epoch")
        if epoch is not None and (
            isinstance(epoch, bool)
            or not isinstance(epoch, int | float)
            or not 0 <= epoch <= MAX_EPOCH
        ):
            raise CassetteFormatError(
                f"cassette {where} is corrupt: meta 'clock_epoch' must be a Unix time in seconds "
                f"from 0 to {MAX_EPOCH:.0e}, found {brief(epoch)}",
                path=where,
            )
        # Each interaction's outline is checked now; its parts are decoded when first read.
        interactions: list[Interaction] = []
        lazy = LoadedInteraction._of
        for index, item in enumerate(raw):
            if type(item) is not dict:
                problem = "an interaction must be a map"
            elif (item.get("response") is None) == (item.get("error") is None):
                problem = "an interaction needs exactly one of 'response' and 'error'"
            else:
                interactions.append(lazy(item, where, index))
                continue
            raise CassetteFormatError(
                f"cassette {where} is corrupt at interaction {index}: {problem}", path=where
            )
        return cls(path=path, interactions=interactions, meta=meta)


def meta_problem(meta: Mapping[str, Any]) -> str | None:
    """Why ``meta`` cannot be written into a cassette (a value msgpack cannot hold, such as an
    ``object()``), or None when it can: asked before recording, not at the write."""
    try:
        msgpack.packb(dict(meta), use_bin_type=True, datetime=False)
    except (TypeError, ValueError, OverflowError) as exc:
        return str(exc)[:200]
    return None


def damage_reason(exc: BaseException) -> str:
    """What went wrong, in words: the codec's own sentence, or the error a damaged value raised."""
    if isinstance(exc, MalformedCassette):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "a value is nested deeper than Python's recursion limit"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def load_cassette(path: str | os.PathLike[str], *, validate: bool = False) -> Cassette:
    """Read and validate a cassette file.

    Raises :class:`CassetteNotFoundError` when it does not exist, :class:`CassetteVersionError`
    when it is newer than this library, and :class:`CassetteFormatError` when it is empty,
    truncated, corrupt, not a cassette, or not a regular file (a folder, a FIFO, a device,
    which are refused without being read). A broken file is never read as an empty cassette.
    Loading checks the document and each interaction's outline; an interaction's request,
    response and error are decoded when first read (a session reads every request when it
    opens, and a response when it plays it), and stream events when replayed, each raising
    :class:`CassetteFormatError` there if damaged. ``validate=True`` checks them all now.
    """
    target = path if isinstance(path, Path) else Path(path)
    # A FIFO, a device (/dev/zero) or a symlink to one is refused without reading from it.
    cassette = Cassette.from_bytes(read_cassette_bytes(target), target)
    if validate:
        cassette.validate()
    return cassette


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    # os.open with 0o666 lets the umask decide the mode, as for any file the user creates.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
