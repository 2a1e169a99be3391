"""The pytest plugin: ``@pytest.mark.cassette``, the ``cassette`` fixtures, options and hooks.

Loaded through the ``pytest11`` entry point. A test with the marker (or that asks for the
``cassette`` fixture) has every httpx and httpx2 client it creates served by its cassette.

Why one module of over 400 lines: pytest reads the hooks and fixtures from the module the
``pytest11`` entry point names, and the ``cassette`` fixture, its report and the terminal
summary share the per-test options; settings, hooks and client patching are already apart
(``_settings``, ``_hookspecs``, ``_patch*``).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
import warnings
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest

from ._patching.httpx import DirectLive, patch_http_clients
from ._patching.install import Installation
from ._patching.libraries import patch_libraries
from ._plugin import hookspecs as _hookspecs
from ._plugin.expiry import CassetteExpiredWarning, expiry
from ._plugin.settings import (
    UNSERVED_POLICIES,
    UNUSED_POLICIES,
    CassetteOptions,
    default_cassette_path,
    layer,
)
from ._plugin.vcr_marker import register_vcr_marker, unserved_vcr_marker
from ._safety.tripwire import Unserved, arm_tripwire
from ._seam.errors import CassetteError
from ._seam.transport import AsyncTransport, Transport, TransportRequest
from ._session.session import RECORD_MODES, TIMING_MODES, CassetteSession, UnusedInteractionsWarning
from ._store.cassette import Cassette, Interaction, RecordedRequest, load_cassette

__all__ = [
    "cassette",
    "cassette_async_transport",
    "cassette_config",
    "cassette_transport",
    "pytest_addhooks",
    "pytest_addoption",
    "pytest_configure",
    "pytest_runtest_makereport",
    "pytest_terminal_summary",
]

_STATS: Final = pytest.StashKey["_Stats"]()
_RUN_ID: Final = pytest.StashKey[str]()
_CALL_FAILED: Final = pytest.StashKey[bool]()
_FAILED: Final = pytest.StashKey[bool]()
_CI_FALSE: Final = frozenset({"", "0", "false", "no"})


@dataclass
class _Stats:
    """What the run did with cassettes; merged from xdist workers on the controller."""

    replayed: set[str] = field(default_factory=set)
    recorded: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    used: set[str] = field(default_factory=set)
    discarded: set[str] = field(default_factory=set)
    unused: list[tuple[str, str, list[str]]] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(
            {
                "replayed": sorted(self.replayed),
                "recorded": sorted(self.recorded),
                "written": sorted(self.written),
                "used": sorted(self.used),
                "discarded": sorted(self.discarded),
                "unused": self.unused,
            }
        )

    def merge_json(self, text: str) -> None:
        data = json.loads(text)
        self.replayed.update(data["replayed"])
        self.recorded.update(data["recorded"])
        self.written.update(data["written"])
        self.used.update(data["used"])
        self.discarded.update(data["discarded"])
        self.unused.extend((a, b, list(c)) for a, b, c in data["unused"])


# -- options and configuration ------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("toolnexus", "pytest-toolnexus: record and replay HTTP traffic")
    group.addoption(
        "--cassette-record",
        choices=RECORD_MODES,
        default=None,
        help="record mode for every cassette: none (replay only, the default), once, new, all. "
        "Given here it overrides markers and config, and permits recording when CI is set.",
    )
    group.addoption(
        "--cassette-timing",
        choices=TIMING_MODES,
        default=None,
        help="how replay treats recorded timing: virtual (default), real, instant",
    )
    group.addoption(
        "--cassette-dir",
        default=None,
        help="folder for cassettes (default: cassettes/ under the rootdir)",
    )
    group.addoption(
        "--cassette-allow-hosts",
        default=None,
        help="comma-separated host names whose traffic bypasses cassettes (e.g. localhost)",
    )
    group.addoption(
        "--cassette-unused",
        choices=UNUSED_POLICIES,
        default=None,
        help="what to do at teardown when recorded interactions were never played, or a "
        "replayed stream was never read to its end: warn (default), fail, ignore",
    )
    group.addoption(
        "--cassette-unserved",
        choices=UNSERVED_POLICIES,
        default=None,
        help="what a recording test does when a connection goes around the cassette (a "
        "library or socket it does not serve): fail (default) or warn",
    )
    group.addoption(
        "--cassette-report-unused-files",
        action="store_true",
        default=False,
        help="list cassette files under the cassette folder that no test of this run used",
    )
    parser.addini("cassette_record", "default record mode (none, once, new, all)", default="none")
    parser.addini(
        "cassette_timing", "default timing mode (virtual, real, instant)", default="virtual"
    )
    parser.addini("cassette_dir", "cassette folder, relative to the rootdir", default="cassettes")
    parser.addini(
        "cassette_allow_hosts",
        "host names whose traffic bypasses cassettes",
        type="args",
        default=[],
    )
    parser.addini("cassette_unused", "warn, fail or ignore unused interactions", default="warn")
    parser.addini(
        "cassette_unserved",
        "fail or warn when a recording test's traffic goes around the cassette",
        default="fail",
    )
    parser.addini(
        "cassette_match_on",
        "what requests are matched on: default, vcrpy, or a list of method, scheme, host, "
        "port, path, query, body, headers",
        default="default",
    )
    parser.addini(
        "cassette_record_on_error",
        "write what a test recorded even when the test failed",
        type="bool",
        default=False,
    )
    parser.addini(
        "cassette_max_age", "age after which a cassette is expired (e.g. 30d, 12h)", default=""
    )
    parser.addini(
        "cassette_on_expired", "what an expired cassette does: warn, fail, rerecord", default="warn"
    )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(_hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cassette(name=None, *, record=, timing=, speed=, ignore_body=, match_headers=, "
        "match_on=, ignore_query=, ignore_headers=, allow_repeats=, allow_hosts=, unused=, "
        "meta=, faults=, allow_secrets=, wire_check=, record_on_error=, max_age=, "
        "on_expired=, unserved=): serve this test's HTTP traffic (httpx, httpx2, aiohttp, urllib3, "
        "requests, botocore) from a pytest-toolnexus cassette",
    )
    register_vcr_marker(config)
    config.stash[_STATS] = _Stats()
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "toolnexus_run_id" in workerinput:
        config.stash[_RUN_ID] = workerinput["toolnexus_run_id"]
    else:
        config.stash[_RUN_ID] = uuid.uuid4().hex
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(config), "toolnexus-xdist")


class _XdistHooks:
    """Hands the run id to xdist workers, and gathers their statistics."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["toolnexus_run_id"] = self._config.stash[_RUN_ID]

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        text = getattr(node, "workeroutput", {}).get("toolnexus_stats")
        if text:
            self._config.stash[_STATS].merge_json(text)


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["toolnexus_stats"] = session.config.stash[_STATS].to_json()


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
    hosts = config.getoption("cassette_allow_hosts")
    return {
        "record": config.getoption("cassette_record"),
        "timing": config.getoption("cassette_timing"),
        "allow_hosts": hosts,
        "unused": config.getoption("cassette_unused"),
        "unserved": config.getoption("cassette_unserved"),
    }


