"""pytest rewrites the asserts of every module of a plugin's package at import, and where it may
not write bytecode it does so again in every run. The plugin takes its own machinery off that
list once pytest is configured, and keeps only ``pytest_toolnexus.conformance``, whose asserts
a user reads, on it. Each project runs in a subprocess, so the plugin's modules are imported
there under that run's own import hook."""

from pytest_toolnexus._plugin import rewrite
from tests.support.plugin_projects import CHAT_CONFTEST

PROBE = """
import sys

import pytest
from _pytest.assertion.rewrite import AssertionRewritingHook


def loader_of(name):
    rewritten = isinstance(sys.modules[name].__loader__, AssertionRewritingHook)
    return "rewritten" if rewritten else "plain"


@pytest.mark.cassette
def test_probe(chat):
    assert chat("hi")
    import pytest_toolnexus.conformance  # imported by the test, after pytest is configured

    for name in ("pytest_toolnexus._session.session", "pytest_toolnexus._plugin.serve",
                 "pytest_toolnexus.conformance", "pytest_toolnexus.plugin"):
        print(f"LOADER {name} {loader_of(name)}")
"""


def test_the_machinery_is_not_rewritten_and_conformance_is(pytester, emulator):
    pytester.makeconftest(CHAT_CONFTEST)
    pytester.makepyfile(test_probe=PROBE)
    assert pytester.runpytest("-p", "no:hypothesispytest", "--cassette-record=once").ret == 0

    result = pytester.runpytest_subprocess(
        "-p",
        "no:hypothesispytest",
        "-p",
        "no:randomly",
        "-s",
        "-W",
        "error::pytest.PytestAssertRewriteWarning",  # pytest has nothing to warn of
    )

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*LOADER pytest_toolnexus._session.session plain*",
            "*LOADER pytest_toolnexus._plugin.serve plain*",
            "*LOADER pytest_toolnexus.conformance rewritten*",
            # imported by the entry point, before pytest was configured: rewritten as before
            "*LOADER pytest_toolnexus.plugin rewritten*",
        ]
    )


def test_a_configured_run_marks_conformance_only(pytester):
    from _pytest.assertion.rewrite import assertstate_key

    config = pytester.parseconfigure("-p", "no:randomly")
    marked = config.stash[assertstate_key].hook._must_rewrite

    assert "pytest_toolnexus" not in marked
    assert "pytest_toolnexus.conformance" in marked
    assert rewrite.exempt_from_rewrite(config) is False  # done once, by pytest_configure


def test_without_the_rewrite_hook_nothing_changes(pytester):
    config = pytester.parseconfigure("--assert=plain", "-p", "no:randomly")

    assert rewrite.exempt_from_rewrite(config) is False
