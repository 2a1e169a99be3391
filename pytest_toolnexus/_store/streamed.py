"""Reading a cassette one interaction at a time, for a reader that looks at each once.

``pytest-toolnexus check`` validates, scans and reads every interaction of a file once, and
keeps nothing of it. :func:`load_cassette` holds the whole decoded document, which takes about
four times the file's size in Python objects; :func:`read_streamed` holds one interaction at a
time (and a read buffer), so checking a file takes memory in proportion to its largest
interaction, not to the file.

It reads the file twice, from one open descriptor (another writer's ``os.replace`` does not
change what it reads). The first pass decodes the document but for its interactions, which it
skips without building them, and checks what :func:`load_cassette` checks of the document: the
format marker, the version, ``meta``, that ``interactions`` is a list, and that nothing
follows the document. The second pass decodes each interaction as it is asked for, with its
outline checked as the loader checks it.

What the passes cannot read as a cassette (damage, a file from another tool, a second
``interactions`` key) is read by :func:`load_cassette` instead, so that the error is the
loader's own, naming the file; a file it reads fine is then served from what it loaded.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

import msgpack

from .cassette import FORMAT, Interaction, checked_header, interaction_at, load_cassette
from .read import open_cassette_file

__all__ = ["StreamedCassette", "read_streamed"]

_READ_SIZE: Final = 1 << 20
_KEY: Final = "interactions"


def _reject_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack extension type {code}")


def _unpacker(handle: BinaryIO, size: int) -> msgpack.Unpacker:
    # The options of the loader's msgpack.unpackb, whose limits follow the data's size.
    return msgpack.Unpacker(
        handle,
        raw=False,
        strict_map_key=True,
        ext_hook=_reject_ext,
        use_list=True,
        timestamp=0,
        max_ext_len=0,
        read_size=_READ_SIZE,
        max_buffer_size=max(size, _READ_SIZE),
    )


class _Unstreamable(Exception):
    """The file cannot be read in two passes: the loader reads it."""


@dataclass
class StreamedCassette:
    """A cassette file read one interaction at a time: its ``meta`` and the number of its
    interactions are known at once; iterating gives each interaction once, decoded when it is
    reached. Close it (or iterate to the end) to close the file."""

    path: Path
    meta: dict[str, Any]
    count: int
    _handle: BinaryIO | None
    _size: int
    _loaded: list[Interaction] = field(default_factory=list)

    def __iter__(self) -> Iterator[Interaction]:
        if self._handle is None:
            yield from self._loaded
            return
        where = str(self.path)
        index = 0
        try:
            items = self._items()
            while True:
                collecting = gc.isenabled()
                gc.disable()  # as the loader does: a long stream is many small containers
                try:
                    item = next(items, _END)
                finally:
                    if collecting:
                        gc.enable()
                if item is _END:
                    return
                yield interaction_at(item, where, index)
                index += 1
        except (_Unstreamable, ValueError, TypeError, RecursionError, msgpack.UnpackException):
            # Damage the first pass could not see (a map key or an extension type inside a
            # skipped interaction): the loader names it; if it reads the file, go on from it.
            self.close()
            yield from load_cassette(self.path).interactions[index:]
        finally:
            self.close()

    def _items(self) -> Iterator[object]:
        handle = self._handle
        assert handle is not None
        handle.seek(0)
        unpacker = _unpacker(handle, self._size)
        for _ in range(unpacker.read_map_header()):
            if unpacker.unpack() != _KEY:
                unpacker.skip()
                continue
            for _ in range(unpacker.read_array_header()):
                yield unpacker.unpack()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


_END: Final = object()


def read_streamed(path: str | os.PathLike[str]) -> StreamedCassette:
    """Open the cassette at ``path`` to read its interactions one at a time. Raises as
    :func:`load_cassette` does for a file that is missing, not a regular file, not a cassette,
    from a newer version, truncated or corrupt; damage inside an interaction is raised when
    that interaction is reached, as :class:`CassetteFormatError` naming the file."""
    target = path if isinstance(path, Path) else Path(path)
    handle = open_cassette_file(target)
    try:
        size = os.fstat(handle.fileno()).st_size
        try:
            doc, count = _outline(handle, size)
        except (_Unstreamable, ValueError, TypeError, RecursionError, msgpack.UnpackException):
            doc = None
        if doc is None:
            handle.close()
            loaded = load_cassette(target)
            return StreamedCassette(
                target, loaded.meta, len(loaded.interactions), None, size, loaded.interactions
            )
        meta = checked_header(doc, str(target))
    except BaseException:
        handle.close()
        raise
    return StreamedCassette(target, meta, count, handle, size)


def _outline(handle: BinaryIO, size: int) -> tuple[dict[str, Any], int]:
    """The document with an empty ``interactions`` list, and how many it holds: the first
    pass, which skips every interaction without building it."""
    unpacker = _unpacker(handle, size)
    doc: dict[Any, Any] = {}
    count: int | None = None
    for _ in range(unpacker.read_map_header()):
        key = unpacker.unpack()
        if key == _KEY and type(key) is str:
            if count is not None:
                raise _Unstreamable("two interactions keys")
            count = unpacker.read_array_header()
            for _ in range(count):
                unpacker.skip()
            doc[key] = []
        else:
            doc[key] = unpacker.unpack()
    if count is None or unpacker.tell() != size or doc.get("format") != FORMAT:
        raise _Unstreamable("not a cassette the passes can read")
    return doc, count