def _base_dir(config: pytest.Config) -> Path:
    given = config.getoption("cassette_dir") or config.getini("cassette_dir")
    path = Path(given)
    return path if path.is_absolute() else config.rootpath / path


def _options(item: pytest.Item, config_fixture: Mapping[str, Any]) -> CassetteOptions:
    config = item.config
    try:
        options = layer(CassetteOptions(), _ini_options(config), "the ini file")
        options = layer(options, config_fixture, "the cassette_config fixture")
        for marker in reversed(list(item.iter_markers("cassette"))):
            values = dict(marker.kwargs)
            if marker.args:
                if len(marker.args) > 1:
                    raise TypeError(
                        "@pytest.mark.cassette takes one positional argument, the cassette name"
                    )
                values["name"] = marker.args[0]
            options = layer(options, values, "@pytest.mark.cassette")
        return layer(options, _cli_options(config), "the command line")
    except TypeError as exc:
        raise pytest.UsageError(f"{item.nodeid}: {exc}") from None


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in _CI_FALSE


def _written_this_run(path: Path, run_id: str) -> bool:
    """Whether the cassette at ``path`` was written by a test of this run (an unreadable one
    was not: the session refuses it with the fix)."""
    try:
        return path.exists() and load_cassette(path).meta.get("run_id") == run_id
    except CassetteError:
        return False


