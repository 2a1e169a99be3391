"""Every string an interaction holds, for the secret scan: where each sits and whose value it is.

:func:`leaves` walks an interaction (URL, header names and values, bodies, stream pieces,
tails, error messages) and gives each string with its path and the field or header it is the
value of. :func:`batches` gathers the strings of many interactions at once for the scan's first
pass (:mod:`.probes`), reading JSON values without their paths (:func:`json_into`), which cost
more to make than reading the strings does.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._store.bodies import (
    BytesBody,
    ChunksBody,
    EventStreamBody,
    JsonBody,
    NdjsonBody,
    SseBody,
    TextBody,
    WebSocketBody,
)
from pytest_toolnexus._store.records import Interaction, RecordedError

from .probes import SEPARATOR
from .rules import is_credential_field, is_opaque

__all__ = ["BATCH", "Batch", "batches", "json_into", "json_leaves", "leaves"]

# A tuple made once: an ``X | Y`` written in an isinstance call builds a union at every call.
_WALKED: Final = (str, dict, list)

BATCH: Final = 1 << 18
"""How many characters of strings :func:`batches` gathers at once."""

# Names repeat across a cassette (content, role, id): each is judged once.
_credential_name = functools.lru_cache(maxsize=4096)(is_credential_field)


@dataclass(slots=True)
class Batch:
    """Interactions whose strings the first pass reads together: each one's number, the
    strings, the offset in the joined text where each interaction's strings begin, and the
    numbers of those with an opaque value under a credential name."""

    interactions: list[tuple[int, Interaction]] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    named: list[int] = field(default_factory=list)
    size: int = 0


def batches(numbered: Iterable[tuple[int, Interaction]]) -> Iterator[Batch]:
    batch = Batch()
    step = len(SEPARATOR)
    roots: list[Any] = []
    for number, interaction in numbered:
        batch.interactions.append((number, interaction))
        batch.numbers.append(number)
        batch.starts.append(batch.size)
        texts = batch.texts
        first = len(texts)
        named = False
        for _, text, name in leaves(interaction, roots=roots):
            texts.append(text)
            if name is not None and not named and _credential_name(name) and is_opaque(text):
                named = True
        if json_into(roots, texts) or named:
            batch.named.append(number)
        roots.clear()
        batch.size += sum(map(len, texts[first:])) + step * (len(texts) - first)
        if batch.size >= BATCH:
            yield batch
            batch = Batch()
    if batch.interactions:
        yield batch


def json_into(values: list[Any], texts: list[str]) -> bool:
    """Add to ``texts`` what :func:`json_leaves` yields for each of ``values``, without the
    paths and in no set order (every map key, every string); True when an opaque string is
    the value of a credential-named key."""
    named = False
    append = texts.append
    stack = list(values)
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        if isinstance(item, str):
            append(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str):
                    append(key)
                    if isinstance(child, str):
                        append(child)
                        if not named and _credential_name(key) and is_opaque(child):
                            named = True
                        continue
                else:
                    append(str(key))
                if isinstance(child, _WALKED):
                    push(child)
        elif isinstance(item, list):
            stack.extend(item)
    return named


def json_leaves(value: Any, path: str) -> Iterator[tuple[str, str, str | None]]:
    # Iterative, in document order: a cassette nested deeper than the recursion limit is
    # still scanned instead of crashing the scan. The third item is the map key a string is
    # the value of (a credential name makes an opaque value a secret), None for a key itself
    # and for a list item.
    stack: list[tuple[str, Any, bool, str | None]] = [(path, value, False, None)]
    while stack:
        where, item, is_key, name = stack.pop()
        if is_key or isinstance(item, str):
            yield where, str(item), name
        elif isinstance(item, dict):
            pending: list[tuple[str, Any, bool, str | None]] = []
            for key, child in item.items():
                pending.append((f"{where}[{key!r}] (key)", key, True, None))
                pending.append(
                    (f"{where}[{key!r}]", child, False, key if isinstance(key, str) else None)
                )
            stack.extend(reversed(pending))
        elif isinstance(item, list):
            stack.extend(
                (f"{where}[{index}]", child, False, None)
                for index, child in reversed(list(enumerate(item)))
            )


def _json(value: Any, path: str, roots: list[Any] | None) -> Iterator[tuple[str, str, str | None]]:
    """The leaves of a JSON value, or nothing when ``roots`` takes the value instead."""
    if roots is None:
        yield from json_leaves(value, path)
    else:
        roots.append(value)


def _pieces(
    items: Iterable[Mapping[str, Any]], path: str, roots: list[Any] | None
) -> Iterator[tuple[str, str, str | None]]:
    """The leaves of a stream's stored pieces (SSE events, NDJSON lines), each as a map."""
    if roots is not None:
        roots.extend(item if type(item) is dict else dict(item) for item in items)
        return
    for index, item in enumerate(items):
        yield from json_leaves(dict(item), f"{path}[{index}]")


