"""What a request that nothing recorded answers is told: the text of :class:`CassetteMissError`.

A miss message quotes the request (its URL redacted, its body masked), the cassette path and
the record mode; shows the nearest recorded request with a path-level diff, or says that the
same request was recorded and already played; and gives the fixes that apply. Every secret is
masked before anything is cut or printed, so the message is safe in logs and CI output.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pytest_toolnexus._safety.redact import redact_url
from pytest_toolnexus._seam.errors import CassetteMissError
from pytest_toolnexus._seam.transport import TransportRequest
from pytest_toolnexus._store.cassette import RecordedRequest

from .body_part import live_body
from .match import Index, MatchRules

if TYPE_CHECKING:
    from pytest_toolnexus._safety.secrets import SecretScanner

__all__ = ["body_closeness", "body_summary", "miss_error", "missing_error", "missing_message"]

_BODY_PREVIEW: Final = 240


def body_summary(request: TransportRequest, scanner: SecretScanner) -> str:
    """The request body for a miss message: masked whole, then cut, so a cut never leaves
    part of a secret that the mask would no longer recognise."""
    body = request.body
    if body is None:
        return "(no body)"
    if isinstance(body, bytes):
        size = len(body)
        full = repr(body)
    else:
        full = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str)
        size = len(full.encode())
    masked = scanner.mask(full)
    if len(masked) <= _BODY_PREVIEW:
        return masked
    return f"{masked[:_BODY_PREVIEW]} ... ({size} bytes in all)"


def _leaves(value: Any) -> Counter[tuple[Any, ...]]:
    """Every leaf of a JSON value with the path to it, as a multiset; a container's path is
    counted too, so that an empty list or object still says it is there."""
    found: Counter[tuple[Any, ...]] = Counter()
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            found[(*path, "{}")] += 1
            stack.extend(((*path, key), child) for key, child in item.items())
        elif isinstance(item, list):
            found[(*path, "[]")] += 1
            stack.extend(((*path, index), child) for index, child in enumerate(item))
        else:
            found[(*path, "=", json.dumps(item, default=str))] += 1
    return found


def body_closeness(
    rules: MatchRules, request: TransportRequest
) -> Callable[[RecordedRequest], float]:
    """How alike a recorded request's body is to ``request``'s, from 0 to 1: the share of
    (path, value) leaves the two JSON bodies have in common (so a conversation one turn longer
    is closer than another conversation), or of their leading bytes for other bodies. The sent
    body is walked on the first call only, and not at all when nothing asks."""
    sent: list[tuple[str, Any, Counter[tuple[Any, ...]]]] = []

    def closeness(recorded: RecordedRequest) -> float:
        if not sent:
            kind, value = rules.body.comparable(live_body(request))
            sent.append((kind, value, _leaves(value) if kind == "json" else Counter()))
        kind, body, sent_leaves = sent[0]
        other_kind, value = rules.body.comparable(recorded.body)
        if other_kind != kind:
            return 0.0
        if kind == "json":
            leaves = _leaves(value)
            shared = sum((leaves & sent_leaves).values())
            whole = sum(leaves.values()) + sum(sent_leaves.values()) - shared
            return shared / max(whole, 1)
        if not isinstance(value, bytes) or not isinstance(body, bytes):
            return 0.0
        common = 0
        for a, b in zip(value, body, strict=False):
            if a != b:
                break
            common += 1
        return common / max(len(value), len(body), 1)

    return closeness


def missing_message(path: Path, note: str | None) -> str:
    """Why a replay-only session cannot answer anything: its cassette file does not exist
    (or it is a symlink to a file that does not)."""
    missing = "does not exist"
    if os.path.islink(path):
        missing = f"is a symlink to {os.path.realpath(path)}, which does not exist"
    return (
        f"cassette {path} {missing}, and record mode 'none' only "
        "replays. Record it once with record mode 'once' (pytest: "
        "--cassette-record=once), then commit the file." + (f" {note}" if note else "")
    )


def missing_error(message: str, path: Path, request: TransportRequest) -> CassetteMissError:
    """The miss for the first request that needed the missing cassette ``message`` names."""
    return CassetteMissError(
        f"{message} (The first request that needed it: {request.method} "
        f"{redact_url(request.url)}.)",
        path=str(path),
    )


def miss_error(
    request: TransportRequest,
    *,
    path: Path,
    index: Index,
    record_mode: str,
    meta: Mapping[str, Any],
    note: str | None,
    scanner: SecretScanner,
) -> CassetteMissError:
    """The error for ``request``, which no unplayed interaction of ``index`` matches."""
    total = len(index.interactions)
    played = sum(index.played)
    lines = [
        f"No recorded interaction matches {request.method} {redact_url(request.url)}",
        "",
        f"  request body:  {body_summary(request, scanner)}",
        f"  cassette:      {path} ({total} interaction(s), {played} already played)",
        f"  record mode:   {record_mode}",
    ]
    used = index.already_played(request)
    if used:
        lines += [
            "",
            f"The same request was recorded as interaction #{used[-1]}, and it was already "
            "played: each recorded interaction plays once, so this request was sent more "
            "times than when the cassette was recorded.",
        ]
        fixes = [
            "record the cassette again if the extra request is intended "
            "(record mode 'all'; pytest: --cassette-record=all)",
            "or let a request replay more than once: allow_repeats=True",
        ]
    else:
        try:
            closeness = body_closeness(index.rules, request)
            nearest = index.nearest(request, limit=1, mask=scanner.mask, closeness=closeness)
            too_deep = False
        except RecursionError:
            # Matching compares a body of any depth a cassette holds (without recursion, or in
            # C), but the walks that say how two bodies differ recurse in Python (deepdiff):
            # the miss is still reported, without the diff.
            nearest, too_deep = [], True
        paths: tuple[str, ...] = ()
        query: tuple[str, ...] = ()
        if too_deep:
            lines += [
                "",
                "A body is nested too deep to diff within Python's recursion limit, so the "
                "recorded requests cannot be compared with it to show the nearest one.",
            ]
        elif nearest:
            best = nearest[0]
            query = best.query
            state = "already played" if best.played else "not yet played"
            lines += [
                "",
                f"Nearest recorded request: #{best.index} {best.request.method} "
                f"{best.request.url} ({state})",
            ]
            lines += [f"  {line}" for line in best.differences] or ["  (no difference?)"]
            paths = best.ignorable
        elif total == 0:
            lines += ["", "The cassette has no interactions."]
        fixes = [
            "if the request changed on purpose, record the new one: record mode 'new' "
            "(pytest: --cassette-record=new), or 'all' to record everything again",
        ]
        if paths:
            names = ", ".join(repr(p) for p in paths[:3])
            fixes.append(
                f"if those values change from run to run, ignore them: ignore_body=[{names}]"
            )
        if query:
            names = ", ".join(repr(q) for q in query[:3])
            fixes.append(f"if those query parameters do not matter: ignore_query=[{names}]")
        if paths and meta.get("converted_from") == "vcrpy":
            fixes.append(
                "this cassette was converted from vcrpy, whose default matching never "
                "compared bodies; to match as vcrpy did, use match_on='vcrpy'"
            )
    lines += ["", "How to fix:"] + [f"  - {fix}" for fix in fixes]
    if note:
        lines += ["", note]
    # The message quotes the request: keep any secret in it out of logs and CI output.
    return CassetteMissError(scanner.mask("\n".join(lines)), path=str(path))
