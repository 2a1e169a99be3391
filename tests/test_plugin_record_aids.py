"""What users of vcrpy and pytest-recording expect to find: a failing test leaves no recording
behind (unless asked), old cassettes expire, a cassette says which client libraries made it,
matching can be told to compare what vcrpy compared, the ``vcr`` fixture's counters, and a
leftover ``vcr`` marker that nothing serves is an error rather than a live run.

Each test writes a small project with ``pytester`` and runs it in-process against the loopback
emulator, which belongs to the outer test.
"""

import datetime as dt
from importlib import metadata

import httpx  # noqa: F401  (imported once, so pytester's in-process runs find it loaded)
import pytest

from pytest_toolnexus import Cassette, load_cassette
from pytest_toolnexus._cli.main import main as cli
from tests.support.plugin_projects import CHAT_CONFTEST


@pytest.fixture
def project(pytester, emulator):
    pytester.makeconftest(CHAT_CONFTEST)
    return pytester


def run(pytester, *args):
    return pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:randomly", *args)


def cassette_of(pytester, module, test):
    return pytester.path / "cassettes" / module / f"{test}.msgpack"


def age(path, days):
    """Make the cassette at ``path`` look recorded ``days`` ago."""
    cassette = load_cassette(path)
    when = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
    meta = {**cassette.meta, "recorded_at": when.replace(microsecond=0).isoformat()}
    Cassette(path, cassette.interactions, meta).save()


# -- a test that fails while recording ----------------------------------------------------------


def test_a_test_that_fails_while_recording_writes_no_cassette(project, emulator):
    project.makepyfile(
        test_fail="""
        import pytest

        @pytest.mark.cassette
        def test_breaks(chat):
            chat("recorded, then the test fails")
            assert False, "the code under test is wrong"

        @pytest.mark.cassette
        def test_passes(chat):
            chat("kept")
        """
    )

    result = run(project, "--cassette-record=once")

    result.assert_outcomes(passed=1, failed=1)
    assert len(emulator.requests) == 2
    assert not cassette_of(project, "test_fail", "test_breaks").exists()
    assert cassette_of(project, "test_fail", "test_passes").exists()
    result.stdout.fnmatch_lines(
        [
            "*not written, its test failed while recording: "
            "cassettes/test_fail/test_breaks.msgpack (record_on_error=True keeps*"
        ]
    )


def test_record_on_error_keeps_the_recording_of_a_failing_test(project, emulator):
    project.makepyfile(
        test_keep="""
        import pytest

        @pytest.mark.cassette(record_on_error=True)
        def test_breaks(chat):
            chat("kept although the test fails")
            assert False
        """
    )

    run(project, "--cassette-record=once").assert_outcomes(failed=1)

    path = cassette_of(project, "test_keep", "test_breaks")
    [interaction] = load_cassette(path).interactions
    assert interaction.request.body.value["messages"][0]["content"] == (
        "kept although the test fails"
    )


def test_a_failed_rerecord_leaves_the_old_cassette_as_it_was(project, emulator):
    project.makepyfile(
        test_again="""
        import os
        import pytest

        @pytest.mark.cassette
        def test_it(chat):
            chat("first")
            assert os.environ.get("BREAK") != "1"
        """
    )
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    path = cassette_of(project, "test_again", "test_it")
    before = path.read_bytes()

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BREAK", "1")
        run(project, "--cassette-record=all").assert_outcomes(failed=1)

    assert path.read_bytes() == before
    assert len(emulator.requests) == 2


# -- expiry -------------------------------------------------------------------------------------


EXPIRING = """
import pytest

@pytest.mark.cassette(max_age="30d", on_expired="{policy}")
def test_old(chat):
    chat("hello")
"""


def recorded_project(project, policy):
    project.makepyfile(test_exp=EXPIRING.format(policy=policy))
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    return cassette_of(project, "test_exp", "test_old")


def test_a_young_cassette_is_not_expired(project, emulator):
    path = recorded_project(project, "fail")
    age(path, 29)

    result = run(project, "-W", "error::pytest_toolnexus.CassetteExpiredWarning")

    result.assert_outcomes(passed=1)
    assert len(emulator.requests) == 1


def test_an_expired_cassette_warns_by_default_and_still_replays(project, emulator):
    path = recorded_project(project, "warn")
    age(path, 45)

    result = run(project)

    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*CassetteExpiredWarning: cassette cassettes/test_exp/test_old.msgpack was recorded "
            "45 days ago (*), more than max_age=30 days; record it again: "
            "--cassette-record=all, or raise max_age*"
        ]
    )
    assert len(emulator.requests) == 1


