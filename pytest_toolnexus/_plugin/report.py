"""What a test's cassette tells when the test is over: the run's statistics, damage and misses
the code under test hid, the misses it swallowed matching as vcrpy did, what it left (unused
interactions, responses never read to the end), and traffic that went around a recording."""

from __future__ import annotations

import warnings
from typing import Final

import pytest

from pytest_toolnexus._safety.tripwire import Unserved
from pytest_toolnexus._seam.errors import (
    CassetteSymlinkWarning,
    SwallowedMissWarning,
    VcrpyMissError,
)
from pytest_toolnexus._session.session import CassetteSession, UnusedInteractionsWarning
from pytest_toolnexus._store.place import link_message, link_out

from .settings import CassetteOptions
from .shared import CALL_FAILED, FAILED, RAISED, STATS, UnservedTrafficWarning, shown
from .verdict import missed_request, unshown

__all__ = ["report", "report_unserved", "say_link_out"]

_LINKS_SAID: Final = pytest.StashKey[set[str]]()
"""The cassettes leading out of the project that a run has warned of: each once."""


def report(
    item: pytest.Item, session: CassetteSession, options: CassetteOptions, where: str
) -> None:
    """Count the cassette in the run's statistics, then fail the test for damage or a miss it
    hid, and warn (or fail, as ``unused`` says) of what it left."""
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
    damaged = unshown(list(session.damaged), raised, item)
    if damaged:
        pytest.fail(
            "the cassette is damaged, and the test did not fail with that error (the code "
            "under test or its SDK caught it, or turned it into another error and retried):"
            f"\n\n{damaged[0]}",
            pytrace=False,
        )
    hidden = unshown(list(session.misses), raised, item)
    swallowed = [miss for miss in hidden if isinstance(miss, VcrpyMissError)]
    hidden = [miss for miss in hidden if not isinstance(miss, VcrpyMissError)]
    for miss in swallowed:
        # Matching as vcrpy did, a miss is an Exception, and best-effort code may catch it
        # (a probe in `except Exception`) as it caught vcrpy's: the test passes, and says so.
        request = missed_request(miss)
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
    # A cassette named by the marker is shared: what one test left, another may play.
    left = session.leftovers(unused=options.name is None and session.record_mode != "all")
    if left.unused:
        stats.unused.append((item.nodeid, where, left.unused))
    problems = left.sentences(where)
    if not problems or options.unused == "ignore" or test_failed:
        return
    message = f"{item.nodeid}: " + " | ".join(problems)
    if options.unused == "fail":
        pytest.fail(message, pytrace=False)
    warnings.warn(UnusedInteractionsWarning(message), stacklevel=1)


def report_unserved(item: pytest.Item, unserved: Unserved, options: CassetteOptions) -> None:
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


def say_link_out(config: pytest.Config, session: CassetteSession, where: str) -> None:
    """Warn, once per cassette in the run, when the cassette leads out of the rootdir through
    a symlink; the summary then says beside each write where it went."""
    found = link_out(session.path, config.rootpath)
    if found is None:
        return
    config.stash[STATS].outside[where] = (
        f"its symlink to {found.real} was replaced by a file in the project"
        if found.file_link
        else f"through a symlink, to {found.real}, outside the project"
    )
    said = config.stash.setdefault(_LINKS_SAID, set())
    if where in said:
        return
    message = link_message(found, records=not session.replay_only, shown=where)
    warnings.warn(CassetteSymlinkWarning(message), stacklevel=1)
    said.add(where)  # after the warning: one turned into an error refuses every test
