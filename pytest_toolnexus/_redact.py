"""Redaction applied before anything is written: credentials never reach a cassette."""

from __future__ import annotations

from typing import Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ._headers import Headers

__all__ = [
    "CREDENTIAL_HEADERS",
    "CREDENTIAL_QUERY_PARAMS",
    "REDACTED",
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


def redact_url(url: str) -> str:
    """The URL with every credential query parameter's value replaced by ``REDACTED``."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if not any(name.lower() in CREDENTIAL_QUERY_PARAMS for name, _ in pairs):
        return url
    masked = [
        (name, REDACTED if name.lower() in CREDENTIAL_QUERY_PARAMS else value)
        for name, value in pairs
    ]
    return urlunsplit(parts._replace(query=urlencode(masked)))
