"""Where a test's timeline is in the run report: an id made from its node id alone, so a link
made while the run goes on (pytest-html's extra) finds it in the report written at the end."""

from __future__ import annotations

import hashlib

__all__ = ["anchor_of"]


def anchor_of(nodeid: str) -> str:
    """The id of ``nodeid``'s section in the run report."""
    return "t-" + hashlib.sha256(nodeid.encode("utf-8", "surrogatepass")).hexdigest()[:16]
