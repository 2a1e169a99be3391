"""A pytest plugin that ``migrate`` loads into a ``pytest --collect-only`` of the suite.

For every collected test it writes down what pytest-recording would have used (the cassette
folder, the default cassette name, the names on its ``vcr`` markers) and where this plugin
will look for the test's cassette, as JSON lines in the file named by the environment variable
``TOOLNEXUS_MIGRATE_PROBE``. Nothing runs: no test body, no fixture except
``vcr_cassette_dir`` and ``default_cassette_name`` when the suite overrides them, and those
are called with the test's own request only when they ask for nothing else.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from pathlib import Path
from typing import Any, Final

import pytest

__all__ = ["PROBE_ENV", "pytest_collection_finish", "pytest_configure"]

PROBE_ENV: Final = "TOOLNEXUS_MIGRATE_PROBE"
# pytest-recording replaces these characters with "-" in its default cassette names.
_FORBIDDEN: Final = "<>?%*:|\"'/\\"
_MAX_FILENAME: Final = 255


def pytest_configure(config: pytest.Config) -> None:
    # The suite may run without pytest-recording (-p no:recording, or uninstalled): its markers
    # must still collect under --strict-markers.
    for name in ("vcr", "default_cassette", "block_network", "allowed_hosts"):
        config.addinivalue_line("markers", f"{name}: pytest-recording (seen by migrate)")


def _recording_default_name(item: pytest.Function) -> str:
    marker = item.get_closest_marker("default_cassette")
    if marker is not None and marker.args:
        return str(marker.args[0])
    name = f"{item.cls.__name__}.{item.name}" if item.cls is not None else item.name
    for char in _FORBIDDEN:
        name = name.replace(char, "-")
    return name


def _evaluate(item: pytest.Function, argname: str) -> tuple[Any, str | None]:
    """The value of fixture ``argname`` for ``item`` when the suite overrides it, else None;
    and a sentence when it cannot be computed without running the suite's fixtures."""
    # default_cassette_name is asked for with getfixturevalue, so it is not in the closure.
    defs = item._fixtureinfo.name2fixturedefs.get(
        argname
    ) or item.session._fixturemanager.getfixturedefs(argname, item)
    if not defs:
        return None, None
    fixturedef = defs[-1]
    func = fixturedef.func
    if getattr(func, "__module__", "").startswith("pytest_recording"):
        return None, None
    params = list(inspect.signature(func).parameters)
    if any(p != "request" for p in params):
        return None, (
            f"the {argname} fixture asks for {', '.join(p for p in params if p != 'request')}; "
            "migrate only calls it when it asks for `request` alone"
        )
    try:
        value = func(item._request) if params else func()
        if inspect.isgenerator(value):
            value = next(value)
    except Exception as exc:
        return None, f"the {argname} fixture raised {type(exc).__name__}: {exc}"
    return value, None


def _config_from(item: pytest.Function) -> str | None:
    """The file that defines the ``vcr_config`` (or, already migrated, ``cassette_config``)
    fixture this test gets, when the suite defines one; None when it gets the plugins'."""
    for argname in ("vcr_config", "cassette_config"):
        defs = item.session._fixturemanager.getfixturedefs(argname, item)
        for fixturedef in reversed(defs or ()):
            module = getattr(fixturedef.func, "__module__", "") or ""
            if module.startswith(("pytest_recording", "pytest_toolnexus")):
                continue
            source = inspect.getsourcefile(fixturedef.func)
            return None if source is None else str(Path(source).resolve())
    return None


def _bounded(name: str, suffix: str) -> str:
    if len(name) + len(suffix) <= _MAX_FILENAME:
        return name
    digest = hashlib.md5(name.encode()).hexdigest()
    return f"{name[: _MAX_FILENAME - len(suffix) - len(digest) - 3]}...{digest}"


def _base_dir(config: pytest.Config) -> Path:
    given = None
    try:
        given = config.getoption("cassette_dir") or config.getini("cassette_dir")
    except ValueError:  # pytest-toolnexus disabled in the suite: its default
        given = "cassettes"
    path = Path(given)
    return path if path.is_absolute() else config.rootpath / path


def _describe(item: pytest.Function) -> dict[str, Any]:
    classes = [node.name for node in item.listchain() if isinstance(node, pytest.Class)]
    test_name = ".".join([*classes, item.name])
    markers = list(item.iter_markers("vcr"))
    problems: list[str] = []
    folder, problem = _evaluate(item, "vcr_cassette_dir")
    if problem:
        problems.append(problem)
    if folder is None:
        folder = os.path.join(os.path.dirname(item.path), "cassettes", item.path.stem)
    name, problem = _evaluate(item, "default_cassette_name")
    if problem:
        problems.append(problem)
    if name is None:
        name = _recording_default_name(item)
    serializer = "yaml"
    for marker in reversed(markers):
        serializer = str(marker.kwargs.get("serializer", serializer))
    suffix = f".{serializer}"
    primary = os.path.join(str(folder), _bounded(str(name), suffix))
    if not primary.endswith(suffix):
        primary += suffix
    extras = []
    for marker in markers:
        for arg in marker.args:
            text = os.fspath(arg)
            extras.append(text if os.path.isabs(text) else os.path.join(str(folder), text))
    # The markers written as decorators of the test function itself (not of its class or
    # module, nor given through pytest.param).
    decorated = [m for m in getattr(item.obj, "pytestmark", ()) if getattr(m, "name", "") == "vcr"]
    return {
        "own_only": bool(markers) and len(decorated) == len(markers),
        "config_from": _config_from(item),
        "nodeid": item.nodeid,
        "path": str(item.path),
        "qualname": ".".join([*classes, item.originalname]),
        "marked": bool(markers),
        # iter_markers yields the test's own markers first: one of them is the closest.
        "closest_own": any(m.name == "vcr" for m in item.own_markers),
        "primary": primary,
        "extras": extras,
        "test_name": test_name,
        "problems": problems,
    }


def pytest_collection_finish(session: pytest.Session) -> None:
    out = os.environ.get(PROBE_ENV)
    if not out:
        return
    base = _base_dir(session.config)
    lines = [
        json.dumps(
            {"rootdir": str(session.config.rootpath), "cassette_dir": str(base)}, sort_keys=True
        )
    ]
    for item in session.items:
        if isinstance(item, pytest.Function):
            lines.append(json.dumps(_describe(item), sort_keys=True))
    Path(out).write_text("\n".join(lines) + "\n", encoding="utf-8")
