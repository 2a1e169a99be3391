"""The plugin under pytest-xdist, in its own processes: recording with ``-n 2`` loses no
interaction and tears no file, even for one cassette that tests on both workers share; the
result replays with ``-n 2`` without the server; and the end-of-run summary counts what the
workers did, merged on the controller.
"""

import re

from pytest_toolnexus import load_cassette

SUITE = """
import os

import httpx
import pytest

URL = os.environ["EMULATOR_URL"] + "/v1/chat/completions"


def chat(text):
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    with httpx.Client() as client:
        response = client.post(URL, json=body)
    assert response.status_code == 200


@pytest.mark.cassette
@pytest.mark.parametrize("n", range(8))
def test_own(n):
    chat(f"own {n}")


# Two xdist groups, so that loadgroup hands the shared cassette's tests to both workers.
@pytest.mark.cassette("shared")
@pytest.mark.parametrize(
    "n", [pytest.param(n, marks=pytest.mark.xdist_group(f"half{n % 2}")) for n in range(6)]
)
def test_shared(n):
    chat(f"shared {n}")
"""


def run(pytester, *args):
    return pytester.runpytest_subprocess(
        "-p", "no:hypothesispytest", "-n", "2", "--dist=loadgroup", "-v", *args
    )


def test_recording_and_replaying_under_two_workers(pytester, emulator):
    pytester.makepyfile(test_suite=SUITE)

    # When the suite records with two workers
    recorded = run(pytester, "--cassette-record=once")

    # Then every test passed, the shared cassette's tests ran on both workers, and the
    # controller's summary counts every worker's cassettes
    recorded.assert_outcomes(passed=14)
    shared_on = set(
        re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED test_suite.py::test_shared", str(recorded.stdout))
    )
    assert shared_on == {"gw0", "gw1"}
    recorded.stdout.fnmatch_lines(
        [
            "*= pytest-toolnexus =*",
            "cassettes: 9 used, 0 replayed, 9 recorded, 9 written",
            "  written: cassettes/test_suite/shared.msgpack",
            *[f"  written: cassettes/test_suite/test_own-{n}.msgpack" for n in range(8)],
        ]
    )
    assert len(emulator.requests) == 14

    # And every file is whole, and the shared one holds one interaction per test that used it
    folder = pytester.path / "cassettes" / "test_suite"
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted([f"test_own-{n}.msgpack" for n in range(8)] + ["shared.msgpack"])
    texts = {}
    for name in names:
        cassette = load_cassette(folder / name)
        texts[name] = [
            i.request.body.value["messages"][0]["content"] for i in cassette.interactions
        ]
    assert sorted(texts.pop("shared.msgpack")) == [f"shared {n}" for n in range(6)]
    assert texts == {f"test_own-{n}.msgpack": [f"own {n}"] for n in range(8)}

    # When the suite replays with two workers, the server is not asked again
    replayed = run(pytester, "--cassette-record=none")

    replayed.assert_outcomes(passed=14)
    replayed.stdout.fnmatch_lines(["cassettes: 9 used, 9 replayed, 0 recorded, 0 written"])
    replayed.stdout.no_fnmatch_line("*UnusedInteractionsWarning*")
    assert len(emulator.requests) == 14
