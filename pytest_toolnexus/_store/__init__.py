"""The cassette store: the msgpack format, stream framing, atomic writes, and what a file that
is not a cassette looks like."""

__all__: list[str] = []
