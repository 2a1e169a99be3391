"""The ``cassette`` fixture at work: one test's options layered, its cassette found, its
session started with every process-wide patch in, and at teardown everything undone and
reported.

``plugin.py`` imports this module only when a test uses a cassette, so a run that loads the
plugin and uses none imports neither httpx nor the cassette machinery.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_toolnexus._patching.httpx import DirectLive
from pytest_toolnexus._patching.install import Installation
from pytest_toolnexus._patching.serving import serve_clients
from pytest_toolnexus._safety.tripwire import Unserved
from pytest_toolnexus._seam.errors import expected_error
from pytest_toolnexus._seam.transport import TransportRequest
from pytest_toolnexus._session.session import CassetteSession
from pytest_toolnexus._store.cassette import Cassette, Interaction, RecordedRequest
from pytest_toolnexus._timing.clock import real_monotonic

from .item_options import options_of
from .policy import record_mode
from .report import report, report_unserved, say_link_out
from .run_report import note_test
from .settings import CassetteOptions, default_cassette_path
from .shared import ENDING, FAILED, RUN_ID, STATS, base_dir, shown

__all__ = ["cassette_path", "serve"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error


def cassette_path(item: pytest.Item, options: CassetteOptions) -> Path:
    """Where ``item``'s cassette is: the default path, or what the cassette_path hook says."""
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
    options, vcr_redact = options_of(item, cassette_config)
    path = cassette_path(item, options)
    where = shown(config, path)  # the cassette as reports name it
    record, note = record_mode(item, options, path)
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
        on_unused="ignore",
        redact=redact,
        matcher=matcher,
        before_write=before_write,
        run_id=config.stash[RUN_ID],
        note=note,
        clock_modules=(module,) if module is not None else (),
        **options.session_arguments(),
    )
    say_link_out(config, session, where)
    started = False
    began = real_monotonic()

    def report_at_end() -> None:
        if started:
            wall = real_monotonic() - began
            try:
                report(item, session, options, where)  # the test's own checks come first
            finally:
                note_test(item, session, where, wall=wall, shared=options.name is not None)

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
        undo.callback(report_at_end)
        undo.callback(live.close)
        undo.callback(session.close)
        undo.callback(keep_or_discard)
        undo.callback(report_unserved, item, unserved, options)
        undo.enter_context(installation)
        serve_clients(
            installation,
            session,
            cassette=where,
            allow_hosts=options.allow_hosts,
            on_unserved="warn" if options.unserved == "warn" else "fail",
            unserved=unserved,
        )
        began = real_monotonic()
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