def test_an_expired_cassette_fails_with_on_expired_fail(project, emulator):
    path = recorded_project(project, "fail")
    age(path, 31)

    result = run(project)

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*was recorded 31 days ago*more than max_age=30 days*"])
    assert len(emulator.requests) == 1


def test_an_expired_cassette_is_recorded_again_with_on_expired_rerecord(project, emulator):
    path = recorded_project(project, "rerecord")
    age(path, 60)

    result = run(project)

    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*recorded 60 days ago*recording it again*"])
    assert len(emulator.requests) == 2
    recorded_at = dt.datetime.fromisoformat(load_cassette(path).meta["recorded_at"])
    assert dt.datetime.now(dt.UTC) - recorded_at < dt.timedelta(hours=1)


def test_rerecord_does_not_record_in_ci(project, emulator, monkeypatch):
    path = recorded_project(project, "rerecord")
    age(path, 60)
    monkeypatch.setenv("CI", "true")

    result = run(project)

    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*on_expired='rerecord' cannot record here*"])
    assert len(emulator.requests) == 1


def test_a_cassette_with_no_date_only_warns(project, emulator):
    path = recorded_project(project, "fail")
    cassette = load_cassette(path)
    meta = {k: v for k, v in cassette.meta.items() if k != "recorded_at"}
    Cassette(path, cassette.interactions, meta).save()

    result = run(project)

    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*has no recorded_at date, so max_age=30 days cannot be checked*"])


def test_max_age_from_the_ini_file(project, emulator):
    path = recorded_project(project, "warn")
    project.makepyfile(
        test_exp="""
        import pytest

        @pytest.mark.cassette
        def test_old(chat):
            chat("hello")
        """
    )
    project.makeini("[pytest]\ncassette_max_age = 2w\ncassette_on_expired = fail\n")
    age(path, 15)

    run(project).assert_outcomes(errors=1)


@pytest.mark.parametrize("bad", ["soon", "-3d", "0", "3y"])
def test_a_bad_max_age_is_a_usage_error(project, bad):
    project.makepyfile(
        test_bad=f"""
        import pytest

        @pytest.mark.cassette(max_age={bad!r})
        def test_it():
            pass
        """
    )

    result = run(project)

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*test_bad.py::test_it: @pytest.mark.cassette: max_age must be*"])


# -- provenance ---------------------------------------------------------------------------------


def test_a_recording_keeps_the_client_library_versions_and_show_prints_them(
    project, emulator, capsys
):
    project.makepyfile(
        test_versions="""
        import pytest

        @pytest.mark.cassette
        def test_it(chat):
            chat("hello")
        """
    )
    run(project, "--cassette-record=once").assert_outcomes(passed=1)

    path = cassette_of(project, "test_versions", "test_it")
    versions = load_cassette(path).meta["versions"]
    assert versions["httpx"] == metadata.version("httpx")
    capsys.readouterr()
    assert cli(["show", str(path)]) == 0
    shown = capsys.readouterr().out
    [line] = [line for line in shown.splitlines() if "recorded by:" in line]
    assert f"httpx {metadata.version('httpx')}" in line


# -- matching as vcrpy did ----------------------------------------------------------------------


def test_match_on_vcrpy_from_the_ini_file_replays_a_stale_body(project, emulator):
    project.makepyfile(
        test_stale="""
        import os
        import pytest

        @pytest.mark.cassette
        def test_it(chat):
            assert chat(os.environ.get("TEXT", "as recorded"))
        """
    )
    run(project, "--cassette-record=once").assert_outcomes(passed=1)

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TEXT", "the code sends something else now")
        failed = run(project)
        failed.assert_outcomes(failed=1)
        project.makeini("[pytest]\ncassette_match_on = vcrpy\n")
        run(project).assert_outcomes(passed=1)

    assert len(emulator.requests) == 1


