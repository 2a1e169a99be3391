"""The ``cassette`` fixture at work: one test's options layered, its cassette found, its
session started with every process-wide patch in, and at teardown everything undone and
reported.

``plugin.py`` imports this module only when a test uses a cassette, so a run that loads the
plugin and uses none imports neither httpx nor the cassette machinery.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import unittest
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import pytest

from pytest_toolnexus._patching.httpx import DirectLive
from pytest_toolnexus._patching.install import Installation
from pytest_toolnexus._patching.serving import serve_clients
from pytest_toolnexus._safety.tripwire import Unserved
from pytest_toolnexus._seam.errors import (
    CassetteError,
    SwallowedMissWarning,
    VcrpyMissError,
    expected_error,
)
from pytest_toolnexus._seam.transport import TransportRequest
from pytest_toolnexus._session.session import CassetteSession, UnusedInteractionsWarning
from pytest_toolnexus._store.cassette import Cassette, Interaction, RecordedRequest, load_cassette

from .expiry import CassetteExpiredWarning, expiry
from .settings import OPTION_NAMES, CassetteOptions, default_cassette_path, layer
from .shared import (
    CALL_FAILED,
    ENDING,
    FAILED,
    RAISED,
    RUN_ID,
    STATS,
    UnservedTrafficWarning,
    base_dir,
    shown,
)
from .vcr_keys import translate
from .verdict import shows

__all__ = ["serve"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error

_CI_FALSE: Final = frozenset({"", "0", "false", "no"})


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


def _options(
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
        where = "the cassette_config fixture"
        vcr = translate(config_fixture, OPTION_NAMES, where)
        vcr.warn(where, config.stash.setdefault(_VCR_WARNED, set()))
        options = layer(options, vcr.values, where)
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
        return layer(options, cli, "the command line"), vcr.redact
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
    base = base_dir(config)
    # Tests in classes are named Class.test, so TestA::test_x and TestB::test_x do not share.
    classes = [node.name for node in item.listchain() if isinstance(node, pytest.Class)]
    test_name = ".".join([*classes, item.name])
    default = default_cassette_path(base, config.rootpath, item.path, test_name, options.name)
    chosen = item.ihook.pytest_toolnexus_cassette_path(item=item, default=default)
    if chosen is None:
        return default
    path = Path(chosen)
    return path if path.is_absolute() else base / path


def serve(
    request: pytest.FixtureRequest, cassette_config: Mapping[str, Any]
) -> Iterator[CassetteSession]:
    """The ``cassette`` fixture's body: this test's session, started with every patch in,
    and everything undone and reported when the test is over."""
    item = request.node
    assert isinstance(item, pytest.Item)
    config = item.config
    options, vcr_redact = _options(item, cassette_config)
    record = options.record
    note = None
    if record != "none" and _in_ci() and config.getoption("cassette_record") is None:
        note = (
            f"Recording is off because CI is set in the environment (this test asked for "
            f"record mode {record!r}); pass --cassette-record={record} to record in CI."
        )
        record = "none"
    path = _cassette_path(item, options)
    where = shown(config, path)  # the cassette as reports name it
    if options.max_age is not None and record != "all" and path.exists():
        blocked = _in_ci() and config.getoption("cassette_record") is None
        record = _check_expiry(item, path, options, record, recording_allowed=not blocked)
    if record == "once" and _written_this_run(path, config.stash[RUN_ID]):
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

    def redact(interaction: Interaction) -> Interaction | None:
        if vcr_redact is not None:
            # vcrpy's filters and before_record_* callbacks run first, as they did in vcrpy,
            # and a callback that returns None leaves the interaction unrecorded.
            filtered = vcr_redact(interaction)
            if filtered is None:
                return None
            interaction = filtered
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
        run_id=config.stash[RUN_ID],
        note=note,
        clock_modules=(module,) if module is not None else (),
        faults=options.faults,
        allow_secrets=options.allow_secrets,
        wire_check=options.wire_check,
    )
    started = False

    def report() -> None:
        if started:
            _report(item, session, options, where)

    def keep_or_discard() -> None:
        ending = config.stash.get(ENDING, None)
        if ending is not None:
            # Torn down as the session ends, not after the test: the run stopped in it.
            session.mark_interrupted(_stopped_by(ending))
            return
        # A test that failed while recording leaves no cassette behind unless asked to; a
        # stream still open counts too, though it is only finished when the session closes.
        if (
            item.stash.get(FAILED, False)
            and not options.record_on_error
            and not session.replay_only
            and any(not sent.replayed for sent in session.requests)
        ):
            session.discard_recording()
            config.stash[STATS].discarded.add(where)

    unserved = Unserved()
    # Everything process-wide goes on through one installation, which claims the process
    # before it changes anything and registers each undo the moment its patch is in; it comes
    # off first at teardown, newest first, whatever failed (a patch, the clock, the test, a
    # teardown step, KeyboardInterrupt). pytest's monkeypatch is not used for these patches:
    # they must come off together with the clock and the tripwire, in one order, before the
    # cassette is written, and outside pytest (use_cassette, conformance.served) as well.
    installation = Installation(f"the cassette {where} of test {item.nodeid}")
    with contextlib.ExitStack() as undo:
        undo.callback(report)
        undo.callback(live.close)
        undo.callback(session.close)
        undo.callback(keep_or_discard)
        undo.callback(_report_unserved, item, unserved, options)
        undo.enter_context(installation)
        serve_clients(
            installation,
            session,
            cassette=where,
            allow_hosts=options.allow_hosts,
            on_unserved="warn" if options.unserved == "warn" else "fail",
            unserved=unserved,
        )
        session.start(installation)
        started = True
        yield session


def _stopped_by(status: int | pytest.ExitCode) -> str:
    """What stopped a test mid-run, from the exit status the session ends with."""
    if status == pytest.ExitCode.INTERRUPTED:
        return "the interrupted test run (Ctrl-C, or pytest.exit())"
    if status == pytest.ExitCode.INTERNAL_ERROR:
        return "an internal error of the test run"
    return "the end of the test run"


def _report_unserved(item: pytest.Item, unserved: Unserved, options: CassetteOptions) -> None:
    """Fail (or warn about) connections a recording test made around its cassette, also when
    the code under test caught the error the tripwire raised."""
    if not unserved.messages:
        return
    text = "\n\n".join(unserved.messages.values())
    if options.unserved == "warn":
        warnings.warn(UnservedTrafficWarning(f"{item.nodeid}: {text}"), stacklevel=1)
        return
    item.stash[FAILED] = True  # the recording missed traffic: it is not kept
    if not item.stash.get(CALL_FAILED, False):
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
        shown(item.config, path),
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


def _caught_by_the_test(error: BaseException, item: pytest.Item) -> bool:
    """Whether the test function itself caught ``error``: with ``pytest.raises``, or a ``try``
    of its own. The first frame of an exception's traceback is the one it was caught in; a
    test that catches what it sent for expects it, where code under test that does hides it."""
    function = getattr(item, "function", None)
    function = getattr(function, "__func__", function)  # a method of a test class
    code = getattr(inspect.unwrap(function), "__code__", None) if function is not None else None
    traceback = error.__traceback__
    if traceback is None:
        # unittest's assertRaises keeps the error without its traceback: in a TestCase, only
        # the test's own assertion does that.
        cls = getattr(item, "cls", None)
        return isinstance(cls, type) and issubclass(cls, unittest.TestCase)
    return code is not None and traceback.tb_frame.f_code is code


def _missed_request(miss: BaseException) -> str:
    """The request a miss message names (its first line, after the leading words)."""
    first = str(miss).split("\n", 1)[0]
    for lead in ("No recorded interaction matches ",):
        if first.startswith(lead):
            return first[len(lead) :]
    return first


def _report(
    item: pytest.Item, session: CassetteSession, options: CassetteOptions, where: str
) -> None:
    stats = item.config.stash[STATS]
    stats.used.add(where)
    if any(r.replayed for r in session.requests):
        stats.replayed.add(where)
    if session.recorded:
        stats.recorded.add(where)
    if session.written:
        stats.written.add(where)
    if session.rescued is not None:
        stats.rescued[where] = shown(item.config, session.rescued)
    test_failed = item.stash.get(CALL_FAILED, False)
    raised = item.stash.get(RAISED, [])
    damaged = [
        error
        for error in session.damaged
        if not shows(raised, error) and not _caught_by_the_test(error, item)
    ]
    if damaged:
        pytest.fail(
            "the cassette is damaged, and the test did not fail with that error (the code "
            "under test or its SDK caught it, or turned it into another error and retried):"
            f"\n\n{damaged[0]}",
            pytrace=False,
        )
    hidden = [
        miss
        for miss in session.misses
        if not shows(raised, miss) and not _caught_by_the_test(miss, item)
    ]
    swallowed = [miss for miss in hidden if isinstance(miss, VcrpyMissError)]
    hidden = [miss for miss in hidden if not isinstance(miss, VcrpyMissError)]
    for miss in swallowed:
        # Matching as vcrpy did, a miss is an Exception, and best-effort code may catch it
        # (a probe in `except Exception`) as it caught vcrpy's: the test passes, and says so.
        request = _missed_request(miss)
        stats.swallowed.append((item.nodeid, request))
        warnings.warn(
            SwallowedMissWarning(
                f"{item.nodeid}: the code under test caught a cassette miss and went on, as it "
                f"could under vcrpy: {request} has no recording in {where}. Record it "
                "(--cassette-record=new) if the test needs its answer; docs/misses.md"
            ),
            stacklevel=1,
        )
    if hidden and not test_failed:
        pytest.fail(
            "the code under test caught and hid a cassette miss; the request had no "
            f"recording:\n\n{hidden[0]}",
            pytrace=False,
        )
    problems: list[str] = []
    if options.name is None and session.record_mode != "all":
        unused = session.unused()
        if unused:
            listed = [f"#{i} {r.method} {r.url}" for i, r in unused]
            stats.unused.append((item.nodeid, where, listed))
            problems.append(
                f"{len(unused)} recorded interaction(s) in {where} were never played: "
                + "; ".join(listed[:5])
                + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
            )
    unread = session.unread()
    if unread:
        problems.append(
            f"{len(unread)} replayed response(s) were never read to the end: "
            + "; ".join(label for _, label in unread[:5])
            + (f" and {len(unread) - 5} more" if len(unread) > 5 else "")
        )
    if not problems or options.unused == "ignore" or test_failed:
        return
    message = f"{item.nodeid}: " + " | ".join(problems)
    if options.unused == "fail":
        pytest.fail(message, pytrace=False)
    warnings.warn(UnusedInteractionsWarning(message), stacklevel=1)
