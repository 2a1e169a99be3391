"""Redaction applied before anything is written: credentials never reach a cassette."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pytest_toolnexus._seam.headers import Headers

from .mask import CREDENTIAL_HEADERS, CREDENTIAL_QUERY_PARAMS, HEADER_TOKEN

__all__ = [
    "ACCOUNT_KEYS",
    "CREDENTIAL_HEADERS",
    "CREDENTIAL_QUERY_PARAMS",
    "REDACTED",
    "deep_mask_keys",
    "mask_keys",
    "mask_value",
    "redact_headers",
    "redact_url",
]

# A tuple made once: an ``X | Y`` written in an isinstance call builds a union at every call.
_CONTAINERS: Final = (dict, list)

REDACTED: Final = "REDACTED"


def redact_headers(headers: Headers) -> Headers:
    """A copy with every credential header's value replaced by ``REDACTED``, and every
    bearer token or JSON Web Token inside any other header's value too (:data:`HEADER_TOKEN`:
    ``Sec-WebSocket-Protocol: base64url.bearer.authorization.k8s.io.REDACTED``, and the key
    OpenAI's Realtime API takes there: ``openai-insecure-api-key.REDACTED``)."""
    pairs = headers.multi_items()
    if not any(
        name.lower() in CREDENTIAL_HEADERS or _may_hold_token(value) for name, value in pairs
    ):
        return headers
    return Headers(
        [
            (name, REDACTED if name.lower() in CREDENTIAL_HEADERS else _tokens_masked(value))
            for name, value in pairs
        ]
    )


_OFFERED: Final = re.compile("insecure-api-key", re.IGNORECASE)


def _may_hold_token(value: str) -> bool:
    # A cheap test first: most headers hold no token, and this runs for every request.
    return (
        "earer" in value
        or "EARER" in value
        or "eyJ" in value
        or "ZXlK" in value
        or _OFFERED.search(value) is not None
    ) and HEADER_TOKEN.search(value) is not None


def _tokens_masked(value: str) -> str:
    if not _may_hold_token(value):
        return value
    return HEADER_TOKEN.sub(
        lambda m: f"{m.group('keep') or m.group('dotted') or m.group('offered') or ''}{REDACTED}",
        value,
    )


@functools.lru_cache(maxsize=4096)
def redact_url(url: str) -> str:
    """The URL with the password of its userinfo (``user:password@host``) and the value of
    every credential query parameter replaced by ``REDACTED``."""
    if "@" not in url and "?" not in url and "[" not in url:
        # No userinfo, no query, no IPv6 literal that urlsplit would refuse when broken:
        # nothing to redact or to refuse (the usual API URL), so nothing is parsed.
        return url
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    if at and colon:
        parts = parts._replace(netloc=f"{user}:{REDACTED}@{hostport}")
    pairs = parse_qsl(parts.query, keep_blank_values=True) if parts.query else []
    if not any(name.lower() in CREDENTIAL_QUERY_PARAMS for name, _ in pairs):
        return urlunsplit(parts) if at and colon else url
    masked = [
        (name, REDACTED if name.lower() in CREDENTIAL_QUERY_PARAMS else value)
        for name, value in pairs
    ]
    return urlunsplit(parts._replace(query=urlencode(masked)))


ACCOUNT_KEYS: Final = frozenset({"user_id", "account_id", "organization", "org_id"})
"""Body keys (ADR 0027) whose values identify an account: masked at any depth, shape kept."""


def mask_value(value: Any) -> Any:
    """The placeholder for a masked value, of the same JSON type where that means anything."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    if value is None:
        return None
    return REDACTED


def mask_keys(value: Any, keys: frozenset[str] = ACCOUNT_KEYS) -> Any:
    """A copy of a JSON value with the value of every key in ``keys`` masked, at any depth.

    Containers under a masked key are masked whole. Returns ``value`` itself when nothing
    needed masking, so the common case allocates nothing: a container is copied only when
    something in it changes.
    """
    if isinstance(value, dict):
        out: dict[str, Any] | None = None
        for key, item in value.items():
            if key in keys:
                masked = mask_value(item)
            elif isinstance(item, _CONTAINERS):
                masked = mask_keys(item, keys)
            else:
                continue  # a scalar under another key stays as it is
            if masked is not item:
                if out is None:
                    out = dict(value)
                out[key] = masked
        return value if out is None else out
    if isinstance(value, list):
        items: list[Any] | None = None
        for index, item in enumerate(value):
            if not isinstance(item, _CONTAINERS):
                continue
            masked = mask_keys(item, keys)
            if masked is not item:
                if items is None:
                    items = list(value)
                items[index] = masked
        return value if items is None else items
    return value


class _Frame:
    """One container being masked by :func:`deep_mask_keys`: what is left of it, and what
    has been masked of it so far."""

    __slots__ = ("changed", "container", "is_dict", "items", "out", "pending")

    def __init__(self, container: dict[Any, Any] | list[Any]) -> None:
        self.container = container
        self.is_dict = isinstance(container, dict)
        self.items: Iterator[tuple[Any, Any]] = (
            iter(container.items()) if isinstance(container, dict) else iter(enumerate(container))
        )
        self.out: list[tuple[Any, Any]] = []
        self.changed = False
        self.pending: tuple[Any, Any] = (None, None)

    def done(self) -> Any:
        if not self.changed:
            return self.container
        return dict(self.out) if self.is_dict else [item for _, item in self.out]


def deep_mask_keys(value: Any, keys: frozenset[str] = ACCOUNT_KEYS) -> Any:
    """:func:`mask_keys` for a value nested at any depth, deeper than Python's recursion
    limit included (a cassette written by hand, or by another tool, can hold one)."""
    try:
        return mask_keys(value, keys)
    except RecursionError:
        pass
    # The same walk with a stack of its own, slower, so only for what recursion cannot reach.
    stack = [_Frame(value)]
    while True:
        frame = stack[-1]
        child: dict[Any, Any] | list[Any] | None = None
        for key, item in frame.items:
            if frame.is_dict and key in keys:
                masked = mask_value(item)
            elif isinstance(item, _CONTAINERS):
                frame.pending = (key, item)
                child = item
                break
            else:
                masked = item
            frame.changed = frame.changed or masked is not item
            frame.out.append((key, masked))
        if child is not None:
            stack.append(_Frame(child))
            continue
        stack.pop()
        result = frame.done()
        if not stack:
            return result
        parent = stack[-1]
        key, item = parent.pending
        parent.changed = parent.changed or result is not item
        parent.out.append((key, result))
