"""Case-insensitive, ordered, multi-value HTTP headers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Final, TypeVar, final, overload

from pytest_toolnexus._safety.mask import CREDENTIAL_HEADERS, mask_text

__all__ = ["Headers", "HeadersInput", "wire_pairs"]

_T = TypeVar("_T")

HeadersInput = (
    "Headers | Mapping[str, str] | Iterable[tuple[str, str]] | Iterable[tuple[bytes, bytes]] | None"
)


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _wire(text: str) -> bytes:
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def wire_pairs(pairs: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """String pairs (a :meth:`Headers.multi_items`, perhaps edited) as bytes for a client
    library, as :meth:`Headers.wire_pairs` gives them, without building a ``Headers``."""
    return [(_wire(name), _wire(value)) for name, value in pairs]


@final
class Headers(Mapping[str, str]):
    """Immutable HTTP headers.

    Lookup ignores case: ``headers["retry-after"]`` and ``headers["Retry-After"]`` are the same.
    Every value of a repeated name is kept, in order (``get_list("set-cookie")``). Reading a
    repeated name through the mapping interface joins the values with ``", "``, as httpx does.
    """

    __slots__ = ("_index_cache", "_items")

    def __init__(
        self,
        headers: Headers
        | Mapping[str, str]
        | Iterable[tuple[str, str]]
        | Iterable[tuple[bytes, bytes]]
        | None = None,
    ) -> None:
        items: list[tuple[str, str]]
        if headers is None:
            items = []
        elif isinstance(headers, Headers):
            items = list(headers._items)
        elif isinstance(headers, Mapping):
            # An httpx/httpx2 Headers is a Mapping whose items() joins repeated names; its
            # multi_items() keeps every value (two set-cookie headers stay two).
            multi_items = getattr(headers, "multi_items", None)
            pairs = multi_items() if callable(multi_items) else headers.items()
            items = [(_text(k), _text(v)) for k, v in pairs]
        else:
            items = [(_text(k), _text(v)) for k, v in headers]
        for name, value in items:
            if not isinstance(name, str) or not isinstance(value, str):
                raise TypeError(
                    f"header names and values must be str or bytes, got {name!r}: {value!r}"
                )
        self._items: Final[tuple[tuple[str, str], ...]] = tuple(items)
        self._index_cache: dict[str, list[str]] | None = None

    @classmethod
    def from_checked_pairs(cls, pairs: list[tuple[str, str]]) -> Headers:
        """Headers from ``(name, value)`` string pairs the caller has already checked.

        The loader's fast path: it skips the per-item conversion and checks of ``__init__``.
        """
        headers = object.__new__(cls)
        object.__setattr__(headers, "_items", tuple(pairs))
        object.__setattr__(headers, "_index_cache", None)
        return headers

    @property
    def _index(self) -> dict[str, list[str]]:
        """Values by lower-case name, built on first lookup (loading thousands of
        interactions builds none)."""
        index = self._index_cache
        if index is None:
            index = {}
            for name, value in self._items:
                index.setdefault(name.lower(), []).append(value)
            self._index_cache = index
        return index

    def __getitem__(self, name: str) -> str:
        return ", ".join(self._index[name.lower()])

    @overload
    def get(self, name: str, /) -> str | None: ...

    @overload
    def get(self, name: str, /, default: str | _T) -> str | _T: ...

    def get(self, name: str, /, default: object = None) -> object:
        """The values of ``name`` joined with ``", "``, or ``default`` when there is none.
        (Mapping's own ``get`` raises and catches a KeyError for each absent name, which a
        replayed request pays for every header it looks for and does not find.)"""
        values = self._index.get(name.lower()) if isinstance(name, str) else None
        return default if values is None else ", ".join(values)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._index

    def __iter__(self) -> Iterator[str]:
        seen: set[str] = set()
        for name, _ in self._items:
            key = name.lower()
            if key not in seen:
                seen.add(key)
                yield name

    def __len__(self) -> int:
        return len(self._index)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return sorted((k.lower(), v) for k, v in self._items) == sorted(
                (k.lower(), v) for k, v in other._items
            )
        if isinstance(other, Mapping):
            return self == Headers(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(sorted((k.lower(), v) for k, v in self._items)))

    def __repr__(self) -> str:
        # Masked: a header that holds a key must not show in a frame pytest prints.
        shown = [
            (name, "[secret]" if name.lower() in CREDENTIAL_HEADERS else value)
            for name, value in self._items
        ]
        return mask_text(f"Headers({shown!r})")

    def wire_pairs(self) -> list[tuple[bytes, bytes]]:
        """The pairs as bytes for a client library: latin-1, which gives back exactly the
        bytes a header arrived as (they are read as latin-1), or UTF-8 for a value made here
        with characters latin-1 cannot hold."""
        return wire_pairs(self._items)

    def get_list(self, name: str) -> list[str]:
        """Every value sent under ``name``, in order; an empty list when there is none."""
        return list(self._index.get(name.lower(), ()))

    def multi_items(self) -> list[tuple[str, str]]:
        """All ``(name, value)`` pairs in wire order, names spelled as they were received."""
        return list(self._items)

    def without(self, *names: str) -> Headers:
        """A copy with every value of each of ``names`` removed."""
        drop = {n.lower() for n in names}
        return Headers([(k, v) for k, v in self._items if k.lower() not in drop])

    def with_value(self, name: str, value: str) -> Headers:
        """A copy in which ``name`` has exactly one value, ``value``."""
        return Headers([*self.without(name)._items, (name, value)])
