"""What a secret looks like, and masking it in text: the patterns of secret-shaped strings,
the rule for credential-like environment variable names, and :func:`masked_repr`, which makes
a type's ``repr`` mask both, so that no frame pytest prints (``-l``) shows a secret that the
scan would refuse."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Final, TypeVar

__all__ = [
    "CREDENTIAL_HEADERS",
    "CREDENTIAL_QUERY_PARAMS",
    "HEADER_TOKEN",
    "credential_environment",
    "is_credential_name",
    "mask_text",
    "masked_repr",
]


@functools.cache
def _patterns() -> tuple[re.Pattern[str], ...]:
    """What a secret looks like (:data:`.rules.RULES`), compiled when text is first masked: a
    replayed test that masks nothing never compiles the rules."""
    from .rules import RULES

    return tuple(pattern for _, _, _, pattern in RULES)


_ENV_NAME: Final = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|SECRET|TOKEN|PASSWORD|PASSWD|PASS|PWD|CREDENTIALS?)(?:_|$)",
    re.IGNORECASE,
)
"""A credential-like environment variable name: one whose ``_``-separated words include
``KEY``, ``API_KEY``/``APIKEY``, ``SECRET``, ``TOKEN``, ``PASSWORD``, ``PASSWD``, ``PASS``,
``PWD`` or ``CREDENTIAL(S)`` (``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``,
``GITHUB_TOKEN``, ``DB_PASSWORD``, ``GOOGLE_APPLICATION_CREDENTIALS``). ``PWD`` alone, the
shell's working directory, is not one: see :data:`_NOT_CREDENTIALS`."""

_NOT_CREDENTIALS: Final = frozenset({"PWD", "OLDPWD"})
"""Names that match the word rule but hold no secret."""
_MIN_ENV_VALUE: Final = 8


def is_credential_name(name: str) -> bool:
    """Whether an environment variable of this name is treated as holding a credential."""
    return name.upper() not in _NOT_CREDENTIALS and _ENV_NAME.search(name) is not None


def credential_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The credential-like variables of ``environ`` (``os.environ`` by default) whose values
    are long enough to look for."""
    env = os.environ if environ is None else environ
    return {
        name: value
        for name, value in env.items()
        if len(value) >= _MIN_ENV_VALUE and is_credential_name(name)
    }


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

HEADER_TOKEN: Final = re.compile(
    # A bearer scheme, spelt as a word (``Bearer <token>``) or inside a dotted name such as
    # Kubernetes' WebSocket subprotocol ``base64url.bearer.authorization.k8s.io.<token>``.
    r"(?P<keep>\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+)[A-Za-z0-9._~+/-]{16,}=*"
    r"|(?P<dotted>\b[Bb][Ee][Aa][Rr][Ee][Rr]\.(?:authorization\.k8s\.io\.)?)[A-Za-z0-9_-]{16,}=*"
    # The key a browser or Node client of OpenAI's Realtime API offers as a WebSocket
    # subprotocol, ``openai-insecure-api-key.<key>`` (an API key, or an ephemeral ``ek_`` one).
    r"|(?P<offered>\b(?i:openai-insecure-api-key)\.)[A-Za-z0-9_-]{8,}"
    # A JSON Web Token, plain or base64url-encoded once more (``eyJ`` reads ``ZXlK``).
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
    r"|\bZXlK[A-Za-z0-9_-]{24,}=*"
)
"""A token inside the value of any header, whatever its name: the part after ``keep`` is
masked before a write, as a credential header's whole value is; ``keep``, ``dotted`` or
``offered`` is the scheme, kept."""

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


_USERINFO: Final = re.compile(r"(://[^/@\s:'\"]*):[^/@\s'\"]*@")
_QUERY: Final = re.compile(
    r"([?&](?:" + "|".join(re.escape(n) for n in sorted(CREDENTIAL_QUERY_PARAMS)) + r")=)"
    r"[^&#\s'\"]+",
    re.IGNORECASE,
)


def mask_text(text: str) -> str:
    """``text`` with every secret-shaped string and every credential environment value in it
    replaced by ``[secret]``."""
    for value in sorted(credential_environment().values(), key=len, reverse=True):
        if value in text:
            text = text.replace(value, "[secret]")
    for pattern in _patterns():
        text = pattern.sub("[secret]", text)
    text = _USERINFO.sub(r"\1:[secret]@", text)
    return _QUERY.sub(r"\1[secret]", text)


_T = TypeVar("_T", bound=type)


_inside: ContextVar[bool] = ContextVar("pytest_toolnexus_masking", default=False)


def masked_repr(cls: _T) -> _T:
    """Make ``cls``'s ``repr`` (a dataclass's generated one, say) mask secrets. Only the
    outermost masked repr masks: a cassette's repr masks its interactions' once, not once
    per level."""
    plain: Callable[[object], str] = cls.__dict__["__repr__"]

    def __repr__(self: object) -> str:
        if _inside.get():
            return plain(self)
        token = _inside.set(True)
        try:
            return mask_text(plain(self))
        finally:
            _inside.reset(token)

    __repr__.__qualname__ = f"{cls.__qualname__}.__repr__"
    cls.__repr__ = __repr__  # type: ignore[assignment]
    return cls
