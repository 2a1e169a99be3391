"""The gate every write of a cassette passes, and the one writer: redact, scan, then write.

``Cassette.save()``, a recording session's write, ``import-vcr``, ``migrate --write`` and the
builder all come here, so what reaches the disk does not depend on the path that wrote it.
The interactions are redacted (:func:`.redact_interaction.redacted`: credential headers and
query values, account-identifier keys), then every string of the result and of ``meta`` is
scanned for what still looks like a secret; a hit raises :class:`SecretFoundError`, which
names where each secret sits and never its value, and nothing is written. What passes is
encoded by the cassette itself as it is written atomically, one interaction at a time
(:func:`pytest_toolnexus._store.write.write_atomic`): nothing of it reaches a file before all
of it was scanned, and its encoding is never held whole.

The gate sees a cassette as a :class:`Document`, so that it imports only what lies below it:
the cassette, which asks the gate to save it, sits above.

Writing a cassette as it is, unredacted and unscanned, takes the explicit
``Cassette.save(unsafe_verbatim=True)``; nothing here is ever skipped by default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar, Final, Protocol, TypeVar

from pytest_toolnexus._seam.errors import SecretFoundError
from pytest_toolnexus._store.records import Interaction
from pytest_toolnexus._store.write import write_atomic

from .redact_interaction import redacted
from .secrets import SecretScanner

__all__ = [
    "SAVE_FIX",
    "Document",
    "redacted_cassette",
    "refuse_secrets",
    "safe_bytes",
    "safe_cassette",
    "save",
]


class Document(Protocol):
    """What the gate writes: a cassette (``_store/cassette.py``'s dataclass), which encodes
    itself."""

    __dataclass_fields__: ClassVar[dict[str, Any]]
    path: Path
    interactions: list[Interaction]
    meta: dict[str, Any]

    def to_bytes(self) -> bytes: ...

    def write_to(self, write: Callable[[bytes], object]) -> None: ...


D = TypeVar("D", bound=Document)

SAVE_FIX: Final = (
    "Remove or redact the value before saving, or, for a value that is a known fake, pass it "
    "in allow_secrets=[...] to Cassette.save()."
)
"""The fix a refused ``Cassette.save()`` suggests."""

_LISTED: Final = 10


def redacted_cassette(cassette: D) -> D:
    """A copy of ``cassette`` (same path and ``meta``) with every interaction redacted."""
    return dataclasses.replace(cassette, interactions=[redacted(i) for i in cassette.interactions])


def refuse_secrets(cassette: Document, scanner: SecretScanner, *, fix: str) -> None:
    """Raise :class:`SecretFoundError` when ``scanner`` finds a secret anywhere in
    ``cassette``: the message names the file, each place and the kind, then ``fix``."""
    hits = scanner.scan_cassette(cassette.meta, cassette.interactions)
    if not hits:
        return
    listing = "\n".join(f"  - {hit}" for hit in hits[:_LISTED])
    more = f"\n  ... and {len(hits) - _LISTED} more" if len(hits) > _LISTED else ""
    raise SecretFoundError(
        f"cassette {cassette.path} was not written: it would hold {len(hits)} secret(s)\n"
        f"{listing}{more}\n{fix}",
        path=str(cassette.path),
    )


def safe_cassette(
    cassette: D,
    *,
    allow_secrets: Iterable[str] = (),
    scanner: SecretScanner | None = None,
    fix: str = SAVE_FIX,
) -> D:
    """What to write for ``cassette``: redacted, then scanned whole (by ``scanner``, or one
    that lets ``allow_secrets`` through). Raises :class:`SecretFoundError` on a hit. Give the
    result to ``write_atomic``, which encodes it as it writes it."""
    safe = redacted_cassette(cassette)
    refuse_secrets(safe, scanner or SecretScanner(allow=allow_secrets), fix=fix)
    return safe


def safe_bytes(
    cassette: Document,
    *,
    allow_secrets: Iterable[str] = (),
    scanner: SecretScanner | None = None,
    fix: str = SAVE_FIX,
) -> bytes:
    """The bytes of :func:`safe_cassette`: redacted, scanned, then encoded."""
    return safe_cassette(cassette, allow_secrets=allow_secrets, scanner=scanner, fix=fix).to_bytes()


def save(
    cassette: Document, *, allow_secrets: Iterable[str] = (), unsafe_verbatim: bool = False
) -> None:
    """Write ``cassette`` to its path atomically: redacted and scanned (see
    :func:`safe_cassette`), or, with ``unsafe_verbatim``, exactly as it is."""
    data = cassette if unsafe_verbatim else safe_cassette(cassette, allow_secrets=allow_secrets)
    write_atomic(cassette.path, data)
