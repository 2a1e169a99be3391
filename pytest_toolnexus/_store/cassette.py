"""A cassette: its interactions and ``meta``, encoded as the format version 1 document in
msgpack and decoded from it, with safe loads.

This module knows the file format and nothing of how interactions are recorded or replayed,
nor of how a cassette is written: :meth:`Cassette.save` hands the cassette to the gate
(:mod:`pytest_toolnexus._safety.gate`), which redacts, scans and writes it atomically. The
records are in :mod:`.records` and the body types in :mod:`.bodies`; both are importable from
here too, as most of the package imports them. The format is specified in
docs/cassette-format.md; keep the two in step.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgpack

from pytest_toolnexus._safety.mask import masked_repr
from pytest_toolnexus._seam.depth import TOO_DEEP, deeper_than
from pytest_toolnexus._seam.errors import CassetteFormatError, CassetteVersionError

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
    WebSocketBody,
    body_from_doc,
    brief,
    frame_doc,
    frame_of,
    sse_event_doc,
    sse_event_of,
)
from .read import read_cassette_bytes
from .records import (
    Interaction,
    LoadedInteraction,
    RecordedError,
    RecordedRequest,
    RecordedResponse,
    corrupt_at,
    damage_reason,
)
from .sniff import looks_like
from .ws_frames import frames_of

# The records, the body types and their codec are re-exported: most of the package imports
# them from here.
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
    "WebSocketBody",
    "body_from_doc",
    "brief",
    "check_bodies",
    "checked_header",
    "damage_reason",
    "frame_doc",
    "frame_of",
    "interaction_at",
    "load_cassette",
    "meta_problem",
    "sse_event_doc",
    "sse_event_of",
]

FORMAT: Final = "pytest-toolnexus-cassette"
VERSION: Final = 1


# The latest recording start ``meta.clock_epoch`` may give, in Unix seconds (the year 5138):
# virtual replay starts its wall clock there, and dates past the year 9999 cannot be made.
MAX_EPOCH: Final = 1e11


def _reject_ext(code: int, data: bytes) -> Any:
    raise MalformedCassette(f"msgpack extension type {code} is not part of the cassette format")


@masked_repr
@dataclass(slots=True)
class Cassette:
    """An ordered list of interactions plus metadata, tied to a file path."""

    path: Path
    interactions: list[Interaction] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A str or other os.PathLike is taken too, as everywhere a path is asked for.
        self.path = Path(self.path)

    def to_bytes(self) -> bytes:
        """This cassette encoded as it is, neither redacted nor scanned (:meth:`save` does
        both before it writes). The same cassette always encodes to the same bytes."""
        parts: list[bytes] = []
        self.write_to(parts.append)
        return b"".join(parts)

    def write_to(self, write: Callable[[bytes], object]) -> None:
        """Give ``write`` (a file's ``write``) the bytes of :meth:`to_bytes`, one interaction
        at a time, so that writing a large cassette never holds its whole encoding: the
        document's map is written as msgpack writes a map, its ``interactions`` array as an
        array header and then each interaction's map."""
        packer = msgpack.Packer(use_bin_type=True, datetime=False)
        try:
            write(packer.pack_map_header(4))
            for key, value in (("format", FORMAT), ("version", VERSION), ("meta", self.meta)):
                write(packer.pack(key))
                write(packer.pack(value))
            write(packer.pack("interactions"))
            write(packer.pack_array_header(len(self.interactions)))
            for interaction in self.interactions:
                write(packer.pack(interaction.to_doc()))
        except (TypeError, ValueError, OverflowError) as exc:
            raise CassetteFormatError(
                f"cannot write cassette {self.path}: {exc}", path=str(self.path)
            ) from exc

    def validate(self) -> None:
        """Check every part that loading leaves for later: each interaction's request, response
        and error, the events, lines and chunks of its streams, and that no JSON body nests
        deeper than a cassette holds (``_seam.depth.MAX_DEPTH``), as replay would find.

        Raises :class:`CassetteFormatError` naming the file and the interaction.
        """
        self.decode()
        for index, interaction in enumerate(self.interactions):
            check_bodies(interaction, self.path, index)

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
        # Imported when saving: the secret scan's rules are compiled when it is imported, and
        # reading a cassette (show, diff, a replay) needs none of it.
        from pytest_toolnexus._safety.gate import save

        save(self, allow_secrets=allow_secrets, unsafe_verbatim=unsafe_verbatim)

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
        meta = checked_header(doc, where)
        # Each interaction's outline is checked now; its parts are decoded when first read.
        interactions: list[Interaction] = [
            interaction_at(item, where, index) for index, item in enumerate(doc["interactions"])
        ]
        return cls(path=path, interactions=interactions, meta=meta)


def checked_header(doc: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The ``meta`` of a decoded document that holds the format marker, once its version,
    ``meta``, ``interactions`` (a list) and ``meta.clock_epoch`` are checked. Raises
    :class:`CassetteVersionError` or :class:`CassetteFormatError` naming ``where``."""
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
        isinstance(epoch, bool) or not isinstance(epoch, int | float) or not 0 <= epoch <= MAX_EPOCH
    ):
        raise CassetteFormatError(
            f"cassette {where} is corrupt: meta 'clock_epoch' must be a Unix time in seconds "
            f"from 0 to {MAX_EPOCH:.0e}, found {brief(epoch)}",
            path=where,
        )
    return meta


def interaction_at(item: object, where: str, index: int) -> Interaction:
    """The interaction stored as ``item`` at position ``index`` of the file ``where``, its
    outline checked (a map, with exactly one of a response and an error) and its parts left
    to decode when first read. Raises :class:`CassetteFormatError` naming both."""
    if type(item) is not dict:
        problem = "an interaction must be a map"
    elif (item.get("response") is None) == (item.get("error") is None):
        problem = "an interaction needs exactly one of 'response' and 'error'"
    else:
        return LoadedInteraction.stored(item, where, index)
    raise corrupt_at(where, index, problem)


def check_bodies(interaction: Interaction, where: str | os.PathLike[str], index: int) -> None:
    """Check what decoding an interaction's parts leaves for later: the events, lines,
    chunks or frames of its streams, and that no JSON body nests deeper than a cassette holds
    (``_seam.depth.MAX_DEPTH``), as replay would find. Raises :class:`CassetteFormatError`
    naming the file ``where`` and the interaction's position ``index``."""
    response = interaction.response
    bodies = (interaction.request.body, None if response is None else response.body)
    try:
        for body in bodies:
            if isinstance(body, JsonBody) and deeper_than(body.value):
                raise MalformedCassette(TOO_DEEP)
            if isinstance(body, SseBody | NdjsonBody | ChunksBody | EventStreamBody):
                for _ in body.pieces():
                    pass
            if isinstance(body, WebSocketBody):
                for frame in frames_of(body.frames):
                    if frame.value is not None and deeper_than(frame.value):
                        raise MalformedCassette(TOO_DEEP)
    except (MalformedCassette, TypeError, ValueError, RecursionError) as exc:
        raise corrupt_at(where, index, damage_reason(exc)) from exc


def meta_problem(meta: Mapping[str, Any]) -> str | None:
    """Why ``meta`` cannot be written into a cassette (a value msgpack cannot hold, such as an
    ``object()``), or None when it can: asked before recording, not at the write."""
    try:
        msgpack.packb(dict(meta), use_bin_type=True, datetime=False)
    except (TypeError, ValueError, OverflowError) as exc:
        return str(exc)[:200]
    return None


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