def _cassette_path(item: pytest.Item, options: CassetteOptions) -> Path:
    config = item.config
    base = _base_dir(config)
    # Tests in classes are named Class.test, so TestA::test_x and TestB::test_x do not share.
    classes = [node.name for node in item.listchain() if isinstance(node, pytest.Class)]
    test_name = ".".join([*classes, item.name])
    default = default_cassette_path(base, config.rootpath, item.path, test_name, options.name)
    chosen = item.ihook.pytest_toolnexus_cassette_path(item=item, default=default)
    if chosen is None:
        return default
    path = Path(chosen)
    return path if path.is_absolute() else base / path


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture
def cassette_config() -> Mapping[str, Any]:
    """Default cassette options for a module or conftest; override it to return a dict."""
    return {}


@pytest.fixture
def cassette(
    request: pytest.FixtureRequest, cassette_config: Mapping[str, Any]
) -> Iterator[CassetteSession]:
    """This test's cassette: serves its HTTP traffic and records what was sent and when."""
    item = request.node
    assert isinstance(item, pytest.Item)
    config = item.config
    options = _options(item, cassette_config)
    record = options.record
    note = None
    if record != "none" and _in_ci() and config.getoption("cassette_record") is None:
        note = (
            f"Recording is off because CI is set in the environment (this test asked for "
            f"record mode {record!r}); pass --cassette-record={record} to record in CI."
        )
        record = "none"
    path = _cassette_path(item, options)
    if options.max_age is not None and record != "all" and path.exists():
        blocked = _in_ci() and config.getoption("cassette_record") is None
        record = _check_expiry(item, path, options, record, recording_allowed=not blocked)
    if record == "once" and _written_this_run(path, config.stash[_RUN_ID]):
        # A shared cassette that another test of this run (perhaps on another xdist worker)
        # recorded first: it was missing when the run began, so this test records into it too.
        record = "new"
    # item.ihook, not config.hook: a conftest.py's hooks apply to the tests under its folder.
    hook = item.ihook
    matcher = None
    if hook.pytest_toolnexus_match.get_hookimpls():

        def matcher(live: TransportRequest, recorded: RecordedRequest) -> bool | None:
            verdict: bool | None = hook.pytest_toolnexus_match(
                request=live, recorded=recorded, item=item
            )
            return verdict

    def redact(interaction: Interaction) -> Interaction:
        result: Interaction | None = hook.pytest_toolnexus_redact(
            interaction=interaction, item=item
        )
        return interaction if result is None else result

    def before_write(cassette: Cassette) -> None:
        hook.pytest_toolnexus_before_write(cassette=cassette, item=item)

    module = getattr(item, "module", None)
    live = DirectLive()
    session = CassetteSession(
        path,
        live=live,
        record=record,
        timing=options.timing,
        speed=options.speed,
        ignore_body=options.ignore_body,
        match_headers=options.match_headers,
        match_on=options.match_on,
        ignore_query=options.ignore_query,
        ignore_headers=options.ignore_headers,
        allow_repeats=options.allow_repeats,
        meta=options.meta,
        on_unused="ignore",
        redact=redact,
        matcher=matcher,
        before_write=before_write,
        run_id=config.stash[_RUN_ID],
        note=note,
        clock_modules=(module,) if module is not None else (),
        faults=options.faults,
        allow_secrets=options.allow_secrets,
        wire_check=options.wire_check,
    )
    started = False

    def report() -> None:
        if started:
            _report(item, session, options)

    def keep_or_discard() -> None:
        # A test that failed while recording leaves no cassette behind unless asked to; a
        # stream still open counts too, though it is only finished when the session closes.
        if (
            item.stash.get(_FAILED, False)
            and not options.record_on_error
            and not session.replay_only
            and any(not sent.replayed for sent in session.requests)
        ):
            session.discard_recording()
            config.stash[_STATS].discarded.add(_shown(config, path))

    unserved = Unserved()
    # Everything process-wide goes on through one installation, which claims the process
    # before it changes anything and registers each undo the moment its patch is in; it comes
    # off first at teardown, newest first, whatever failed (a patch, the clock, the test, a
    # teardown step, KeyboardInterrupt). pytest's monkeypatch is not used for these patches:
    # they must come off together with the clock and the tripwire, in one order, before the
    # cassette is written, and outside pytest (use_cassette, conformance.served) as well.
    installation = Installation(f"the cassette {_shown(config, path)} of test {item.nodeid}")
    with contextlib.ExitStack() as undo:
        undo.callback(report)
        undo.callback(live.close)
        undo.callback(session.close)
        undo.callback(keep_or_discard)
        undo.callback(_report_unserved, item, unserved, options)
        undo.enter_context(installation)
        installation.add(patch_http_clients, session, options.allow_hosts)
        installation.add(patch_libraries, session, options.allow_hosts)
        installation.add(
            arm_tripwire,
            cassette=_shown(config, path),
            mode=session.record_mode,
            allow_hosts=options.allow_hosts,
            recording=not session.replay_only,
            on_unserved="warn" if options.unserved == "warn" else "fail",
            unserved=unserved,
        )
        session.start(installation)
        started = True
        yield session


