"""Redaction applied before anything is written: credentials never reach a cassette."""

from __future__ import annotations

import functools
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ._headers import Headers

__all__ = [
    "ACCOUNT_KEYS",
    "CREDENTIAL_HEADERS",
    "CREDENTIAL_QUERY_PARAMS",
    "REDACTED",
    "mask_keys",
    "mask_value",
    "redact_headers",
    "redact_url",
]

REDACTED: Final = "REDACTED"

CREDENTIAL_HEADERS: Final = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
        "set-cookie",
        "openai-organization",
        "openai-project",
        "anthropic-organization-id",
        "x-amz-security-token",
        "x-auth-token",
        "x-access-token",
        "ocp-apim-subscription-key",
    }
)
"""Header names (lower case) whose values are masked before a write."""

CREDENTIAL_QUERY_PARAMS: Final = frozenset(
    {
        "key",
        "api_key",
        "apikey",
        "api-key",
        "access_token",
        "token",
        "auth",
        "client_secret",
        "sig",
        "signature",
        "x-goog-api-key",
        # AWS SigV4 in the query string (a presigned URL): the signature, the key id it was
        # made with, and the session token.
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
    }
)
"""Query parameter names (lower case) whose values are masked before a write, and whose values
matching ignores, so a redacted URL still matches the live one."""


def redact_headers(headers: Headers) -> Headers:
    """A copy with every credential header's value replaced by ``REDACTED``."""
    if not any(name.lower() in CREDENTIAL_HEADERS for name in headers):
        return headers
    return Headers(
        [
            (name, REDACTED if name.lower() in CREDENTIAL_HEADERS else value)
            for name, value in headers.multi_items()
        ]
    )


@functools.lru_cache(maxsize=4096)
def redact_url(url: str) -> str:
    """The URL with the password of its userinfo (``user:password@host``) and the value of
    every credential query parameter replaced by ``REDACTED``."""
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
    needed masking, so the common case allocates nothing.
    """
    if isinstance(value, dict):
        changed = False
        out: dict[str, Any] = {}
        for key, item in value.items():
            masked = mask_value(item) if key in keys else mask_keys(item, keys)
            changed = changed or masked is not item
            out[key] = masked
        return out if changed else value
    if isinstance(value, list):
        items = [mask_keys(item, keys) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items
        return value
    return value
