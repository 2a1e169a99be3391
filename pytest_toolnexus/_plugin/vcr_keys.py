"""vcrpy's option names in a ``cassette_config`` fixture, read at run time.

``migrate`` rewrites a ``vcr_config`` that is a dict literal into native options. One that is
code (``return make_vcr_config()``) it can only rename, so the fixture still returns vcrpy's
keys: this module maps each of them to the native option it stands for, with a deprecation
warning that names that option, and refuses, all at once, the keys that have no mapping.
``_cli/migrate_options.py`` reads the same tables, so both paths translate alike.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pytest_toolnexus._store.cassette import Interaction

from .choices import VCRPY_RECORD_MODES
from .vcr_redact import (
    FilterList,
    filter_headers,
    filter_post_data,
    filter_query,
    record_request_hook,
    record_response_hook,
)

__all__ = [
    "LOCALHOST",
    "MATCHER_ALIASES",
    "OUR_MATCHERS",
    "VCRPY_MATCH_ON",
    "VCRPY_RECORD_MODES",
    "VcrKeys",
    "VcrpyOptionWarning",
    "match_on_value",
    "translate",
]

VCRPY_MATCH_ON: Final = ("method", "scheme", "host", "port", "path", "query")
OUR_MATCHERS: Final = (*VCRPY_MATCH_ON, "body", "headers")
MATCHER_ALIASES: Final = {
    "uri": ("scheme", "host", "port", "path", "query"),
    "url": ("scheme", "host", "port", "path", "query"),
    "raw_body": ("body",),
}
LOCALHOST: Final = ("localhost", "127.0.0.1", "0.0.0.0", "::1")

_DROPPED: Final = {
    "decode_compressed_response": "cassettes always store bodies decoded; nothing replaces it",
    "serializer": "cassettes are msgpack (read them as text with `pytest-toolnexus show`); "
    "nothing replaces it",
    "cassette_library_dir": "cassettes live under --cassette-dir (the cassette_dir ini key), "
    "where migrate put them",
}


class VcrpyOptionWarning(DeprecationWarning):
    """A ``cassette_config`` key is vcrpy's; it works, and the message names the native
    option that replaces it."""


def match_on_value(matchers: Iterable[str]) -> tuple[str | list[str] | None, list[str]]:
    """Our ``match_on`` for vcrpy matcher names, and the names it cannot take."""
    chosen: set[str] = set()
    lost = []
    for name in matchers:
        if name in OUR_MATCHERS:
            chosen.add(name)
        elif name in MATCHER_ALIASES:
            chosen.update(MATCHER_ALIASES[name])
        else:
            lost.append(str(name))
    if chosen == set(VCRPY_MATCH_ON):
        return "vcrpy", lost
    return [m for m in OUR_MATCHERS if m in chosen] or None, lost


@dataclass
class VcrKeys:
    """A ``cassette_config`` with vcrpy's keys translated: ``values`` holds native options,
    ``redact`` the filters and callbacks as one redact step (None when there are none), and
    ``renamed`` what each vcrpy key became, for the deprecation warning."""

    values: dict[str, Any] = field(default_factory=dict)
    redact: Callable[[Interaction], Interaction | None] | None = None
    renamed: dict[str, str] = field(default_factory=dict)

    def warn(self, where: str, seen: set[str]) -> None:
        """One :class:`VcrpyOptionWarning` per key not already in ``seen`` (a run warns once
        per key, not once per test)."""
        for key, native in self.renamed.items():
            if key in seen:
                continue
            seen.add(key)
            warnings.warn(
                VcrpyOptionWarning(f"{where}: {key!r} is vcrpy's option; {native}"),
                stacklevel=2,
            )


def _hosts(key: str, value: Any) -> list[str] | str:
    hosts = value.split(",") if isinstance(value, str) else value
    if not isinstance(hosts, Iterable) or not all(isinstance(h, str) for h in hosts):
        return f"{key}={value!r} is not a list of host names"
    return [h.strip() for h in hosts if h.strip()]


def _filters(key: str, value: Any) -> FilterList | str:
    if isinstance(value, str) or not isinstance(value, Iterable):
        return f"{key}={value!r} is not a list of names or (name, replacement) pairs"
    pairs: FilterList = []
    for entry in value:
        if isinstance(entry, str):
            pairs.append((entry, None))
        elif isinstance(entry, tuple | list) and len(entry) == 2 and isinstance(entry[0], str):
            pairs.append((entry[0], entry[1]))
        else:
            return f"{key}: {entry!r} is not a name or a (name, replacement) pair"
    return pairs


def _vcrpy_matchers(value: Any) -> bool:
    """Whether a ``match_on`` list names matchers that are not native parts: vcrpy's own
    (``uri``, ``raw_body``), or custom ones, which are then reported with the rest."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        return False
    return any(name not in OUR_MATCHERS for name in value)