@pytest.fixture
def cassette_transport(cassette: CassetteSession) -> Transport:
    """A sync seam Transport served by this test's cassette, for clients that take one."""
    return cassette.transport


@pytest.fixture
def cassette_async_transport(cassette: CassetteSession) -> AsyncTransport:
    """An async seam Transport served by this test's cassette, for clients that take one."""
    return cassette.async_transport


@pytest.fixture(autouse=True)
def _toolnexus_marker(request: pytest.FixtureRequest) -> None:
    """Activate the cassette for tests that carry the marker but do not ask for the fixture;
    fail a test whose pytest-recording marker nothing serves."""
    unserved = unserved_vcr_marker(request.node)
    if unserved is not None:
        pytest.fail(unserved, pytrace=False)
    if request.node.get_closest_marker("cassette") is not None:
        request.getfixturevalue("cassette")


# -- teardown checks and the end-of-run summary -------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "setup":  # each run of the item starts here, a rerun's too
        item.stash[_FAILED] = False
        item.stash[_CALL_FAILED] = False
    if report.failed and report.when in ("setup", "call"):
        item.stash[_FAILED] = True
        if report.when == "call":
            item.stash[_CALL_FAILED] = True
    return report


class UnservedTrafficWarning(UserWarning):
    """A recording test's traffic went around the cassette (with ``unserved="warn"``)."""


def _report_unserved(item: pytest.Item, unserved: Unserved, options: CassetteOptions) -> None:
    """Fail (or warn about) connections a recording test made around its cassette, also when
    the code under test caught the error the tripwire raised."""
    if not unserved.messages:
        return
    text = "\n\n".join(unserved.messages.values())
    if options.unserved == "warn":
        warnings.warn(UnservedTrafficWarning(f"{item.nodeid}: {text}"), stacklevel=1)
        return
    item.stash[_FAILED] = True  # the recording missed traffic: it is not kept
    if not item.stash.get(_CALL_FAILED, False):
        pytest.fail(f"{item.nodeid}: {text}", pytrace=False)


