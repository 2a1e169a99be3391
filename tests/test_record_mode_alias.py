"""pytest-recording's ``--record-mode`` keeps working once pytest-recording is gone (issue 24,
point 4): taken as ``--cassette-record``, with a warning that says what to write instead.
pytest-recording is installed here, so each run disables it with ``-p no:recording``, as an
uninstalled one would be; while it is loaded the flag stays its own."""

from tests.support.servers import Fixed, LoopbackServer

pytest_plugins = ["pytester"]

TEST = """
import os

import httpx
import pytest


@pytest.mark.cassette
def test_answer():
    assert httpx.get(os.environ["SERVER_URL"] + "/v1/answer").json() == {"answer": 42}
"""


def test_record_mode_records_as_cassette_record_with_a_warning(pytester, monkeypatch):
    pytester.makepyfile(test_alias=TEST)
    with LoopbackServer(Fixed(200, [("Content-Type", "application/json")], b'{"answer":42}')) as s:
        monkeypatch.setenv("SERVER_URL", s.origin)
        result = pytester.runpytest_subprocess("-p", "no:recording", "--record-mode=new_episodes")
        result.assert_outcomes(passed=1)
        assert len(s.requests) == 1
    result.stdout.fnmatch_lines(
        ["*--record-mode=new_episodes is pytest-recording's flag*--cassette-record=new*"]
    )
    assert list(pytester.path.glob("cassettes/**/test_answer.msgpack"))
    # the server is gone; replaying needs no flag
    pytester.runpytest_subprocess("-p", "no:recording").assert_outcomes(passed=1)


def test_a_bad_record_mode_names_the_choices(pytester):
    pytester.makepyfile(test_alias=TEST)
    result = pytester.runpytest_subprocess("-p", "no:recording", "--record-mode=sometimes")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*--record-mode*invalid choice: 'sometimes'*new_episodes*"])


def test_while_pytest_recording_is_loaded_the_flag_is_its_own(pytester):
    pytester.makepyfile(test_alias="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--record-mode=once")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*pytest-recording's flag*")
