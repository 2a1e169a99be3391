"""The body part of a match: a JSON body by value, anything else by its bytes.

Key order and whitespace never matter in a JSON body; the body paths the user names
(``ignore_body``) and the values of account-identifier keys (masked in a cassette) are left
out. A miss is explained path by path (deepdiff), with the paths ``ignore_body`` could name.
The other parts, and what they share with this one, are in :mod:`.parts`.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from pytest_toolnexus._safety.redact import ACCOUNT_KEYS, deep_mask_keys
from pytest_toolnexus._seam.bodies import is_json_type
from pytest_toolnexus._seam.codings import decoded
from pytest_toolnexus._seam.transport import RequestBody, TransportRequest
from pytest_toolnexus._store.cassette import AnyBody, Body, EmptyBody, JsonBody
from pytest_toolnexus._store.streams import parse_json_text

__all__ = [
    "ANY_BODY",
    "UNMATCHED_BODY",
    "BodyPart",
    "BodyPath",
    "Comparable",
    "body_diff",
    "live_body",
    "masked_comparable",
    "parse_body_path",
]

PathPart: TypeAlias = str | int
BodyPath: TypeAlias = tuple[PathPart, ...]
"""A path into a JSON body; ``"*"`` stands for every key or index at that level."""

Comparable: TypeAlias = tuple[str, Any]
"""A body as compared: its kind (``"json"``, ``"raw"``, ``"any"``) and its value."""

ANY_BODY: Final[Comparable] = ("any", None)
"""The body key of a recorded request whose body is "any": it answers whatever body is sent."""

UNMATCHED_BODY: Final[Comparable] = ("unmatched", None)
"""The body key of every request when the body is not compared."""


_ROOT_PART = re.compile(r"\[(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"|(\d+)|(\*))\]")


def parse_body_path(spec: str) -> BodyPath:
    """Parse ``"messages.*.content"`` or deepdiff's ``"root['messages'][0]['content']"``.

    In the dotted form a part made of digits is a list index; ``*`` matches anything.
    """
    text = spec.strip()
    if not text:
        raise ValueError("an ignored body path cannot be empty")
    if text.startswith("root"):
        rest = text[4:]
        parts: list[PathPart] = []
        position = 0
        while position < len(rest):
            found = _ROOT_PART.match(rest, position)
            if found is None:
                raise ValueError(
                    f"cannot read body path {spec!r}: expected ['key'] or [index] at "
                    f"{rest[position:]!r}"
                )
            single, double, index, star = found.groups()
            if index is not None:
                parts.append(int(index))
            elif star is not None:
                parts.append("*")
            else:
                parts.append(single if single is not None else double)
            position = found.end()
        return tuple(parts)
    return tuple(int(p) if p.isdigit() else p for p in text.split("."))


def dotted(path: Sequence[PathPart]) -> str:
    """The dotted spelling of a path, as the ``ignore_body`` option takes it."""
    return ".".join(str(p) for p in path)


def _strip(value: Any, paths: Sequence[BodyPath]) -> Any:
    if not paths:
        return value
    here = [p for p in paths if len(p) == 1]
    deeper = [p for p in paths if len(p) > 1]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if any(p[0] in (key, "*") for p in here):
                continue
            sub = [p[1:] for p in deeper if p[0] in (key, "*")]
            out[key] = _strip(item, sub)
        return out
    if isinstance(value, list):
        result: list[Any] = []
        for position, item in enumerate(value):
            if any(p[0] in (position, "*") or p[0] == str(position) for p in here):
                continue
            sub = [p[1:] for p in deeper if p[0] in (position, "*") or p[0] == str(position)]
            result.append(_strip(item, sub))
        return result
    return value


def live_body(request: TransportRequest) -> RequestBody:
    """The body of a live request as the recorder stores it.

    A request that carries only ``content``, or JSON as bytes under a JSON content type, is
    recorded as parsed JSON; it must be compared the same way, or it would never match.
    """
    body = request.body
    if body is None and request.content:
        body = request.content
    if isinstance(body, bytes) and body and "content-encoding" in request.headers:
        body = decoded(request.headers, body)[1]  # stored decoded, so compared decoded
    if isinstance(body, bytes) and body and is_json_type(request.headers.get("content-type", "")):
        try:
            ok, value = parse_json_text(body.decode())
        except UnicodeDecodeError:
            ok, value = False, None
        if ok:
            parsed: RequestBody = value
            return parsed
    return body


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class BodyPart:
    """The body, semantically: JSON by value (key order and whitespace never matter, the
    ``ignored`` paths and the values of ``masked`` account keys left out), anything else by
    its bytes. ``compared=False`` answers any body."""

    compared: bool = True
    ignored: tuple[BodyPath, ...] = ()
    masked: frozenset[str] = ACCOUNT_KEYS

    def comparable(self, body: RequestBody | Body, *, mask: bool = True) -> Comparable:
        """The comparable form of a live or recorded body. ``mask=False`` skips masking
        account keys, for a body known not to hold any."""
        if isinstance(body, AnyBody):
            return ANY_BODY
        if isinstance(body, JsonBody):
            return "json", _strip(deep_mask_keys(body.value, self.masked), self.ignored)
        if isinstance(body, EmptyBody) or body is None or body == b"":
            return "raw", b""
        if isinstance(body, bytes):
            return "raw", body
        if isinstance(body, dict | list | str | int | float | bool):
            masked = deep_mask_keys(body, self.masked) if mask else body
            return "json", _strip(masked, self.ignored)
        return "raw", body.content()

    def key(self, body: RequestBody | Body, *, mask: bool = True) -> Comparable:
        if not self.compared:
            return UNMATCHED_BODY
        kind, value = self.comparable(body, mask=mask)
        return kind, _canonical(value) if kind == "json" else value

    def explain(
        self, recorded: Body, sent: TransportRequest, mask: Callable[[str], str] | None = None
    ) -> tuple[list[str], list[str]]:
        """Lines for each path where the bodies differ, and the dotted paths that
        ``ignore_body`` could name. ``mask`` is applied to every string of both bodies first."""
        if not self.compared:
            return [], []
        was, now = self.comparable(recorded), self.comparable(live_body(sent))
        if mask is not None:
            # Masked before the diff shortens anything: a shortened secret is no longer one the
            # mask would recognise.
            was, now = masked_comparable(was, mask), masked_comparable(now, mask)
        return body_diff(was, now)


def masked_comparable(comparable: Comparable, mask: Callable[[str], str]) -> Comparable:
    """``comparable`` with ``mask`` applied to every string in it (keys too)."""
    kind, value = comparable
    if kind == "raw" and isinstance(value, bytes):
        return kind, mask(value.decode("utf-8", "surrogateescape")).encode(
            "utf-8", "surrogateescape"
        )
    if kind != "json":
        return comparable

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return mask(item)
        if isinstance(item, dict):
            return {mask(k): walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    return kind, walk(value)


_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = 4
_short.maxdict = 4
_short.maxlevel = 2


def body_diff(
    recorded: Comparable, sent: Comparable, limit: int = 8
) -> tuple[list[str], list[str]]:
    """Path-level differences between two comparable bodies (deepdiff for JSON)."""
    (was_kind, was), (now_kind, now) = recorded, sent
    if was_kind != now_kind:
        return [f"body: recorded a {was_kind} body, sent a {now_kind} body"], []
    if was_kind == "raw":
        if was == now:
            return [], []
        at = next((i for i, (a, b) in enumerate(zip(was, now, strict=False)) if a != b), None)
        at = min(len(was), len(now)) if at is None else at
        return [
            f"body bytes differ from byte {at}: recorded {_short.repr(was[at : at + 40])}, "
            f"sent {_short.repr(now[at : at + 40])} ({len(was)} vs {len(now)} bytes)"
        ], []
    if _canonical(was) == _canonical(now):
        return [], []
    from deepdiff import DeepDiff  # imported on a miss only: it is slow to import

    diff = DeepDiff(was, now, verbose_level=2, ignore_order=False)
    lines: list[str] = []
    paths: list[str] = []
    for report_type, items in diff.tree.items():
        for item in items:
            path = item.path()
            parts = item.path(output_format="list")
            if report_type.endswith("_added"):
                lines.append(f"{path}: only in the sent request ({_short.repr(item.t2)})")
            elif report_type.endswith("_removed"):
                lines.append(f"{path}: only in the recording ({_short.repr(item.t1)})")
            else:
                lines.append(
                    f"{path}: recorded {_short.repr(item.t1)}, sent {_short.repr(item.t2)}"
                )
            if parts:
                paths.append(dotted(parts))
    lines.sort()
    extra = len(lines) - limit
    shown = lines[:limit]
    if extra > 0:
        shown.append(f"... and {extra} more difference{'s' if extra > 1 else ''}")
    return shown, sorted(set(paths))[:limit]
