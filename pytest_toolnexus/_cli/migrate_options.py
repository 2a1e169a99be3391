"""How one vcrpy / pytest-recording option (a ``vcr_config`` key or a ``@pytest.mark.vcr``
keyword) becomes pytest-toolnexus options, or why it cannot. docs/migrating.md has the table."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from pytest_toolnexus._plugin.vcr_keys import (
    LOCALHOST,
    VCRPY_MATCH_ON,
    VCRPY_RECORD_MODES,
    match_on_value,
)
from pytest_toolnexus._safety.redact import (
    ACCOUNT_KEYS,
    CREDENTIAL_HEADERS,
    CREDENTIAL_QUERY_PARAMS,
)

__all__ = ["VCRPY_MATCH_ON", "Mapped", "map_option", "match_on_value"]

_REGEX_CHARS: Final = frozenset("^$()[]{}+?\\|")
_HOOKS: Final = (
    "write a pytest_toolnexus_redact hook in conftest.py (it gets each recorded Interaction "
    "before it is kept or written), or pytest_toolnexus_before_write for the whole cassette; "
    "see docs/pytest.md#hooks"
)
_NO_EQUIVALENT: Final = {
    "cassette_library_dir": "cassettes live under --cassette-dir / the cassette_dir ini key",
    "path_transformer": "use the pytest_toolnexus_cassette_path hook",
    "func_path_generator": "use the pytest_toolnexus_cassette_path hook",
    "custom_patches": "pytest-toolnexus serves every httpx and httpx2 client; nothing to patch",
    "inject_cassette": "ask for the cassette fixture instead",
    "additional_matchers": "use the pytest_toolnexus_match hook",
    "filter_sensitive_data": _HOOKS,
    "before_save_interaction": _HOOKS,
    "after_load_interaction": "no load-time hook; change the cassette once with a script",
    "drop_unused_requests": "unused interactions are reported at teardown (unused='warn')",
    "filter_nested_post_data_parameters": "account keys are masked at any depth already",
    "skip_patchers": "pytest-toolnexus patches only httpx and httpx2",
}


@dataclass(frozen=True, slots=True)
class Mapped:
    """What one vcrpy option becomes: our options as (key, Python source) pairs, and a line
    for the report; ``untranslated`` when the option's meaning is lost."""

    pairs: tuple[tuple[str, str], ...] = ()
    note: str = ""
    untranslated: bool = False


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _Missing


class _Missing:
    """No literal value."""


def _names(value: Any) -> list[str] | None:
    """The names in a vcrpy filter list: strings, or (name, replacement) pairs."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        return None
    names = []
    for entry in value:
        if isinstance(entry, str):
            names.append(entry)
        elif isinstance(entry, tuple | list) and entry and isinstance(entry[0], str):
            names.append(entry[0])
        else:
            return None
    return names


def _filters(key: str, value: Any, covered: frozenset[str], what: str) -> Mapped:
    names = _names(value)
    if names is None:
        return Mapped(note=f"{key} is not a literal list; {_HOOKS}", untranslated=True)
    extra = [n for n in names if n.lower() not in covered]
    if not extra:
        return Mapped(note=f"{key} {names!r} dropped: {what} are redacted by default")
    return Mapped(
        note=f"{key} {extra!r}: not redacted by default (only {what} are); {_HOOKS}",
        untranslated=True,
    )


def map_option(key: str, node: ast.expr, text: str) -> Mapped:
    """Translate option ``key`` whose value is the expression ``node`` (source ``text``)."""
    value = _literal(node)
    if key == "record_mode":
        if value not in VCRPY_RECORD_MODES:
            return Mapped(
                note=f"record_mode={text} is not a literal record mode", untranslated=True
            )
        ours = VCRPY_RECORD_MODES[value]
        note = ""
        if value == "rewrite":
            note = "record_mode 'rewrite' became record 'all' (the file is recorded afresh)"
        return Mapped((("record", _source(ours)),), note)
    if key == "match_on":
        if value is _Missing or isinstance(value, str) or not isinstance(value, Iterable):
            return Mapped(note=f"match_on={text} is not a literal list", untranslated=True)
        matchers, lost = match_on_value(value)
        pairs = () if matchers is None else (("match_on", _source(matchers)),)
        if not lost:
            return Mapped(pairs)
        return Mapped(
            pairs,
            f"match_on matcher(s) {lost!r} have no equivalent; decide in a "
            "pytest_toolnexus_match hook",
            True,
        )
    if key == "allow_playback_repeats":
        return Mapped((("allow_repeats", text),))
    if key in ("record_on_exception", "record_on_error"):
        return Mapped((("record_on_error", text),))
    if key == "decode_compressed_response":
        return Mapped(
            note="decode_compressed_response dropped: cassettes always store bodies decoded"
        )
    if key == "serializer":
        return Mapped(note="serializer dropped: cassettes are msgpack, read as text with `show`")
    if key == "filter_headers":
        return _filters(key, value, CREDENTIAL_HEADERS, "credential headers")
    if key == "filter_query_parameters":
        return _filters(key, value, CREDENTIAL_QUERY_PARAMS, "credential query parameters")
    if key == "filter_post_data_parameters":
        return _filters(key, value, ACCOUNT_KEYS, f"the account keys {sorted(ACCOUNT_KEYS)}")
    if key in ("before_record_request", "before_record_response", "before_record"):
        return Mapped(note=f"{key} is a vcrpy callback; {_HOOKS}", untranslated=True)
    if key == "ignore_localhost":
        if value is True:
            return Mapped((("allow_hosts", _source(list(LOCALHOST))),))
        if value is False:
            return Mapped(note="ignore_localhost=False dropped: it is the default")
        return Mapped(note=f"ignore_localhost={text} is not True or False", untranslated=True)
    if key in ("ignore_hosts", "allowed_hosts"):
        hosts = [value] if isinstance(value, str) and key == "allowed_hosts" else value
        hosts = hosts.split(",") if isinstance(hosts, str) else hosts
        if not isinstance(hosts, list | tuple) or not all(isinstance(h, str) for h in hosts):
            return Mapped(note=f"{key}={text} is not a literal list of hosts", untranslated=True)
        regexes = [h for h in hosts if _REGEX_CHARS & set(h)]
        if regexes:
            return Mapped(
                note=f"{key} {regexes!r} are regular expressions; allow_hosts takes host names "
                "and '*.suffix' wildcards",
                untranslated=True,
            )
        return Mapped((("allow_hosts", _source(list(hosts))),))
    if key in _NO_EQUIVALENT:
        return Mapped(note=f"{key} has no equivalent: {_NO_EQUIVALENT[key]}", untranslated=True)
    return Mapped(note=f"{key} is not a vcrpy option migrate knows", untranslated=True)


def _source(value: Any) -> str:
    """Python source for a literal, in double quotes (the house style)."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_source(v) for v in value) + "]"
    return repr(value)
