"""The gate every write of a cassette passes: redact, scan, and only then encode.

``Cassette.save()``, a recording session's write, ``import-vcr``, ``migrate --write`` and the
builder all come here, so what reaches the disk does not depend on the path that wrote it.
The interactions are redacted (:func:`._store_redact.redacted`: credential headers and query
values, account-identifier keys), then every string of the result and of ``meta`` is scanned
for what still looks like a secret; a hit raises :class:`SecretFoundError`, which names where
each secret sits and never its value, and nothing is written.

Writing a cassette as it is, unredacted and unscanned, takes the explicit
``Cassette.save(unsafe_verbatim=True)``; nothing here is ever skipped by default.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from pytest_toolnexus._seam.errors import SecretFoundError
from pytest_toolnexus._store.cassette import Cassette

from .redact_interaction import redacted
from .secrets import SecretScanner

__all__ = ["SAVE_FIX", "redacted_cassette", "refuse_secrets", "safe_bytes"]

SAVE_FIX: Final = (
    "Remove or redact the value before saving, or, for a value that is a known fake, pass it "
    "in allow_secrets=[...] to Cassette.save()."
)
"""The fix a refused ``Cassette.save()`` suggests."""

_LISTED: Final = 10


def redacted_cassette(cassette: Cassette) -> Cassette:
    """A copy of ``cassette`` (same path and ``meta``) with every interaction redacted."""
    return Cassette(cassette.path, [redacted(i) for i in cassette.interactions], cassette.meta)


def refuse_secrets(cassette: Cassette, scanner: SecretScanner, *, fix: str) -> None:
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


def safe_bytes(
    cassette: Cassette,
    *,
    allow_secrets: Iterable[str] = (),
    scanner: SecretScanner | None = None,
    fix: str = SAVE_FIX,
) -> bytes:
    """The bytes to write for ``cassette``: redacted, scanned (by ``scanner``, or one that
    lets ``allow_secrets`` through), then encoded. Raises :class:`SecretFoundError` on a hit."""
    safe = redacted_cassette(cassette)
    refuse_secrets(safe, scanner or SecretScanner(allow=allow_secrets), fix=fix)
    return safe.to_bytes()