def _body_leaves(
    body: object, path: str, roots: list[Any] | None = None
) -> Iterator[tuple[str, str, str | None]]:
    if isinstance(body, JsonBody):
        yield from _json(body.value, f"{path}.value", roots)
    elif isinstance(body, TextBody):
        yield f"{path}.text", body.text, None
    elif isinstance(body, BytesBody):
        yield f"{path}.data", body.data.decode("utf-8", "ignore"), None
    elif isinstance(body, SseBody):
        yield from _pieces(body.events, f"{path}.events", roots)
        yield f"{path}.tail", body.tail, None
    elif isinstance(body, NdjsonBody):
        yield from _pieces(body.lines, f"{path}.lines", roots)
        yield f"{path}.tail", body.tail, None
    elif isinstance(body, EventStreamBody):
        for index, frame in enumerate(body.frames):
            where = f"{path}.frames[{index}]"
            data = frame.get("data")
            if isinstance(data, bytes):
                yield f"{where}.data", data.decode("utf-8", "ignore"), None
            yield from _json(dict(frame), where, roots)  # headers, payload and text
        yield f"{path}.tail", body.tail.decode("utf-8", "ignore"), None
    elif isinstance(body, WebSocketBody):
        for index, frame in enumerate(body.frames):
            where = f"{path}.frames[{index}]"
            data = frame.get("data")
            if isinstance(data, bytes):
                yield f"{where}.data", data.decode("utf-8", "ignore"), None
            yield from _json(dict(frame), where, roots)  # the text or JSON, and the reason
    elif isinstance(body, ChunksBody):
        joined = b"".join(
            c["data"]
            for c in body.chunks
            if isinstance(c, Mapping) and isinstance(c.get("data"), bytes)
        )
        # Joined, so a secret split across two chunks is still found.
        yield f"{path}.chunks", joined.decode("utf-8", "ignore"), None


def _error_leaves(error: RecordedError | None, path: str) -> Iterator[tuple[str, str, str | None]]:
    if error is not None:
        yield f"{path}.message", error.message, None


def _header_leaves(headers: Headers, path: str) -> Iterator[tuple[str, str, str | None]]:
    # The name is read too: a key pasted where a header name goes is written like any value.
    for name, value in headers.multi_items():
        yield f"{path}[{name!r}] (name)", name, None
        yield f"{path}[{name!r}]", value, name


def leaves(
    interaction: Interaction, *, roots: list[Any] | None = None
) -> Iterator[tuple[str, str, str | None]]:
    """``(path, text, name)`` for every string of ``interaction``; ``name`` is the field or
    header it is the value of. With ``roots``, each JSON value (a body's, a stream piece's)
    goes there instead of being walked, for :func:`json_into` to read without the paths,
    which cost more to make than reading the strings does."""
    request = interaction.request
    yield "request.url", request.url, None
    yield from _header_leaves(request.headers, "request.headers")
    yield from _body_leaves(request.body, "request.body", roots)
    response = interaction.response
    if response is not None:
        yield from _header_leaves(response.headers, "response.headers")
        yield from _body_leaves(response.body, "response.body", roots)
        yield from _error_leaves(response.error, "response.error")
    yield from _error_leaves(interaction.error, "error")
