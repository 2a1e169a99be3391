"""The options of one test's cassette, read from where pytest keeps them: the ini file and the
command line (each read once per run), the ``cassette_config`` fixture (with vcrpy's keys
translated) and the test's markers, layered by :func:`~.settings.layer` in that order."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import pytest

from pytest_toolnexus._store.cassette import Interaction

from .settings import OPTION_NAMES, CassetteOptions, layer

__all__ = ["options_of"]


def _ini_options(config: pytest.Config) -> dict[str, Any]:
    return {
        "record": config.getini("cassette_record"),
        "timing": config.getini("cassette_timing"),
        "allow_hosts": config.getini("cassette_allow_hosts"),
        "unused": config.getini("cassette_unused"),
        "match_on": config.getini("cassette_match_on"),
        "record_on_error": config.getini("cassette_record_on_error"),
        "max_age": config.getini("cassette_max_age"),
        "on_expired": config.getini("cassette_on_expired"),
        "unserved": config.getini("cassette_unserved"),
    }


def _cli_options(config: pytest.Config) -> dict[str, Any]:
    """The options given on the command line; one not given (None) is left out."""
    hosts = config.getoption("cassette_allow_hosts")
    given = {
        "record": config.getoption("cassette_record"),
        "timing": config.getoption("cassette_timing"),
        "allow_hosts": hosts,
        "unused": config.getoption("cassette_unused"),
        "unserved": config.getoption("cassette_unserved"),
    }
    return {key: value for key, value in given.items() if value is not None}


# The ini file's layer and the command line's values, read once per run: neither changes.
_INI_LAYER: Final = pytest.StashKey[CassetteOptions]()
_CLI_VALUES: Final = pytest.StashKey[dict[str, Any]]()
_VCR_WARNED: Final = pytest.StashKey[set[str]]()
"""The vcrpy keys a run has warned of: each once, not once per test."""


def options_of(
    item: pytest.Item, config_fixture: Mapping[str, Any]
) -> tuple[CassetteOptions, Callable[[Interaction], Interaction | None] | None]:
    """The test's options, layered, and the redact step vcrpy's filters and callbacks in its
    ``cassette_config`` make (None without any)."""
    config = item.config
    try:
        options = config.stash.get(_INI_LAYER, None)
        if options is None:
            options = layer(CassetteOptions(), _ini_options(config), "the ini file")
            config.stash[_INI_LAYER] = options
        if not isinstance(config_fixture, Mapping):
            raise TypeError(
                "the cassette_config fixture must return a dict of cassette options (an "
                f"empty one for none), and it returned {type(config_fixture).__name__}"
            )
        redact = None
        if config_fixture:  # the fixture's default is empty: nothing to translate or layer
            # vcrpy's keys are read by their own module, imported for a config that has keys.
            from .vcr_keys import translate

            where = "the cassette_config fixture"
            vcr = translate(config_fixture, OPTION_NAMES, where)
            vcr.warn(where, config.stash.setdefault(_VCR_WARNED, set()))
            options = layer(options, vcr.values, where)
            redact = vcr.redact
        for marker in reversed(list(item.iter_markers("cassette"))):
            values = dict(marker.kwargs)
            if marker.args:
                if len(marker.args) > 1:
                    raise TypeError(
                        "@pytest.mark.cassette takes one positional argument, the cassette name"
                    )
                values["name"] = marker.args[0]
            options = layer(options, values, "@pytest.mark.cassette")
        cli = config.stash.get(_CLI_VALUES, None)
        if cli is None:
            cli = config.stash[_CLI_VALUES] = _cli_options(config)
        return layer(options, cli, "the command line"), redact
    except TypeError as exc:
        raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