def test_match_on_in_the_marker_and_ignore_query(project, emulator):
    project.makepyfile(
        test_query="""
        import os
        import httpx
        import pytest

        @pytest.mark.cassette(match_on=["method", "path", "query"], ignore_query=["beta"])
        def test_it():
            suffix = os.environ.get("SUFFIX", "?v=1")
            body = {"model": "m", "messages": [{"role": "user", "content": suffix}]}
            with httpx.Client() as client:
                r = client.post(os.environ["EMULATOR_URL"] + "/v1/chat/completions" + suffix,
                                json=body)
            assert r.status_code == 200
        """
    )
    run(project, "--cassette-record=once").assert_outcomes(passed=1)

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SUFFIX", "?beta=true&v=1")
        run(project).assert_outcomes(passed=1)
        patch.setenv("SUFFIX", "?v=2")
        run(project).assert_outcomes(failed=1)
    assert len(emulator.requests) == 1


# -- pytest-recording's names -------------------------------------------------------------------


def test_play_count_and_all_played(project, emulator):
    project.makepyfile(
        test_counts="""
        import pytest

        @pytest.mark.cassette
        def test_it(cassette, chat):
            chat("one")
            chat("two")
            if cassette.replay_only:
                assert cassette.play_count == 2
                assert cassette.all_played
            else:
                assert cassette.play_count == 0
        """
    )
    run(project, "--cassette-record=once").assert_outcomes(passed=1)
    run(project).assert_outcomes(passed=1)


def test_a_vcr_marker_nothing_serves_fails_without_reaching_the_network(project, emulator):
    project.makepyfile(
        test_left="""
        import pytest

        @pytest.mark.vcr
        def test_it(chat):
            chat("must not reach the server")
        """
    )

    result = run(project, "-p", "no:recording", "--strict-markers")

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_left.py::test_it is marked @pytest.mark.vcr, but neither pytest-recording "
            "nor pytest-vcr is active*pytest-toolnexus migrate*"
        ]
    )
    assert emulator.requests == []


def test_a_vcr_marker_is_left_to_pytest_recording_when_it_is_active(project, emulator):
    project.makepyfile(
        test_served="""
        import pytest

        @pytest.mark.vcr
        def test_it(vcr):
            assert vcr is not None
        """
    )

    run(project).assert_outcomes(passed=1)


def test_a_stream_left_open_by_a_failing_test_is_not_written_either(project, emulator):
    project.makepyfile(
        test_open="""
        import os
        import httpx
        import pytest

        @pytest.mark.cassette
        def test_breaks():
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
            client = httpx.Client()
            response = client.send(
                client.build_request(
                    "POST", os.environ["EMULATOR_URL"] + "/v1/chat/completions", json=body
                ),
                stream=True,
            )
            next(response.iter_bytes())  # one chunk read, the stream left open
            assert False, "fails mid-stream"
        """
    )

    result = run(project, "--cassette-record=once")

    result.assert_outcomes(failed=1)
    assert len(emulator.requests) == 1
    assert not cassette_of(project, "test_open", "test_breaks").exists()
    result.stdout.fnmatch_lines(["*not written, its test failed while recording*"])


def test_recording_again_is_not_stopped_by_expiry(project, emulator):
    path = recorded_project(project, "fail")
    age(path, 90)

    result = run(project, "--cassette-record=all")

    result.assert_outcomes(passed=1)
    assert len(emulator.requests) == 2
    recorded_at = dt.datetime.fromisoformat(load_cassette(path).meta["recorded_at"])
    assert dt.datetime.now(dt.UTC) - recorded_at < dt.timedelta(hours=1)


def test_expiry_leaves_an_unreadable_cassette_to_the_session(project, emulator):
    path = recorded_project(project, "fail")
    path.write_bytes(b"\x00not a cassette")

    result = run(project)

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*CassetteFormatError*"])
    result.stdout.no_fnmatch_line("*Traceback*_check_expiry*")


def test_a_vcr_marker_the_suite_declares_itself_is_left_alone(project, emulator):
    project.makeini("[pytest]\nmarkers =\n    vcr: our own vcr marker\n")
    project.makepyfile(
        test_own="""
        import pytest

        @pytest.mark.vcr
        def test_it():
            pass
        """
    )

    run(project, "-p", "no:recording", "--strict-markers").assert_outcomes(passed=1)


def test_pytest_recording_loaded_through_pytest_plugins_serves_the_vcr_marker(
    project, emulator, monkeypatch
):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    project.makeconftest(
        "pytest_plugins = ['pytest_toolnexus.plugin', 'pytest_recording.plugin']\n"
    )
    project.makepyfile(
        test_loaded="""
        import pytest

        @pytest.mark.vcr
        def test_it(vcr):
            assert vcr is not None
        """
    )

    project.runpytest_subprocess("-p", "no:randomly").assert_outcomes(passed=1)
