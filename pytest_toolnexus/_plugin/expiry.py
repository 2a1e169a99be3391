"""Cassette expiry: ``max_age`` read against the ``recorded_at`` a cassette's ``meta`` keeps,
and what ``on_expired`` does about an old one."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any, Literal

from pytest_toolnexus._seam.errors import CassetteExpiredWarning
from pytest_toolnexus._timing.clock import real_wall

__all__ = ["CassetteExpiredWarning", "Expiry", "age_of", "expiry", "human_age"]


def age_of(meta: dict[str, Any]) -> float | None:
    """Seconds since ``meta["recorded_at"]`` in real time; None when it is missing or
    unreadable."""
    stamp = meta.get("recorded_at")
    if not isinstance(stamp, str):
        return None
    try:
        when = _dt.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return real_wall() - when.timestamp()


def human_age(seconds: float) -> str:
    """``"45 days"``, ``"3 hours"``, ``"12 minutes"``, ``"8 seconds"``."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    count = max(int(seconds), 0)
    return f"{count} second{'s' if count != 1 else ''}"


@dataclass(frozen=True, slots=True)
class Expiry:
    """What to do with an expired cassette: ``action`` and the sentence that says why."""

    action: Literal["warn", "fail", "rerecord"]
    message: str


def expiry(
    shown: str, meta: dict[str, Any], max_age: float, policy: str, *, may_record: bool
) -> Expiry | None:
    """None when the cassette at ``shown`` is young enough; otherwise what ``policy`` does.

    A cassette whose age is unknown (one converted from vcrpy keeps no date) only warns:
    failing or recording again on a guess would surprise. ``rerecord`` turns into a warning
    when recording is not allowed (CI, or ``--cassette-record=none`` on the command line).
    """
    age = age_of(meta)
    limit = human_age(max_age)
    if age is None:
        return Expiry(
            "warn",
            f"cassette {shown} has no recorded_at date, so max_age={limit} cannot be "
            "checked; record it again (--cassette-record=all) to give it one",
        )
    if age <= max_age:
        return None
    base = (
        f"cassette {shown} was recorded {human_age(age)} ago ({meta['recorded_at']}), "
        f"more than max_age={limit}"
    )
    if policy == "rerecord":
        if may_record:
            return Expiry("rerecord", f"{base}; recording it again (on_expired='rerecord')")
        return Expiry(
            "warn",
            f"{base}; on_expired='rerecord' cannot record here (recording is off in CI or "
            "by --cassette-record); record it again where it can: --cassette-record=all",
        )
    fix = "record it again: --cassette-record=all, or raise max_age"
    return Expiry("fail" if policy == "fail" else "warn", f"{base}; {fix}")
