"""The plugin's own hooks, each implemented in a ``conftest.py`` as users write them:
``pytest_toolnexus_redact``, ``pytest_toolnexus_match``, ``pytest_toolnexus_cassette_path`` and
``pytest_toolnexus_before_write``; and a conftest's hooks apply to the tests under its folder.

The loopback emulator belongs to the outer test, so the outer test counts what reached it.
"""

import re

from pytest_toolnexus import load_cassette
from tests.support.plugin_projects import CHAT_CONFTEST

HELPERS = CHAT_CONFTEST


def run(pytester, *args):
    return pytester.runpytest("-p", "no:hypothesispytest", *args)


def literal(text):
    """``text`` as an fnmatch pattern that matches only itself."""
    return re.sub(r"([\[*?])", r"[\1]", text)


def test_redact_hook_masks_a_body_field_before_the_cassette_is_written(pytester, emulator):
    pytester.makeconftest(
        HELPERS
        + """

import dataclasses


def pytest_toolnexus_redact(interaction):
    body = interaction.request.body
    value = getattr(body, "value", None)
    if not isinstance(value, dict) or "user_secret" not in value.get("metadata", {}):
        return None
    masked = {**value, "metadata": {**value["metadata"], "user_secret": "MASKED"}}
    request = dataclasses.replace(interaction.request, body=dataclasses.replace(body, value=masked))
    return dataclasses.replace(interaction, request=request)
"""
    )
    pytester.makepyfile(
        test_redact="""
        import pytest


        @pytest.mark.cassette(ignore_body=["metadata.user_secret"])
        def test_chat(chat):
            assert chat("hi", metadata={"user_secret": "hunter2-do-not-store"})
        """
    )

    run(pytester, "--cassette-record=once").assert_outcomes(passed=1)

    path = pytester.path / "cassettes" / "test_redact" / "test_chat.msgpack"
    request = load_cassette(path).interactions[0].request
    assert request.body.value["metadata"] == {"user_secret": "MASKED"}
    assert b"hunter2" not in path.read_bytes()
    assert emulator.requests[0].body["metadata"] == {"user_secret": "hunter2-do-not-store"}
    # Then the masked cassette still replays: the field is ignored when matching
    run(pytester).assert_outcomes(passed=1)
    assert len(emulator.requests) == 1


MATCH_HOOK = """

def pytest_toolnexus_match(request, recorded):
    live, stored = request.body, getattr(recorded.body, "value", None)
    if not (isinstance(live, dict) and isinstance(stored, dict)):
        return None
    without_seed = lambda body: {k: v for k, v in body.items() if k != "seed"}
    return request.url == recorded.url and without_seed(live) == without_seed(stored)
"""


def test_match_hook_decides_which_recording_answers(pytester, emulator):
    pytester.makeconftest(HELPERS + MATCH_HOOK)
    pytester.makepyfile(
        test_match="""
        import pytest


        @pytest.mark.cassette
        def test_chat(chat):
            assert chat("hi", seed=1)
        """
    )
    run(pytester, "--cassette-record=once").assert_outcomes(passed=1)
    pytester.makepyfile(
        test_match="""
        import pytest


        @pytest.mark.cassette
        def test_chat(chat):
            assert chat("hi", seed=2)
        """
    )

    # When the hook ignores the seed, the changed request replays
    with_hook = run(pytester)
    # When the hook is gone, the same request is a miss on the seed
    pytester.makeconftest(HELPERS)
    without_hook = run(pytester)

    with_hook.assert_outcomes(passed=1)
    without_hook.assert_outcomes(failed=1)
    without_hook.stdout.fnmatch_lines(["E  *" + literal("root['seed']: recorded 1, sent 2")])
    assert len(emulator.requests) == 1


def test_cassette_path_hook_chooses_the_file(pytester, emulator, tmp_path):
    elsewhere = tmp_path / "elsewhere.msgpack"
    pytester.makeconftest(
        HELPERS
        + f"""

def pytest_configure(config):
    config.addinivalue_line("markers", "provider(name): the provider a test talks to")


def pytest_toolnexus_cassette_path(item, default):
    if item.name == "test_absolute":
        return {str(elsewhere)!r}
    marker = item.get_closest_marker("provider")
    if marker is None:
        return None
    return f"{{marker.args[0]}}/{{default.name}}"
"""
    )
    pytester.makepyfile(
        test_paths="""
        import pytest


        @pytest.mark.provider("openai")
        @pytest.mark.cassette
        def test_by_provider(chat):
            chat("by provider")


        @pytest.mark.cassette
        def test_absolute(chat):
            chat("absolute")


        @pytest.mark.cassette
        def test_default(chat):
            chat("default")
        """
    )

    recorded = run(pytester, "--cassette-record=once")
    replayed = run(pytester)

    recorded.assert_outcomes(passed=3)
    recorded.stdout.fnmatch_lines(
        [
            "cassettes: 3 used, 0 replayed, 3 recorded, 3 written",
            f"  written: {elsewhere}",
            "  written: cassettes/openai/test_by_provider.msgpack",
            "  written: cassettes/test_paths/test_default.msgpack",
        ]
    )
    replayed.assert_outcomes(passed=3)
    replayed.stdout.fnmatch_lines(["cassettes: 3 used, 3 replayed, 0 recorded, 0 written"])
    assert elsewhere.is_file()
    assert len(emulator.requests) == 3


def test_before_write_hook_adds_meta_and_every_implementation_runs(pytester, emulator):
    pytester.makeconftest(
        HELPERS
        + """

def pytest_toolnexus_before_write(cassette, item):
    cassette.meta["written_by"] = item.nodeid
    cassette.meta["interactions"] = len(cassette.interactions)
"""
    )
    pytester.makepyfile(
        plugin_team="""
        def pytest_toolnexus_before_write(cassette):
            cassette.meta["team"] = "llm-platform"
        """,
        test_meta="""
        import pytest


        @pytest.mark.cassette(meta={"source": "the loopback emulator"})
        def test_chat(chat):
            chat("one")
            chat("two")
        """,
    )

    pytester.syspathinsert()
    run(pytester, "-p", "plugin_team", "--cassette-record=once").assert_outcomes(passed=1)

    meta = load_cassette(pytester.path / "cassettes" / "test_meta" / "test_chat.msgpack").meta
    assert meta["written_by"] == "test_meta.py::test_chat"
    assert meta["interactions"] == 2
    assert meta["team"] == "llm-platform"
    assert meta["source"] == "the loopback emulator"


def test_a_conftest_hook_applies_only_to_the_tests_under_its_folder(pytester, emulator):
    pytester.makeconftest(HELPERS)
    for team in ("alpha", "beta"):
        folder = pytester.mkpydir(team)
        folder.joinpath("conftest.py").write_text(
            f"""
def pytest_toolnexus_before_write(cassette):
    cassette.meta.setdefault("conftests", []).append({team!r})


def pytest_toolnexus_cassette_path(item, default):
    return "{team}-" + default.name
"""
        )
        folder.joinpath(f"test_{team}.py").write_text(
            """
import pytest


@pytest.mark.cassette
def test_chat(chat):
    chat("hello")
"""
        )

    run(pytester, "--cassette-record=once").assert_outcomes(passed=2)

    for team in ("alpha", "beta"):
        cassette = load_cassette(pytester.path / "cassettes" / f"{team}-test_chat.msgpack")
        assert cassette.meta["conftests"] == [team]
