"""What a file that is not a cassette looks like, for the loader's error: a vcrpy YAML
cassette renamed ``.msgpack`` should be told to use ``import-vcr``, not called corrupt."""

from __future__ import annotations

from typing import Final

__all__ = ["looks_like"]

_YAML_STARTS: Final = (b"---", b"interactions:", b"version:", b"http_interactions:", b"%YAML")


def looks_like(data: bytes) -> str | None:
    """A sentence on what ``data`` is when it is evidently not msgpack; None when it could be
    a damaged msgpack document."""
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if data.startswith(b"\x1f\x8b"):
        return "it is gzip-compressed data, not msgpack (a vcrpy .yaml.gz? see import-vcr)"
    if head.startswith(_YAML_STARTS) or b"\ninteractions:" in head[:512]:
        return (
            "it is YAML text, which looks like a vcrpy cassette: convert it with "
            "`pytest-toolnexus import-vcr FILE`"
        )
    if head[:1] in (b"{", b"["):
        if b'"interactions"' in head:
            return (
                "it is JSON text, which looks like a vcrpy cassette (JSON serializer): "
                "convert it with `pytest-toolnexus import-vcr FILE`"
            )
        return "it is JSON text, not msgpack"
    try:
        text = data[:4096].decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\t\r\n" for c in text):
        return "it is plain text, not msgpack"
    if data[:1] and (0x80 <= data[0] <= 0x8F or data[0] in (0xDE, 0xDF)):
        return None  # begins as a msgpack map, as a cassette does: a damaged one
    return (
        "it is binary data that does not begin as a cassette does (a msgpack map): another "
        "kind of file, or one overwritten from its first byte"
    )
