"""The timeline data, as users read it: ``pytest-toolnexus show --json`` for one cassette, and
the run document ``--cassette-report=run.json`` writes, checked against the times the
cassettes were built with (tests/support/report_project.py) and what the tests did."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_toolnexus import Cassette
from tests.support.report_project import (
    END_AT,
    EVENT_TIMES,
    FAKE_KEY,
    HEADERS_AT,
    URL,
    make_project,
    stream_interaction,
    timed_out,
    too_many,
)

ROOT = Path(__file__).resolve().parent.parent


def cli(*args):
    result = subprocess.run(
        [sys.executable, "-m", "pytest_toolnexus", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    return result.returncode, result.stdout, result.stderr


def test_show_json_gives_each_interactions_recorded_arrivals(tmp_path):
    path = tmp_path / "retry.msgpack"
    Cassette(path, [too_many(), stream_interaction(), timed_out()], {"source": "a test"}).save(
        unsafe_verbatim=True
    )

    code, out, err = cli("show", "--json", path)

    assert code == 0, err
    document = json.loads(out)
    assert document["schema"] == "pytest-toolnexus/cassette-timeline"
    assert document["version"] == 1
    assert document["cassette"] == str(path)
    assert document["meta"] == {"source": "a test"}
    first, second, third = document["interactions"]
    assert (first["position"], first["status"], first["kind"]) == (0, 429, "json")
    assert first["pieces"] == [{"t": 40.0, "label": "json body"}]
    assert ["retry-after", "1"] in first["headers"]
    assert (second["method"], second["url"], second["status"]) == ("POST", URL, 200)
    assert [p["t"] for p in second["pieces"]] == EVENT_TIMES
    assert (second["headers_at"], second["end_at"], second["complete"]) == (
        HEADERS_AT,
        END_AT,
        True,
    )
    # Only what differs between the pieces labels them; the event name leads.
    assert [p["label"] for p in second["pieces"]] == [
        "choices.0.delta.content=Hel",
        "delta: choices.0.delta.content=lo",
        "[DONE]",
    ]
    assert second["error"] is None
    assert (third["status"], third["kind"], third["pieces"]) == (None, None, [])
    assert third["error"] == {"kind": "ConnectTimeout", "message": "timed out", "t": 5000.0}


def test_show_json_masks_a_secret_the_cassette_holds(tmp_path):
    path = tmp_path / "leaky.msgpack"
    Cassette(path, [stream_interaction()], {}).save(unsafe_verbatim=True)

    code, out, _ = cli("show", "--json", path)

    assert code == 0
    assert FAKE_KEY not in out
    assert ["x-debug", "[secret]"] in json.loads(out)["interactions"][0]["headers"]


def test_show_json_names_a_corrupt_file(tmp_path):
    good = tmp_path / "good.msgpack"
    Cassette(good, [stream_interaction()], {}).save(unsafe_verbatim=True)
    corrupt = tmp_path / "corrupt.msgpack"
    corrupt.write_bytes(good.read_bytes()[:40])

    code, out, err = cli("show", "--json", corrupt)

    assert code == 1
    assert out == ""
    assert err.startswith(f"error: cassette {corrupt} is truncated or not msgpack")


@pytest.fixture
def run_document(pytester, emulator):
    make_project(pytester.path)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--cassette-report=out/run.json")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines([f"pytest-toolnexus: cassette report {pytester.path}/out/run.json"])
    text = (pytester.path / "out" / "run.json").read_text()
    return text, {t["nodeid"].split("::")[1]: t for t in json.loads(text)["tests"]}


def test_the_run_document_lists_each_test_with_its_outcome(run_document):
    text, tests = run_document

    document = json.loads(text)
    assert (document["schema"], document["version"]) == ("pytest-toolnexus/run", 1)
    assert list(tests) == ["test_stream", "test_retry_then_stream", "test_miss", "test_recorded"]
    assert {name: t["outcome"] for name, t in tests.items()} == {
        "test_stream": "passed",
        "test_retry_then_stream": "passed",
        "test_miss": "failed",
        "test_recorded": "passed",
    }
    assert tests["test_stream"]["cassette"] == "cassettes/test_app/test_stream.msgpack"
    assert FAKE_KEY not in text


def test_a_replayed_stream_shows_recorded_arrivals_against_deliveries(run_document):
    _, tests = run_document
    stream = tests["test_stream"]

    assert (stream["record_mode"], stream["timing"], stream["clock"]) == (
        "none",
        "virtual",
        "virtual",
    )
    assert (stream["replayed"], stream["recorded"], stream["written"]) == (1, 0, False)
    (request,) = stream["requests"]
    assert (request["method"], request["url"], request["answered"]) == ("POST", URL, 200)
    assert request["sent_at"] == 0.0
    assert [p["t"] for p in request["pieces"]] == EVENT_TIMES
    # On the virtual clock each piece reaches the client at its recorded time.
    assert request["delivered"] == pytest.approx(EVENT_TIMES, abs=0.01)
    assert (request["headers_at"], request["end_at"]) == (HEADERS_AT, END_AT)
    assert request["read_to_end"] is True
    assert ["x-debug", "[secret]"] in request["headers"]


def test_retries_and_sleeps_sit_on_one_time_axis(run_document):
    _, tests = run_document
    retry = tests["test_retry_then_stream"]

    first, second = retry["requests"]
    assert (first["answered"], second["answered"]) == (429, 200)
    (sleep,) = retry["sleeps"]
    assert (sleep["kind"], sleep["duration"]) == ("time.sleep", 1000.0)
    # The 429's body is read whole at its recorded end (40 ms), the sleep starts then, and the
    # retry is sent when the sleep ends.
    assert first["delivered"] == pytest.approx([40.0], abs=0.01)
    assert sleep["at"] == pytest.approx(40.0, abs=0.01)
    assert second["sent_at"] == pytest.approx(1040.0, abs=0.01)
    assert retry["clock_ms"] == pytest.approx(1040.0 + END_AT, abs=0.01)
    assert retry["saved_ms"] == pytest.approx(retry["clock_ms"] - retry["wall_ms"], abs=0.01)
    assert retry["wall_ms"] < retry["clock_ms"]


def test_a_miss_carries_its_message_with_the_nearest_recording(run_document):
    _, tests = run_document
    miss = tests["test_miss"]

    (message,) = miss["misses"]
    assert "POST https://api.example.invalid/v1/chat/completions" in message
    assert "cassettes/test_app/test_miss.msgpack" in message
    assert "something else entirely" in message
    assert "hello" in message  # the nearest recording's side of the diff
    assert miss["requests"] == []
    assert miss["unused"] == ["#0 POST https://api.example.invalid/v1/chat/completions"]


def test_a_recording_test_is_counted_as_recorded_and_written(run_document):
    _, tests = run_document
    recorded = tests["test_recorded"]

    assert (recorded["record_mode"], recorded["timing"], recorded["clock"]) == (
        "once",
        "virtual",
        "real",
    )
    assert recorded["saved_ms"] == 0.0
    assert (recorded["replayed"], recorded["recorded"], recorded["written"]) == (0, 1, True)
    (request,) = recorded["requests"]
    assert request["replayed"] is False
    assert request["answered"] == 200
    assert len(request["pieces"]) == 1
    assert len(request["delivered"]) == 1


def test_the_ini_key_writes_the_report_where_it_says(pytester, emulator):
    make_project(pytester.path)
    pytester.makeini("[pytest]\ncassette_report = reports/run.json\n")

    result = pytester.runpytest_subprocess("-p", "no:randomly", "-k", "test_stream")

    result.assert_outcomes(passed=1, deselected=3)
    (test,) = json.loads((pytester.path / "reports" / "run.json").read_text())["tests"]
    assert test["nodeid"] == "test_app.py::test_stream"
    assert test["outcome"] == "passed"


def test_no_report_is_written_unless_asked_for(pytester, emulator):
    make_project(pytester.path)

    result = pytester.runpytest_subprocess("-p", "no:randomly", "-k", "test_stream")

    result.assert_outcomes(passed=1, deselected=3)
    assert "cassette report" not in result.stdout.str()
    assert [*pytester.path.rglob("*.html"), *pytester.path.rglob("*.json")] == []
