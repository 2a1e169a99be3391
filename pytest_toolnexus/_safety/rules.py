"""The rule set of the secret scan: what a token of each well-known family looks like, and
which names mark a field as a credential.

Most rules are vendored from detect-secrets (https://github.com/Yelp/detect-secrets), version
1.5.0 as published on PyPI (``detect_secrets-1.5.0-py3-none-any.whl``), Copyright Yelp, Inc.,
licensed under the Apache License, Version 2.0; its text is in LICENSE-thirdparty at the root
of this repository. Each vendored rule names the plugin module it comes from, and its regular
expression is upstream's, unchanged (a plugin's list of patterns joined into one alternation)
except where a comment beside it says what was added.
detect-secrets itself is not a dependency: importing one of its plugins imports ``requests``
(``detect_secrets/plugins/base.py``, for verification), ``yaml`` and its settings machinery,
about 150 ms on this machine
(``python -X importtime -c "import detect_secrets.plugins.github_token"``), in a plugin that
loads in every pytest run.

Rules marked "ours" cover what detect-secrets 1.5.0 has no rule for (fine-grained GitHub
tokens, npm tokens outside an ``.npmrc`` line, an AWS secret access key without an
``aws...key = '...'`` beside it, the LLM providers' keys), each written to the token format
its issuer documents.

Not vendored, and why: the high-entropy string plugins (base64 audio, hashes and ids are
high-entropy too), ``ip_public``, ``basic_auth`` (a URL's password is always redacted),
``artifactory`` (its ``AP[0-9A-F]...`` matches ordinary capitalised words), and the IBM,
Cloudant and SoftLayer rules (they need the surrounding source line). The keyword plugin's
word list is vendored as :data:`CREDENTIAL_WORDS`, applied to names (a map key, a header
name, a form field), not to whole source lines.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "CREDENTIAL_WORDS",
    "FIELD_KIND",
    "KEYWORD_VALUE",
    "RULES",
    "is_credential_field",
    "is_opaque",
]

_DS: Final = "detect-secrets 1.5.0"

RULES: Final[tuple[tuple[str, str, tuple[str, ...], re.Pattern[str]], ...]] = (
    # (kind, provenance, needles, pattern): the kind is what a hit says; the first rule that
    # matches names it, so the more specific come first. A rule with needles is tried only on
    # a text that holds one of them (a plain substring search), which keeps the scan cheap.
    (
        "an Anthropic API key (sk-ant-...)",
        "ours",
        ("sk-ant-",),
        re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ),
    (
        "an OpenAI project key (sk-proj-...)",
        "ours",
        ("sk-proj-",),
        re.compile(r"sk-proj-[A-Za-z0-9_-]{20,}"),
    ),
    (
        "an OpenAI API key (sk-...T3BlbkFJ...)",
        f"{_DS}, plugins/openai.py",
        ("T3BlbkFJ",),
        re.compile(r"sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"),
    ),
    ("an OpenAI-style API key (sk-...)", "ours", ("sk-",), re.compile(r"\bsk-[A-Za-z0-9_-]{20,}")),
    ("a Google API key (AIza...)", "ours", ("AIza",), re.compile(r"AIza[0-9A-Za-z_-]{35}")),
    (
        "an AWS access key id",
        f"{_DS}, plugins/aws.py",
        (),
        # Upstream's pattern inside word boundaries (ours): without them it matches inside
        # base64 data, where zero bytes read "AAAA..." after an "ACCA".
        re.compile(r"\b(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}\b"),
    ),
    (
        "an AWS secret access key",
        f"{_DS}, plugins/aws.py",
        (),
        re.compile(
            r"aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?['\"]([0-9a-zA-Z/+]{40})['\"]",
            re.IGNORECASE,
        ),
    ),
    (
        "an AWS secret access key",
        "ours: 40 base64 characters standing alone, with an upper- and a lower-case letter "
        "and a digit (a hex digest has no two cases; a longer base64 run is not alone)",
        (),
        re.compile(
            r"(?<![A-Za-z0-9/+_.-])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])"
            r"(?=[A-Za-z0-9/+]{0,39}[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=_.-])"
        ),
    ),
    (
        "a JSON Web Token",
        "ours",
        ("eyJ",),
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
    (
        "a GitHub token (ghp_, gho_, ghu_, ghs_, ghr_)",
        f"{_DS}, plugins/github_token.py",
        ("gh",),
        re.compile(r"(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}"),
    ),
    (
        "a GitHub fine-grained token (github_pat_...)",
        "ours",
        ("github_pat_",),
        re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    ),
    (
        "a GitLab token (glpat-, ...)",
        f"{_DS}, plugins/gitlab_token.py",
        ("gl", "GR1348941"),
        re.compile(
            r"(glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\-]{20,50}(?!\w)"
            r"|GR1348941[A-Za-z0-9_\-]{20,50}(?!\w)"
            r"|glcbt-([0-9a-fA-F]{2}_)?[A-Za-z0-9_\-]{20,50}(?!\w)"
            r"|glimt-[A-Za-z0-9_\-]{25}(?!\w)"
            r"|glptt-[A-Za-z0-9_\-]{40}(?!\w)"
            r"|glagent-[A-Za-z0-9_\-]{50,1024}(?!\w)"
            r"|gloas-[A-Za-z0-9_\-]{64}(?!\w)"
        ),
    ),
    (
        "a Slack token (xoxb-, xoxp-, ...)",
        f"{_DS}, plugins/slack.py",
        (),
        re.compile(r"xox(?:a|b|p|o|s|r)-(?:\d+-)+[a-z0-9]+", re.IGNORECASE),
    ),
    (
        "a Slack webhook URL",
        f"{_DS}, plugins/slack.py",
        ("hooks.slack.com",),
        re.compile(
            r"https://hooks\.slack\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+"
        ),
    ),
    (
        "a Stripe live key (sk_live_, rk_live_)",
        f"{_DS}, plugins/stripe.py",
        ("k_live_",),
        re.compile(r"(?:r|s)k_live_[0-9a-zA-Z]{24}"),
    ),
    (
        "an npm token",
        f"{_DS}, plugins/npm.py",
        # The literal every match holds: the token may be a UUID, with no npm_ (ours).
        ("/:_authToken=",),
        re.compile(r"\/\/.+\/:_authToken=\s*((npm_.+)|([A-Fa-f0-9-]{36})).*"),
    ),
    ("an npm token", "ours", ("npm_",), re.compile(r"\bnpm_[A-Za-z0-9]{36}(?![A-Za-z0-9])")),
    (
        "a PyPI token (pypi-...)",
        f"{_DS}, plugins/pypi_token.py",
        ("pypi-",),
        re.compile(
            r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9-_]{70,}|pypi-AgENdGVzdC5weXBpLm9yZw[A-Za-z0-9-_]{70,}"
        ),
    ),
    (
        "a private key block",
        f"{_DS}, plugins/private_key.py",
        ("PRIVATE KEY", "PuTTY"),
        re.compile(
            r"BEGIN DSA PRIVATE KEY|BEGIN EC PRIVATE KEY|BEGIN OPENSSH PRIVATE KEY"
            r"|BEGIN PGP PRIVATE KEY BLOCK|BEGIN PRIVATE KEY|BEGIN RSA PRIVATE KEY"
            r"|BEGIN SSH2 ENCRYPTED PRIVATE KEY|PuTTY-User-Key-File-2"
        ),
    ),
    (
        "a private key block",
        "ours",
        ("PRIVATE KEY",),
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"),
    ),
    (
        "an Azure storage account key",
        f"{_DS}, plugins/azure_storage_key.py",
        ("AccountKey=",),
        re.compile(r"AccountKey=[a-zA-Z0-9+\/=]{88}"),
    ),
    (
        "a Discord bot token",
        f"{_DS}, plugins/discord.py",
        (".",),
        re.compile(r"[MNO][a-zA-Z\d_-]{23,25}\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}"),
    ),
    (
        "a Mailchimp API key",
        f"{_DS}, plugins/mailchimp.py",
        ("-us",),
        re.compile(r"[0-9a-z]{32}-us[0-9]{1,2}"),
    ),
    (
        "a SendGrid API key",
        f"{_DS}, plugins/sendgrid.py",
        ("SG.",),
        re.compile(r"SG\.[a-zA-Z0-9_-]{22}\.[a-zA-Z0-9_-]{43}"),
    ),
    (
        "a Square OAuth secret",
        f"{_DS}, plugins/square_oauth.py",
        ("sq0csp-",),
        re.compile(r"sq0csp-[0-9A-Za-z\\\-_]{43}"),
    ),
    (
        "a Telegram bot token",
        f"{_DS}, plugins/telegram_token.py",
        (":",),
        re.compile(r"\d{8,10}:[0-9A-Za-z_-]{35}"),
    ),
    (
        "a Twilio key",
        f"{_DS}, plugins/twilio.py",
        (),
        # Upstream's patterns inside word boundaries (ours), for the same reason.
        re.compile(r"\b(?:AC[a-z0-9]{32}|SK[a-z0-9]{32})\b"),
    ),
    (
        "a Kubernetes bearer token",
        "ours (the WebSocket subprotocol form)",
        ("bearer.authorization.k8s.io.",),
        re.compile(r"bearer\.authorization\.k8s\.io\.[A-Za-z0-9_-]{16,}"),
    ),
    ("a bearer token", "ours", ("earer",), re.compile(r"\b[Bb]earer\s+[A-Za-z0-9._~+/-]{16,}=*")),
)
"""The rules, most specific first: a description, where the rule comes from, the literals
one of which a match must hold (none: always tried), the pattern."""

CREDENTIAL_WORDS: Final = (
    # detect-secrets 1.5.0, plugins/keyword.py, DENYLIST (without the regex's ``_?``: names
    # are compared with ``_`` and ``-`` taken out and in lower case)
    "apikey",
    "authkey",
    "servicekey",
    "accountkey",
    "dbkey",
    "databasekey",
    "privkey",
    "privatekey",
    "clientkey",
    "dbpass",
    "databasepass",
    "keypass",
    "password",
    "passwd",
    "pwd",
    "secret",
    "contraseña",
    "contrasena",
    # ours: the OAuth and session token names (refresh_token, access_token, id_token, ...)
    "refreshtoken",
    "accesstoken",
    "idtoken",
    "authtoken",
    "apitoken",
    "sessiontoken",
    "securitytoken",
    "bearertoken",
    "oauthtoken",
    "secretkey",
)
"""A name is a credential's when, lower case and without ``_`` and ``-``, it ends with one of
these (``clientSecret``, ``refresh_token``, ``DB_PASSWORD``); a bare ``token`` is not (a
log-probability's ``token`` is a piece of text), nor ``password_hint``."""

_NAME_JUNK: Final = re.compile(r"[_\-.\s]")
_PLACEHOLDER: Final = re.compile(
    r"^(?:[<{$%\[*(]|.*(?:REDACTED|\[secret\]|example|xxxx|\*\*\*|changeme|placeholder))",
    re.IGNORECASE,
)
_MIN_OPAQUE: Final = 8


def is_credential_field(name: str) -> bool:
    """Whether a field, header or form field of this name holds a credential."""
    if len(name) > 64:
        return False
    folded = _NAME_JUNK.sub("", name.lower())
    return folded.endswith(CREDENTIAL_WORDS)


def is_opaque(value: str) -> bool:
    """Whether a credential field's value looks like a real one: 8 characters or more, no
    space, a letter and a digit, and no placeholder (``REDACTED``, ``<token>``, ``${VAR}``,
    ``***``, ``example``)."""
    return (
        len(value) >= _MIN_OPAQUE
        and not any(c.isspace() for c in value)
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and _PLACEHOLDER.match(value) is None
    )


FIELD_KIND: Final = "an opaque value in a credential-named field"

KEYWORD_VALUE: Final = re.compile(
    # A credential word, then what binds a value to it in text: ``password=...``,
    # ``"clientSecret": "..."``, ``refresh_token: ...``, or a multipart form field's
    # ``name="password"`` with the value after its blank line. The rest of the name (before
    # the word) is read backwards by the scanner, so that no pattern starts with a greedy
    # class (which would make a long run of letters quadratic).
    r"(?:password|passwd|pwd|secret|token|key|pass|contrase[ñn]a)"
    r"(?:\"[^\S\r\n]*(?:;[^\r\n]*)?\r?\n(?:[^\r\n]+\r?\n)*\r?\n|[\"']?[^\S\r\n]*(?:=>|[:=])[^\S\r\n]*[\"']?)"
    r"(?P<value>[^\s\"'&,;<>]{8,})",
    re.IGNORECASE,
)
"""A credential word bound to a value in text; the scanner checks the whole name with
:func:`is_credential_field` and the value with :func:`is_opaque`."""
