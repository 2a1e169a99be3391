"""Undoing a body's ``content-encoding`` (gzip, deflate, br, zstd), so that what a cassette
stores, what redaction and the secret scan read, and what matching compares is the body
itself and not its compressed bytes."""

from __future__ import annotations

import gzip
import importlib
import zlib
from collections.abc import Callable, Iterable
from typing import Any, Final

from .headers import Headers

__all__ = ["CodingError", "codings_of", "decode_body", "decoded"]


class CodingError(ValueError):
    """A body that says it is encoded one way and does not decode that way, or an encoding
    nothing here decodes."""


def _inflate(data: bytes) -> bytes:
    try:
        return zlib.decompress(data)
    except zlib.error:
        # Some senders use raw deflate, without the zlib wrapper.
        return zlib.decompress(data, -zlib.MAX_WBITS)


def _optional(modules: tuple[str, ...], coding: str) -> Callable[[bytes], bytes]:
    def decode(data: bytes) -> bytes:
        for name in modules:
            try:
                module: Any = importlib.import_module(name)
            except ImportError:
                continue
            result: bytes = module.decompress(data)
            return result
        raise CodingError(
            f"the body is {coding}-encoded and no module to decode it is installed "
            f"(pip install {modules[0]})"
        )

    return decode


_DECODERS: Final[dict[str, Callable[[bytes], bytes]]] = {
    "gzip": gzip.decompress,
    "x-gzip": gzip.decompress,
    "deflate": _inflate,
    "br": _optional(("brotli", "brotlicffi"), "br"),
    "zstd": _optional(("zstandard",), "zstd"),
}


def codings_of(headers: Headers) -> list[str]:
    """The content-codings ``headers`` name, in the order they were applied."""
    return [
        part.strip().lower()
        for value in headers.get_list("content-encoding")
        for part in value.split(",")
        if part.strip() and part.strip().lower() != "identity"
    ]


def decode_body(codings: Iterable[str], data: bytes) -> bytes:
    """``data`` with ``codings`` undone, the last one applied first."""
    for coding in reversed(list(codings)):
        decoder = _DECODERS.get(coding)
        if decoder is None:
            raise CodingError(f"content-encoding {coding!r} is not one this library decodes")
        try:
            data = decoder(data)
        except CodingError:
            raise
        except Exception as exc:  # gzip, zlib and brotli each raise their own types
            raise CodingError(
                f"the body says content-encoding {coding!r} but does not decode as {coding}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    return data


def decoded(headers: Headers, data: bytes) -> tuple[Headers, bytes]:
    """A body and its headers as stored: the content-encoding undone, and the headers that
    describe the wire form (``content-encoding``, ``content-length``) dropped. A body that
    does not decode as it says is kept as sent."""
    codings = codings_of(headers)
    if not codings or not data:
        return headers, data
    try:
        plain = decode_body(codings, data)
    except CodingError:
        return headers, data
    return headers.without("content-encoding", "content-length"), plain
