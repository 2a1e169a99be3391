"""``pytest-toolnexus diff``: two cassettes compared as text, interaction by interaction.

Each interaction is turned into a tree (request, response, body, stream events) in which every
recorded time is a :class:`Time`. Interactions are paired by ``METHOD URL`` (in order, so an
added or removed interaction does not make every later one differ), then each pair is compared
leaf by leaf. Time differences within the tolerance are not differences. Header names are
compared without regard to case; JSON key order is not a difference.

Why one module of over 400 lines: the comparison and its rendering share the tree they are made
of (:class:`Time` leaves, header maps), whose private node types would otherwise have to be
shared between two modules.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._store.cassette import (
    Body,
    BytesBody,
    Cassette,
    ChunksBody,
    EventStreamBody,
    Interaction,
    JsonBody,
    NdjsonBody,
    RecordedError,
    SseBody,
    TextBody,
    WebSocketBody,
)

__all__ = ["CassetteDiff", "Change", "InteractionDiff", "diff_cassettes", "render"]

_PREVIEW: Final = 160
_INLINE_JSON: Final = 80


@dataclass(frozen=True, slots=True)
class Time:
    """A recorded time in ms; compared with the tolerance, not exactly."""

    ms: float


class _Node(dict[str, Any]):
    """A map of the cassette's own structure (its keys join a path with ``.``), as opposed to
    a JSON value from a body (whose keys join with ``['key']``)."""


class _HeaderMap(dict[str, Any]):
    """Headers by lower-case name: one value as a str, several as a list in order."""


Op = Literal["~", "-", "+"]


@dataclass(frozen=True, slots=True)
class Change:
    """One difference: ``~`` changed, ``-`` only in the first cassette, ``+`` only in the
    second."""

    op: Op
    path: str
    old: Any = None
    new: Any = None


@dataclass(frozen=True, slots=True)
class InteractionDiff:
    """A pair of interactions (or one without a partner) and how they differ."""

    a_index: int | None
    b_index: int | None
    label: str
    changes: list[Change] = field(default_factory=list)
    a_tree: _Node | None = None
    b_tree: _Node | None = None

    @property
    def differs(self) -> bool:
        return self.a_index is None or self.b_index is None or bool(self.changes)


@dataclass(frozen=True, slots=True)
class CassetteDiff:
    """Every paired interaction, in order, and the differences in ``meta`` (when compared)."""

    a_name: str
    b_name: str
    items: list[InteractionDiff]
    meta: list[Change]
    tolerance: float

    @property
    def equal(self) -> bool:
        return not self.meta and not any(item.differs for item in self.items)


# ---------------------------------------------------------------------------------------------
# Interactions as trees


def _headers(headers: Headers, ignore: frozenset[str]) -> _HeaderMap:
    grouped: dict[str, list[str]] = {}
    for name, value in headers.multi_items():
        key = name.lower()
        if key not in ignore:
            grouped.setdefault(key, []).append(value)
    return _HeaderMap(
        (key, values[0] if len(values) == 1 else values) for key, values in sorted(grouped.items())
    )


def _pieces(items: Sequence[Mapping[str, Any]]) -> list[_Node]:
    out: list[_Node] = []
    for item in items:
        node = _Node()
        for key, value in item.items():
            node[str(key)] = Time(float(value)) if key == "t" else value
        out.append(node)
    return out


def _body(body: Body) -> _Node:
    node = _Node(kind=body.kind)
    if isinstance(body, JsonBody):
        node["value"] = body.value
    elif isinstance(body, TextBody):
        node["text"] = body.text
    elif isinstance(body, BytesBody):
        node["data"] = body.data
    elif isinstance(body, SseBody):
        node["events"] = _pieces(body.events)
    elif isinstance(body, NdjsonBody):
        node["lines"] = _pieces(body.lines)
    elif isinstance(body, ChunksBody):
        node["chunks"] = _pieces(body.chunks)
    elif isinstance(body, EventStreamBody | WebSocketBody):
        node["frames"] = _pieces(body.frames)
        if isinstance(body, EventStreamBody) and body.tail:
            node["tail"] = body.tail
    if isinstance(body, SseBody | NdjsonBody) and body.tail:
        node["tail"] = body.tail
    return node


def _error(error: RecordedError) -> _Node:
    return _Node(kind=error.kind, message=error.message, t=Time(error.t))


def tree(interaction: Interaction, ignore_headers: frozenset[str] = frozenset()) -> _Node:
    """``interaction`` as a tree of plain values, with each recorded time a :class:`Time`."""
    request = interaction.request
    node = _Node(
        request=_Node(
            method=request.method,
            url=request.url,
            headers=_headers(request.headers, ignore_headers),
            body=_body(request.body),
        )
    )
    response = interaction.response
    if response is not None:
        out = _Node(
            status=response.status,
            headers=_headers(response.headers, ignore_headers),
            t_headers=Time(response.t_headers),
            t_end=Time(response.t_end),
            complete=response.complete,
            body=_body(response.body),
        )
        if response.error is not None:
            out["error"] = _error(response.error)
        node["response"] = out
    if interaction.error is not None:
        node["error"] = _error(interaction.error)
    return node


# ---------------------------------------------------------------------------------------------
# Comparing


def _join(path: str, parent: object, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if isinstance(parent, _Node):
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def _close(a: Time, b: Time, tolerance: float) -> bool:
    return math.isinf(tolerance) or round(abs(a.ms - b.ms), 3) <= tolerance


def compare(a: object, b: object, tolerance: float, path: str = "") -> list[Change]:
    """Every difference between two trees (or JSON values), in document order.

    Iterative, so a JSON body nested deeper than the recursion limit is still compared.
    """
    changes: list[Change] = []
    # A task is either a pair to compare, or a change to emit when it is reached, so that
    # additions and removals come out where they sit in the document.
    stack: list[tuple[str, object, object] | Change] = [(path, a, b)]
    while stack:
        task = stack.pop()
        if isinstance(task, Change):
            changes.append(task)
            continue
        where, x, y = task
        if isinstance(x, Time) and isinstance(y, Time):
            if not _close(x, y, tolerance):
                changes.append(Change("~", where, x, y))
        elif isinstance(x, dict) and isinstance(y, dict) and type(x) is type(y):
            pending: list[tuple[str, object, object] | Change] = []
            for key, value in x.items():
                child = _join(where, x, key)
                if key in y:
                    pending.append((child, value, y[key]))
                else:
                    pending.append(Change("-", child, old=value))
            pending.extend(
                Change("+", _join(where, y, key), new=value)
                for key, value in y.items()
                if key not in x
            )
            stack.extend(reversed(pending))
        elif isinstance(x, list) and isinstance(y, list):
            pending = [(_join(where, x, i), x[i], y[i]) for i in range(min(len(x), len(y)))]
            pending.extend(Change("-", _join(where, x, i), old=x[i]) for i in range(len(y), len(x)))
            pending.extend(Change("+", _join(where, y, i), new=y[i]) for i in range(len(x), len(y)))
            stack.extend(reversed(pending))
        elif not _same(x, y):
            changes.append(Change("~", where, x, y))
    return changes


def _label(interaction: Interaction) -> str:
    return f"{interaction.request.method} {interaction.request.url}"


def _pairs(
    a: Sequence[Interaction], b: Sequence[Interaction]
) -> list[tuple[int | None, int | None]]:
    """Interactions paired by ``METHOD URL``, in order; an unmatched one has no partner."""
    keys_a = [_label(i) for i in a]
    keys_b = [_label(i) for i in b]
    if keys_a == keys_b:
        return [(i, i) for i in range(len(a))]
    pairs: list[tuple[int | None, int | None]] = []
    matcher = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        common = min(i2 - i1, j2 - j1) if tag in ("equal", "replace") else 0
        if tag == "replace":
            # Where the URLs differ, a pair is still one interaction whose URL changed when
            # the methods agree; otherwise the two are unrelated.
            while common and not all(
                a[i1 + k].request.method == b[j1 + k].request.method for k in range(common)
            ):
                common -= 1
        pairs.extend((i1 + k, j1 + k) for k in range(common))
        pairs.extend((i, None) for i in range(i1 + common, i2))
        pairs.extend((None, j) for j in range(j1 + common, j2))
    return pairs


def diff_cassettes(
    a: Cassette,
    b: Cassette,
    *,
    tolerance: float = 50.0,
    ignore_headers: Sequence[str] = (),
    include_meta: bool = False,
    a_name: str | None = None,
    b_name: str | None = None,
) -> CassetteDiff:
    """Compare two cassettes. ``tolerance`` is in ms (``math.inf`` ignores every time)."""
    ignore = frozenset(name.lower() for name in ignore_headers)
    items: list[InteractionDiff] = []
    for i, j in _pairs(a.interactions, b.interactions):
        first = a.interactions[i] if i is not None else None
        second = b.interactions[j] if j is not None else None
        ta = tree(first, ignore) if first is not None else None
        tb = tree(second, ignore) if second is not None else None
        label = _label(first) if first is not None else _label(second) if second else "?"
        changes = compare(ta, tb, tolerance) if ta is not None and tb is not None else []
        items.append(InteractionDiff(i, j, label, changes, ta, tb))
    meta = compare(_Node(a.meta), _Node(b.meta), tolerance, "meta") if include_meta else []
    return CassetteDiff(
        a_name if a_name is not None else str(a.path),
        b_name if b_name is not None else str(b.path),
        items,
        meta,
        tolerance,
    )


# ---------------------------------------------------------------------------------------------
# Showing values


def _jsonable(value: object) -> object:
    if isinstance(value, Time):
        return f"{value.ms:.1f} ms"
    if isinstance(value, bytes):
        return _bytes_text(value)
    raise TypeError(f"{type(value).__name__} is not shown")


def _bytes_text(data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()[:12]
    head = data[:16].hex()
    more = "..." if len(data) > 16 else ""
    return f"<{len(data)} bytes {head}{more} sha256:{digest}>"


def _dumps(value: object, *, indent: int | None = None) -> str:
    try:
        return json.dumps(
            value,
            ensure_ascii=False,
            sort_keys=True,
            indent=indent,
            separators=(",", ": ") if indent else (", ", ": "),
            default=_jsonable,
        )
    except RecursionError:
        if indent is not None:
            return _dumps(value)
        return "<a value nested too deeply to show>"
    except (TypeError, ValueError) as exc:
        return f"<cannot show: {exc}>"


def show_value(value: object) -> str:
    """A one-line preview of a value."""
    if isinstance(value, Time):
        return f"{value.ms:.1f} ms"
    if isinstance(value, bytes):
        return _bytes_text(value)
    text = _dumps(value)
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 3] + "..."


def _change_lines(change: Change) -> Iterator[str]:
    if change.op == "-":
        yield f"  - {change.path}: {show_value(change.old)}"
    elif change.op == "+":
        yield f"  + {change.path}: {show_value(change.new)}"
    elif isinstance(change.old, Time) and isinstance(change.new, Time):
        delta = change.new.ms - change.old.ms
        yield (
            f"  ~ {change.path}: {change.old.ms:.1f} ms -> {change.new.ms:.1f} ms ({delta:+.1f} ms)"
        )
    elif (
        isinstance(change.old, str)
        and isinstance(change.new, str)
        and ("\n" in change.old or "\n" in change.new)
    ):
        yield f"  ~ {change.path}:"
        lines = difflib.unified_diff(
            change.old.splitlines(), change.new.splitlines(), lineterm="", n=2
        )
        for line in list(lines)[2:]:
            yield f"      {line}"
    elif isinstance(change.old, bytes) and isinstance(change.new, bytes):
        at = next(
            (k for k, (x, y) in enumerate(zip(change.old, change.new, strict=False)) if x != y),
            min(len(change.old), len(change.new)),
        )
        yield (
            f"  ~ {change.path}: {_bytes_text(change.old)} -> {_bytes_text(change.new)}, "
            f"first difference at byte {at}"
        )
    else:
        yield f"  ~ {change.path}: {show_value(change.old)} -> {show_value(change.new)}"


# ---------------------------------------------------------------------------------------------
# The unified view


def _snap(a: object, b: object, tolerance: float) -> object:
    """``b`` with each time that is within the tolerance of ``a``'s replaced by ``a``'s, so
    that a text rendering shows only the times that count as differences. Only the cassette's
    own structure holds times, so JSON values are not walked."""
    if isinstance(a, Time) and isinstance(b, Time):
        return a if _close(a, b, tolerance) else b
    if isinstance(a, _Node) and isinstance(b, _Node):
        return _Node((k, _snap(a[k], v, tolerance) if k in a else v) for k, v in b.items())
    if (
        isinstance(a, list)
        and isinstance(b, list)
        and any(isinstance(item, _Node) for item in b[:1])
    ):
        return [_snap(a[k], item, tolerance) if k < len(a) else item for k, item in enumerate(b)]
    return b


def _render_value(key: str, value: object, indent: str) -> Iterator[str]:
    if isinstance(value, str) and "\n" in value:
        yield f"{indent}{key}: |"
        yield from (f"{indent}  {line}" for line in value.splitlines())
        return
    if isinstance(value, dict | list) and value:
        compact = _dumps(value)
        if len(compact) > _INLINE_JSON:
            yield f"{indent}{key}:"
            yield from (f"{indent}  {line}" for line in _dumps(value, indent=2).splitlines())
            return
    yield f"{indent}{key}: {show_value(value)}"


def render_tree(node: _Node, indent: str = "") -> Iterator[str]:
    """A tree as indented text lines, stable for a line diff."""
    for key, value in node.items():
        if isinstance(value, _Node):
            yield f"{indent}{key}:"
            yield from render_tree(value, indent + "  ")
        elif isinstance(value, _HeaderMap):
            yield f"{indent}{key}:"
            for name, values in value.items():
                for one in values if isinstance(values, list) else [values]:
                    yield f"{indent}  {name}: {one}"
        elif isinstance(value, list) and value and isinstance(value[0], _Node):
            yield f"{indent}{key}:"
            for number, item in enumerate(value):
                yield f"{indent}  [{number}]"
                yield from render_tree(item, indent + "    ")
        else:
            yield from _render_value(key, value, indent)


# ---------------------------------------------------------------------------------------------
# The report


def _heading(item: InteractionDiff, diff: CassetteDiff) -> str:
    if item.b_index is None:
        return f"- #{item.a_index} {item.label} (only in {diff.a_name})"
    if item.a_index is None:
        return f"+ #{item.b_index} {item.label} (only in {diff.b_name})"
    where = (
        f"#{item.a_index}"
        if item.a_index == item.b_index
        else f"#{item.a_index} -> #{item.b_index}"
    )
    return f"== {where} {item.label}"


def _unified(item: InteractionDiff, tolerance: float) -> list[str]:
    assert item.a_tree is not None
    assert item.b_tree is not None
    snapped = _snap(item.a_tree, item.b_tree, tolerance)
    assert isinstance(snapped, _Node)
    lines = list(
        difflib.unified_diff(
            list(render_tree(item.a_tree)), list(render_tree(snapped)), lineterm="", n=3
        )
    )
    return lines[2:]


def render(diff: CassetteDiff, *, unified: bool = False) -> Iterator[str]:
    """The report, line by line."""
    if diff.equal:
        yield f"no differences ({len(diff.items)} interaction(s); {_tolerance_note(diff)})"
        return
    yield f"--- {diff.a_name}"
    yield f"+++ {diff.b_name}"
    if diff.meta:
        yield "== meta"
        for change in diff.meta:
            yield from _change_lines(change)
    changed = only_a = only_b = 0
    for item in diff.items:
        if not item.differs:
            continue
        yield _heading(item, diff)
        if item.b_index is None:
            only_a += 1
            continue
        if item.a_index is None:
            only_b += 1
            continue
        changed += 1
        lines = _unified(item, diff.tolerance) if unified else []
        if lines:
            yield from lines
        else:
            for change in item.changes:
                yield from _change_lines(change)
    yield (
        f"{changed} interaction(s) differ, {only_a} only in {diff.a_name}, {only_b} only in "
        f"{diff.b_name} ({_tolerance_note(diff)})"
    )


def _tolerance_note(diff: CassetteDiff) -> str:
    if math.isinf(diff.tolerance):
        return "times ignored"
    return f"time differences up to {diff.tolerance:g} ms ignored"
