"""The record mode a test runs with, from the one it asked for: recording is off in CI unless
the command line turns it on, an expired cassette is recorded again (or fails, or warns, as
``on_expired`` says), and a shared cassette another test of this run recorded first is
recorded into, not over."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Final

import pytest

from pytest_toolnexus._seam.errors import CassetteError
from pytest_toolnexus._store.cassette import load_cassette

from .expiry import CassetteExpiredWarning, expiry
from .settings import CassetteOptions
from .shared import RUN_ID, shown

__all__ = ["record_mode"]

_CI_FALSE: Final = frozenset({"", "0", "false", "no"})


def record_mode(item: pytest.Item, options: CassetteOptions, path: Path) -> tuple[Any, str | None]:
    """The record mode ``item`` runs with, and a note on why recording is off, if it is off
    for a reason the miss message should give."""
    config = item.config
    record: Any = options.record
    note = None
    forced = config.getoption("cassette_record")
    if record != "none" and _in_ci() and forced is None:
        note = (
            f"Recording is off because CI is set in the environment (this test asked for "
            f"record mode {record!r}); pass --cassette-record={record} to record in CI."
        )
        record = "none"
    if options.max_age is not None and record != "all" and path.exists():
        blocked = _in_ci() and forced is None
        record = _check_expiry(item, path, options, record, recording_allowed=not blocked)
    if record == "once" and _written_this_run(path, config.stash[RUN_ID]):
        # A shared cassette that another test of this run (perhaps on another xdist worker)
        # recorded first: it was missing when the run began, so this test records into it too.
        record = "new"
    return record, note


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in _CI_FALSE


def _written_this_run(path: Path, run_id: str) -> bool:
    """Whether the cassette at ``path`` was written by a test of this run (an unreadable one
    was not: the session refuses it with the fix)."""
    try:
        return path.exists() and load_cassette(path).meta.get("run_id") == run_id
    except CassetteError:
        return False


def _check_expiry(
    item: pytest.Item,
    path: Path,
    options: CassetteOptions,
    record: str,
    *,
    recording_allowed: bool,
) -> Any:
    """The record mode to use once ``max_age`` has been checked: ``all`` to record an
    expired cassette again, else ``record``; fails or warns as ``on_expired`` says."""
    assert options.max_age is not None
    forced = item.config.getoption("cassette_record")
    try:
        meta = dict(load_cassette(path).meta)
    except CassetteError:
        return record  # an unreadable file is the session's to report (or to record over)
    found = expiry(
        shown(item.config, path),
        meta,
        options.max_age,
        options.on_expired,
        may_record=recording_allowed and forced in (None, "once", "new", "all"),
    )
    if found is None:
        return record
    if found.action == "fail":
        pytest.fail(found.message, pytrace=False)
    if found.action == "rerecord":
        warnings.warn(CassetteExpiredWarning(found.message), stacklevel=1)
        return "all"
    warnings.warn(CassetteExpiredWarning(found.message), stacklevel=1)
    return record
