"""The pytest plugin: ``@pytest.mark.cassette``, the ``cassette`` fixtures, options and hooks.

Loaded through the ``pytest11`` entry point. A test with the marker (or that asks for the
``cassette`` fixture) has every httpx and httpx2 client it creates served by its cassette.

Loading the plugin is cheap: this module imports only pytest and the plugin's light parts. The
cassette machinery (httpx, the session, the clock) is imported by the ``cassette`` fixture the
first time a test uses it (``_plugin/serve.py``).
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from ._plugin import hookspecs as _hookspecs
from ._plugin.choices import (
    RECORD_MODES,
    TIMING_MODES,
    UNSERVED_POLICIES,
    UNUSED_POLICIES,
    VCRPY_RECORD_MODES,
)
from ._plugin.rewrite import exempt_from_rewrite
from ._plugin.shared import (
    CALL_FAILED,
    ENDING,
    FAILED,
    RAISED,
    RUN_ID,
    STATS,
    Stats,
    UnservedTrafficWarning,
    base_dir,
    shown,
)
from ._plugin.vcr_marker import register_vcr_marker, unserved_vcr_marker

if TYPE_CHECKING:
    from ._seam.transport import AsyncTransport, Transport
    from ._session.session import CassetteSession

__all__ = [
    "UnservedTrafficWarning",
    "cassette",
    "cassette_async_transport",
    "cassette_config",
    "cassette_server",
    "cassette_transport",
    "pytest_addhooks",
    "pytest_addoption",
    "pytest_configure",
    "pytest_runtest_makereport",
    "pytest_terminal_summary",
]


# -- options and configuration ------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    group = parser.getgroup("toolnexus", "pytest-toolnexus: record and replay HTTP traffic")
    if (
        pluginmanager.is_blocked("recording")
        or importlib.util.find_spec("pytest_recording") is None
    ):
        # pytest-recording's flag, so that a migrated suite's CI command keeps working once
        # pytest-recording is uninstalled (or disabled with -p no:recording).
        group.addoption(
            "--record-mode",
            dest="toolnexus_vcr_record_mode",
            choices=tuple(VCRPY_RECORD_MODES),
            default=None,
            help="pytest-recording's flag, accepted while pytest-recording is absent: the same "
            "as --cassette-record (new_episodes is new, rewrite is all), with a warning",
        )
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
    group.addoption(
        "--cassette-report",
        default=None,
        metavar="PATH",
        help="write a self-contained HTML report of the run's cassettes, with each request's "
        "stream timeline, to PATH at the end of the run (the run's data as JSON for a PATH "
        "ending in .json); docs/report.md",
    )
    group.addoption(
        "--conformance-findings",
        choices=("summary", "warn"),
        default="summary",
        help="how the conformance kit reports what a client does where clients differ: "
        "summary (default: counted at the end of the run, -v lists them) or warn (each "
        "departure from RFC 9110 or ADR 0027 is also a ConformanceFinding warning)",
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
        "cassette_report", "write the cassette run report (HTML, or .json) to this path", default=""
    )
    parser.addini(
        "cassette_on_expired", "what an expired cassette does: warn, fail, rerecord", default="warn"
    )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(_hookspecs)


def _record_mode_alias(config: pytest.Config) -> None:
    """Take pytest-recording's ``--record-mode`` as ``--cassette-record``, with a warning."""
    given = config.getoption("toolnexus_vcr_record_mode", None)
    if given is None:
        return
    native = VCRPY_RECORD_MODES[given]
    if config.option.cassette_record is None:
        config.option.cassette_record = native
    config.issue_config_time_warning(
        pytest.PytestDeprecationWarning(
            f"--record-mode={given} is pytest-recording's flag; pytest-toolnexus takes it as "
            f"--cassette-record={native}. Write --cassette-record={native} instead."
        ),
        stacklevel=2,
    )


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
    _record_mode_alias(config)
    exempt_from_rewrite(config)
    config.stash[STATS] = Stats()
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "toolnexus_run_id" in workerinput:
        config.stash[RUN_ID] = workerinput["toolnexus_run_id"]
    else:
        config.stash[RUN_ID] = uuid.uuid4().hex
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(config), "toolnexus-xdist")
    target = config.getoption("cassette_report") or config.getini("cassette_report")
    if target:
        from ._plugin.run_report import REPORT, RunReport

        config.stash[REPORT] = RunReport(config, target)
        config.pluginmanager.register(config.stash[REPORT], "toolnexus-report")
        if config.pluginmanager.hasplugin("html"):
            from ._plugin.html_extra import HtmlExtras

            extras = HtmlExtras(config, config.stash[REPORT])
            config.pluginmanager.register(extras, "toolnexus-html-extras")