def _check_expiry(
    item: pytest.Item,
    path: Path,
    options: CassetteOptions,
    record: str,
    *,
    recording_allowed: bool,
) -> Any:
    """The record mode to use once ``max_age`` has been checked: ``all`` to record an
    expired cassette again, else ``record``; fails or warns as ``on_expired`` says."""
    assert options.max_age is not None
    forced = item.config.getoption("cassette_record")
    try:
        meta = dict(load_cassette(path).meta)
    except CassetteError:
        return record  # an unreadable file is the session's to report (or to record over)
    found = expiry(
        _shown(item.config, path),
        meta,
        options.max_age,
        options.on_expired,
        may_record=recording_allowed and forced in (None, "once", "new", "all"),
    )
    if found is None:
        return record
    if found.action == "fail":
        pytest.fail(found.message, pytrace=False)
    if found.action == "rerecord":
        warnings.warn(CassetteExpiredWarning(found.message), stacklevel=1)
        return "all"
    warnings.warn(CassetteExpiredWarning(found.message), stacklevel=1)
    return record


def _report(item: pytest.Item, session: CassetteSession, options: CassetteOptions) -> None:
    stats = item.config.stash[_STATS]
    shown = _shown(item.config, session.path)
    stats.used.add(shown)
    if any(r.replayed for r in session.requests):
        stats.replayed.add(shown)
    if session.recorded:
        stats.recorded.add(shown)
    if session.written:
        stats.written.add(shown)
    test_failed = item.stash.get(_CALL_FAILED, False)
    if session.misses and not test_failed:
        pytest.fail(
            "the code under test caught and hid a cassette miss; the request had no "
            f"recording:\n\n{session.misses[0]}",
            pytrace=False,
        )
    problems: list[str] = []
    if options.name is None and session.record_mode != "all":
        unused = session.unused()
        if unused:
            listed = [f"#{i} {r.method} {r.url}" for i, r in unused]
            stats.unused.append((item.nodeid, shown, listed))
            problems.append(
                f"{len(unused)} recorded interaction(s) in {shown} were never played: "
                + "; ".join(listed[:5])
                + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
            )
    unread = session.unconsumed()
    if unread:
        problems.append(
            f"{len(unread)} replayed response(s) were never read to the end: "
            + "; ".join(f"{r.method} {r.url}" for r in unread[:5])
        )
    if not problems or options.unused == "ignore" or test_failed:
        return
    message = f"{item.nodeid}: " + " | ".join(problems)
    if options.unused == "fail":
        pytest.fail(message, pytrace=False)
    warnings.warn(UnusedInteractionsWarning(message), stacklevel=1)


def _shown(config: pytest.Config, path: Path) -> str:
    try:
        return str(path.relative_to(config.rootpath))
    except ValueError:
        return str(path)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None:
        return
    stats = config.stash.get(_STATS, None)
    if stats is None:
        return
    show_files = config.getoption("cassette_report_unused_files")
    if not stats.used and not show_files:
        return
    write = terminalreporter.write_line
    terminalreporter.section("pytest-toolnexus")
    write(
        f"cassettes: {len(stats.used)} used, {len(stats.replayed)} replayed, "
        f"{len(stats.recorded)} recorded, {len(stats.written)} written"
    )
    for path in sorted(stats.written):
        write(f"  written: {path}")
    for path in sorted(stats.discarded):
        write(
            f"  not written, its test failed while recording: {path} "
            "(record_on_error=True keeps such recordings)"
        )
    if stats.unused:
        write("unused interactions:")
        for nodeid, path, listed in sorted(stats.unused):
            write(f"  {nodeid}: {len(listed)} in {path}")
            for entry in listed[:5]:
                write(f"    {entry}")
    if show_files:
        base = _base_dir(config)
        on_disk = (
            sorted(_shown(config, p) for p in base.rglob("*.msgpack")) if base.exists() else []
        )
        idle = [p for p in on_disk if p not in stats.used]
        write(f"cassettes no test used: {len(idle)}")
        for path in idle:
            write(f"  {path}")
