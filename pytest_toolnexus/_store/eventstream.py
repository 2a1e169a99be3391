"""The AWS event stream codec (``application/vnd.amazon.eventstream``): frames in and out.

A frame (a "message" in AWS's words) is::

    total length   uint32, big-endian: the whole frame, these 4 bytes and the CRCs included
    headers length uint32: the bytes of the headers section
    prelude CRC    uint32: CRC32 of the 8 bytes above
    headers        name length (uint8), name (UTF-8), type (uint8), value; repeated
    payload        total length - headers length - 16 bytes
    message CRC    uint32: CRC32 of everything before it

A header's value is encoded by its type: 0 true and 1 false (no bytes), 2 byte, 3 short,
4 integer, 5 long (signed, big-endian, 1, 2, 4 and 8 bytes), 6 bytes and 7 string (a uint16
length, then the bytes), 8 timestamp (int64 ms since the epoch), 9 uuid (16 bytes).

:func:`decode` checks both CRCs and every length, so ``encode(decode(data)) == data`` for every
valid frame, and :class:`FrameSplitter` cuts frames out of chunks as they arrive.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

__all__ = [
    "HEADER_TYPES",
    "EventStreamError",
    "Frame",
    "FrameSplitter",
    "Header",
    "HeaderType",
    "HeaderValue",
    "decode",
    "encode",
]

HeaderType: TypeAlias = Literal[
    "bool", "byte", "short", "int", "long", "bytes", "string", "timestamp", "uuid"
]
HeaderValue: TypeAlias = bool | int | bytes | str

HEADER_TYPES: Final[tuple[HeaderType, ...]] = (
    "bool",
    "byte",
    "short",
    "int",
    "long",
    "bytes",
    "string",
    "timestamp",
    "uuid",
)
"""Every header type, by the name a cassette stores it under."""

_PRELUDE: Final = struct.Struct(">III")
_CRC: Final = struct.Struct(">I")
_MINIMUM: Final = _PRELUDE.size + _CRC.size
_INTEGERS: Final[dict[HeaderType, tuple[int, struct.Struct]]] = {
    "byte": (2, struct.Struct(">b")),
    "short": (3, struct.Struct(">h")),
    "int": (4, struct.Struct(">i")),
    "long": (5, struct.Struct(">q")),
    "timestamp": (8, struct.Struct(">q")),
}
_INTEGER_OF_CODE: Final = {code: (name, packer) for name, (code, packer) in _INTEGERS.items()}
_LENGTH: Final = struct.Struct(">H")


class EventStreamError(ValueError):
    """A frame that cannot be decoded (a bad CRC or length) or encoded (a value out of range)."""


@dataclass(frozen=True, slots=True)
class Header:
    """One frame header: its name, type and value (``bool`` for ``bool``, ``int`` for the
    integer types and ``timestamp``, ``bytes`` for ``bytes`` and ``uuid``, ``str`` for
    ``string``)."""

    name: str
    type: HeaderType
    value: HeaderValue


@dataclass(frozen=True, slots=True)
class Frame:
    """One event stream frame: its headers, in wire order, and its payload."""

    headers: tuple[Header, ...]
    payload: bytes

    def header(self, name: str) -> HeaderValue | None:
        """The value of the first header called ``name``, or None."""
        return next((h.value for h in self.headers if h.name == name), None)


def _encode_header(header: Header) -> bytes:
    name = header.name.encode("utf-8")
    if not 0 < len(name) < 256:
        raise EventStreamError(f"header name {header.name!r} must be 1 to 255 bytes of UTF-8")
    kind, value = header.type, header.value
    head = bytes([len(name)]) + name
    if kind == "bool":
        if not isinstance(value, bool):
            raise EventStreamError(f"header {header.name!r} is a bool, not {value!r}")
        return head + (b"\x00" if value else b"\x01")
    if kind in _INTEGERS:
        code, packer = _INTEGERS[kind]
        if isinstance(value, bool) or not isinstance(value, int):
            raise EventStreamError(f"header {header.name!r} is an integer ({kind}), not {value!r}")
        try:
            return head + bytes([code]) + packer.pack(value)
        except struct.error as exc:
            raise EventStreamError(f"header {header.name!r}: {value} is out of range") from exc
    if kind == "uuid":
        if not isinstance(value, bytes) or len(value) != 16:
            raise EventStreamError(f"header {header.name!r} is a uuid: 16 bytes, not {value!r}")
        return head + b"\x09" + value
    if kind in ("bytes", "string"):
        if kind == "string" and not isinstance(value, str):
            raise EventStreamError(f"header {header.name!r} is a string, not {value!r}")
        if kind == "bytes" and not isinstance(value, bytes):
            raise EventStreamError(f"header {header.name!r} is bytes, not {value!r}")
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        if len(data) > 0xFFFF:
            raise EventStreamError(f"header {header.name!r} is longer than 65535 bytes")
        return head + (b"\x07" if kind == "string" else b"\x06") + _LENGTH.pack(len(data)) + data
    raise EventStreamError(f"header {header.name!r} has an unknown type {kind!r}")


def encode(frame: Frame) -> bytes:
    """The wire bytes of ``frame``, both CRCs included."""
    headers = b"".join(_encode_header(h) for h in frame.headers)
    total = _MINIMUM + len(headers) + len(frame.payload)
    if total > 0xFFFFFFFF:
        raise EventStreamError("a frame cannot be longer than 4 GiB")
    prelude = struct.pack(">II", total, len(headers))
    prelude += _CRC.pack(zlib.crc32(prelude))
    body = prelude + headers + frame.payload
    return body + _CRC.pack(zlib.crc32(body))


def _decode_headers(data: bytes) -> tuple[Header, ...]:
    headers: list[Header] = []
    at = 0
    while at < len(data):
        size = data[at]
        at += 1
        if size == 0 or at + size + 1 > len(data):
            raise EventStreamError("a header name runs past the headers section")
        try:
            name = data[at : at + size].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EventStreamError("a header name is not UTF-8") from exc
        at += size
        code = data[at]
        at += 1
        value: HeaderValue
        kind: HeaderType
        if code in (0, 1):
            kind, value = "bool", code == 0
        elif code in _INTEGER_OF_CODE:
            kind, packer = _INTEGER_OF_CODE[code]
            if at + packer.size > len(data):
                raise EventStreamError(f"header {name!r} runs past the headers section")
            (value,) = packer.unpack_from(data, at)
            at += packer.size
        elif code == 9:
            if at + 16 > len(data):
                raise EventStreamError(f"header {name!r} runs past the headers section")
            kind, value = "uuid", data[at : at + 16]
            at += 16
        elif code in (6, 7):
            if at + 2 > len(data):
                raise EventStreamError(f"header {name!r} runs past the headers section")
            (length,) = _LENGTH.unpack_from(data, at)
            at += 2
            if at + length > len(data):
                raise EventStreamError(f"header {name!r} runs past the headers section")
            raw = data[at : at + length]
            at += length
            if code == 6:
                kind, value = "bytes", raw
            else:
                try:
                    kind, value = "string", raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise EventStreamError(f"header {name!r} is a string, not UTF-8") from exc
        else:
            raise EventStreamError(f"header {name!r} has an unknown type code {code}")
        headers.append(Header(name, kind, value))
    return tuple(headers)


def _lengths(data: bytes | bytearray) -> tuple[int, int]:
    """The total and headers lengths of the frame ``data`` starts with, checked."""
    total, headers, prelude_crc = _PRELUDE.unpack_from(data, 0)
    if zlib.crc32(bytes(data[:8])) != prelude_crc:
        raise EventStreamError("the prelude CRC does not match: this is not an event stream")
    if total < _MINIMUM or headers > total - _MINIMUM:
        raise EventStreamError(f"a frame of {total} bytes cannot hold {headers} header bytes")
    return total, headers


def decode(data: bytes) -> Frame:
    """The frame ``data`` holds, exactly: both CRCs and every length are checked."""
    if len(data) < _MINIMUM:
        raise EventStreamError(f"a frame is at least {_MINIMUM} bytes, got {len(data)}")
    total, headers_length = _lengths(data)
    if total != len(data):
        raise EventStreamError(f"the frame says it is {total} bytes long, got {len(data)}")
    (message_crc,) = _CRC.unpack_from(data, total - _CRC.size)
    if zlib.crc32(data[: total - _CRC.size]) != message_crc:
        raise EventStreamError("the message CRC does not match")
    start = _PRELUDE.size
    headers = _decode_headers(data[start : start + headers_length])
    return Frame(headers, data[start + headers_length : total - _CRC.size])


class FrameSplitter:
    """Cuts whole frames out of chunks as they arrive.

    ``feed(chunk)`` returns the wire bytes of each frame the chunk completed (checked by
    :func:`decode` when the caller decodes them); ``finish()`` the bytes after the last one.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        frames: list[bytes] = []
        while len(self._buffer) >= _PRELUDE.size:
            total, _ = _lengths(self._buffer)
            if len(self._buffer) < total:
                break
            frames.append(bytes(self._buffer[:total]))
            del self._buffer[:total]
        return frames

    def finish(self) -> bytes:
        rest = bytes(self._buffer)
        self._buffer.clear()
        return rest


def frames_of(data: bytes) -> Sequence[Frame]:
    """Every frame of a whole event stream body; raises when it does not split into frames."""
    splitter = FrameSplitter()
    frames = [decode(raw) for raw in splitter.feed(data)]
    if splitter.finish():
        raise EventStreamError("the body ends inside a frame")
    return frames