class _XdistHooks:
    """Hands the run id to xdist workers, and gathers their statistics."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["toolnexus_run_id"] = self._config.stash[RUN_ID]

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        text = getattr(node, "workeroutput", {}).get("toolnexus_stats")
        if text:
            self._config.stash[STATS].merge_json(text)


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, None, None]:
    # Before pytest tears down what is still set up: a test's fixtures left until now belong
    # to a test the run stopped in, whose recording is kept beside its cassette.
    session.config.stash[ENDING] = session.exitstatus
    yield
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["toolnexus_stats"] = session.config.stash[STATS].to_json()


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
    from ._plugin.serve import serve  # the cassette machinery, on first use

    yield from serve(request, cassette_config)


@pytest.fixture
def cassette_server(
    request: pytest.FixtureRequest, cassette_config: Mapping[str, Any]
) -> Iterator[str]:
    """This test's cassette served over loopback HTTP: its base URL, for another process."""
    from ._plugin.server import cassette_server  # the server's launcher, on first use

    yield from cassette_server(request, cassette_config)


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
    # A test served by cassette_server (another process) names its cassette with the
    # marker without this process replaying it too.
    if (
        request.node.get_closest_marker("cassette") is not None
        and "cassette_server" not in request.fixturenames
    ):
        request.getfixturevalue("cassette")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    """Run an async test so that a cassette miss leaving it fails it without ending the task
    anyio runs the module's tests in (``_plugin/async_tests.py``)."""
    from ._plugin.async_tests import misses_as_failures

    test = pyfuncitem.obj
    pyfuncitem.obj = misses_as_failures(test)
    try:
        return (yield)
    finally:
        pyfuncitem.obj = test


# -- teardown checks and the end-of-run summary -------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    if call.excinfo is not None:
        from ._plugin.tracebacks import answer_first  # only when something failed

        answer_first(item.config, call.excinfo)
    report = yield
    if report.when == "setup":  # each run of the item starts here, a rerun's too
        item.stash[FAILED] = False
        item.stash[CALL_FAILED] = False
        item.stash[RAISED] = []
    if report.when in ("setup", "call") and call.excinfo is not None:
        # What the report shows (a failure, an error, an xfail), so that the teardown checks
        # do not report it again; let go of at teardown, with the frames it holds.
        item.stash.setdefault(RAISED, []).append(call.excinfo.value)
    if report.when == "teardown":
        item.stash[RAISED] = []
    if report.failed and report.when in ("setup", "call"):
        item.stash[FAILED] = True
        if report.when == "call":
            item.stash[CALL_FAILED] = True
    return report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None:
        return
    from ._plugin.findings import summarize_findings  # reads the reports only

    summarize_findings(terminalreporter)
    stats = config.stash.get(STATS, None)
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
        outside = stats.outside.get(path)
        write(f"  written: {path}" + (f" ({outside})" if outside else ""))
    for path in sorted(stats.discarded):
        write(
            f"  not written, its test failed while recording: {path} "
            "(record_on_error=True keeps such recordings)"
        )
    for path, kept in sorted(stats.rescued.items()):
        write(f"  not written, the run stopped while its test recorded: {path}")
        write(f"    the recording is kept as {kept}; move it to {path} to use it")
    if stats.unused:
        write("unused interactions:")
        for nodeid, path, listed in sorted(stats.unused):
            write(f"  {nodeid}: {len(listed)} in {path}")
            for entry in listed[:5]:
                write(f"    {entry}")
    if stats.swallowed:
        write("misses the code under test caught and went on (as under vcrpy, match_on='vcrpy'):")
        for nodeid, request in sorted(stats.swallowed):
            write(f"  {nodeid}: {request}")
    if show_files:
        base = base_dir(config)
        on_disk = sorted(shown(config, p) for p in base.rglob("*.msgpack")) if base.exists() else []
        idle = [p for p in on_disk if p not in stats.used]
        write(f"cassettes no test used: {len(idle)}")
        for path in idle:
            write(f"  {path}")
