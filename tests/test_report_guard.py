"""The run report never decides a test's outcome and never leaves a half-written file: its
data step failing leaves the test's own checks in place (with a warning naming the test), a
report path that cannot be written is said plainly, and a cassette written by hand or
verbatim reaches neither the page nor the JSON with its credentials."""

import json

from pytest_toolnexus import Cassette, Headers, Interaction, RecordedRequest, RecordedResponse
from tests.support.report_project import URL, make_project, stream_interaction
from tests.test_report_data import cli

# The report's data step breaks for every test; the tests themselves are those of the report
# project, plus one that leaves its recording unplayed, which its teardown must still fail.
BREAK_THE_DATA_STEP = """
import pytest_toolnexus._report.run as run


def broken(*args, **kwargs):
    raise RuntimeError("the data step broke")


run.run_entry = broken
"""

LEAVES_ONE_UNUSED = """

@pytest.mark.cassette(unused="fail")
def test_leaves_one_unused():
    pass
"""


def test_a_broken_data_step_warns_and_leaves_the_tests_own_checks(pytester, emulator):
    make_project(pytester.path)
    with (pytester.path / "test_app.py").open("a") as tests:
        tests.write(LEAVES_ONE_UNUSED)
    (pytester.path / "cassettes" / "test_app" / "test_leaves_one_unused.msgpack").write_bytes(
        (pytester.path / "cassettes" / "test_app" / "test_stream.msgpack").read_bytes()
    )
    pytester.makeconftest(BREAK_THE_DATA_STEP)

    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-k", "stream or unused", "--cassette-report=run.json"
    )

    # Before the fix the data step ran first, so its error stood in for the unused check's.
    result.assert_outcomes(passed=3, errors=1, deselected=2)  # the error is a teardown's
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaves_one_unused*",
            "test_app.py::test_leaves_one_unused: 1 recorded interaction(s) * were never played*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*PytestWarning: test_app.py::test_stream: pytest-toolnexus could not note its "
            "cassette * for the run report (RuntimeError)*"
        ]
    )
    assert "the data step broke" not in out
    assert json.loads((pytester.path / "run.json").read_text())["tests"] == []


def test_a_report_path_that_cannot_be_written_is_an_error_line(pytester, emulator):
    make_project(pytester.path)
    (pytester.path / "out" / "run.html").mkdir(parents=True)  # a folder where the file goes

    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-k", "test_stream", "--cassette-report=out/run.html"
    )

    result.assert_outcomes(passed=1, deselected=3)
    assert result.ret == 0
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(
        [
            "pytest-toolnexus: error: cannot write the cassette report to "
            f"{pytester.path}/out/run.html: *"
        ]
    )
    assert sorted(p.name for p in (pytester.path / "out").iterdir()) == ["run.html"]


def test_show_html_to_a_path_that_cannot_be_written_exits_2(tmp_path):
    path = tmp_path / "one.msgpack"
    Cassette(path, [stream_interaction()], {}).save(unsafe_verbatim=True)
    page = tmp_path / "out" / "page.html"
    page.mkdir(parents=True)

    code, _, err = cli("show", "--html", page, path)

    assert code == 2
    assert err.startswith(f"error: cannot write the page of {path} to {page}: ")
    assert [p.name for p in page.parent.iterdir()] == ["page.html"]


OPAQUE = "opaque" + "7Hq2Zr" * 3  # no secret pattern knows it: only the credential names do


def keyed_interaction():
    interaction = stream_interaction()
    request = interaction.request
    response = interaction.response
    assert response is not None
    return Interaction(
        RecordedRequest(request.method, f"{URL}?key={OPAQUE}", request.headers, request.body),
        RecordedResponse(
            response.status,
            Headers([*response.headers.multi_items(), ("x-api-key", OPAQUE)]),
            response.body,
            t_headers=response.t_headers,
            t_end=response.t_end,
        ),
    )


def test_a_verbatim_cassettes_credential_url_and_headers_are_redacted(tmp_path):
    path = tmp_path / "keyed.msgpack"
    Cassette(path, [keyed_interaction()], {}).save(unsafe_verbatim=True)
    page = tmp_path / "page.html"

    code, out, err = cli("show", "--json", "--html", page, path)

    assert code == 0, err
    (shown,) = json.loads(out)["interactions"]
    assert shown["url"] == f"{URL}?key=REDACTED"
    assert ["x-api-key", "REDACTED"] in shown["headers"]
    html = page.read_text()
    assert OPAQUE not in out
    assert OPAQUE not in html
    assert "key=REDACTED" in html