def translate(values: Mapping[str, Any], native: Iterable[str], where: str) -> VcrKeys:
    """``values`` with every vcrpy key replaced by native options. ``native`` names the
    options that pass as they are. Raises ``TypeError`` listing every key that is neither;
    ``where`` names the layer in it."""
    known = frozenset(native)
    out = VcrKeys()
    steps: list[Callable[[Interaction], Interaction | None]] = []
    problems: list[str] = []
    hosts: list[str] = []
    ignored_query: list[str] = []
    ignored_body: list[str] = []

    def rename(key: str, native_key: str, value: Any, why: str = "") -> None:
        out.values[native_key] = value
        out.renamed[key] = f"use {native_key}={value!r} instead" + (f" ({why})" if why else "")

    for key, value in values.items():
        if key in known and not (key == "match_on" and _vcrpy_matchers(value)):
            out.values[key] = value
        elif key == "record_mode":
            if value not in VCRPY_RECORD_MODES:
                problems.append(f"record_mode={value!r} is not a vcrpy record mode")
            else:
                rename(key, "record", VCRPY_RECORD_MODES[value])
        elif key == "match_on":
            if isinstance(value, str) or not isinstance(value, Iterable):
                problems.append(f"match_on={value!r} is not a list of matcher names")
                continue
            matchers, lost = match_on_value(value)
            if lost:
                problems.append(
                    f"match_on matcher(s) {lost!r} have no equivalent; decide in a "
                    "pytest_toolnexus_match hook"
                )
            elif matchers is not None:
                rename(key, "match_on", matchers)
        elif key in ("allow_playback_repeats", "record_on_exception"):
            native_key = "allow_repeats" if key == "allow_playback_repeats" else "record_on_error"
            rename(key, native_key, value)
        elif key in _DROPPED:
            out.renamed[key] = f"it is ignored: {_DROPPED[key]}"
        elif key == "ignore_localhost":
            if value is True:
                hosts.extend(LOCALHOST)
                out.renamed[key] = f"use allow_hosts={list(LOCALHOST)!r} instead"
            elif value is False:
                out.renamed[key] = "ignore_localhost=False is the default; drop it"
            else:
                problems.append(f"ignore_localhost={value!r} is not True or False")
        elif key == "ignore_hosts":
            found = _hosts(key, value)
            if isinstance(found, str):
                problems.append(found)
            else:
                hosts.extend(found)
                out.renamed[key] = f"use allow_hosts={found!r} instead"
        elif key in ("filter_headers", "filter_query_parameters", "filter_post_data_parameters"):
            pairs = _filters(key, value)
            if isinstance(pairs, str):
                problems.append(pairs)
                continue
            make = {
                "filter_headers": filter_headers,
                "filter_query_parameters": filter_query,
                "filter_post_data_parameters": filter_post_data,
            }[key]
            steps.append(make(pairs))
            # vcrpy filtered the request it matched as well as the one it recorded: what it
            # removes is left out of the match here.
            names = [name for name, _ in pairs]
            if key == "filter_query_parameters":
                ignored_query.extend(names)
            elif key == "filter_post_data_parameters":
                ignored_body.extend(names)
            out.renamed[key] = "write a pytest_toolnexus_redact hook instead (docs/pytest.md#hooks)"
        elif key in ("before_record_request", "before_record_response", "before_record"):
            if not callable(value):
                problems.append(f"{key}={value!r} is not callable")
                continue
            is_response = key == "before_record_response"
            steps.append(record_response_hook(value) if is_response else record_request_hook(value))
            out.renamed[key] = (
                "write a pytest_toolnexus_redact hook instead: it gets each recorded "
                "Interaction (docs/pytest.md#hooks)"
            )
        else:
            problems.append(f"{key!r} is not an option (native or vcrpy's)")
    if problems:
        listed = "\n  - ".join(problems)
        raise TypeError(
            f"{where}: {len(problems)} cassette option(s) cannot be used:\n  - {listed}\n"
            f"the options are {', '.join(sorted(known))}, and vcrpy's record_mode, match_on, "
            "allow_playback_repeats, record_on_exception, ignore_localhost, ignore_hosts, "
            "filter_headers, filter_query_parameters, filter_post_data_parameters, "
            "before_record_request, before_record_response, decode_compressed_response, "
            "serializer and cassette_library_dir"
        )
    for option, added in (
        ("allow_hosts", hosts),
        ("ignore_query", ignored_query),
        ("ignore_body", ignored_body),
    ):
        if added:
            given = out.values.get(option) or ()
            given = [given] if isinstance(given, str) else list(given)
            out.values[option] = [*given, *(a for a in added if a not in given)]
    if steps:
        out.redact = _chain(steps)
    if out.renamed and "match_on" not in out.values:
        # A config of vcrpy's keys is a vcrpy suite's: match as vcrpy did (never the body),
        # as migrate writes into each config it can rewrite.
        out.values["match_on"] = "vcrpy"
        out.renamed["match_on (not given)"] = (
            "match_on='vcrpy' is used, as vcrpy matched; give match_on to choose"
        )
    return out


def _chain(
    steps: list[Callable[[Interaction], Interaction | None]],
) -> Callable[[Interaction], Interaction | None]:
    def redact(interaction: Interaction) -> Interaction | None:
        current: Interaction | None = interaction
        for step in steps:
            if current is None:
                return None
            current = step(current)
        return current

    return redact
