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


# --dist=loadscope hands each class, whole, to one worker: two classes for two workers, so
# the shared cassette's tests run on both, in whatever order the tests were collected.
class TestEven:
    @pytest.mark.cassette
    @pytest.mark.parametrize("n", [0, 2, 4, 6])
    def test_own(self, n):
        chat(f"own {n}")

    @pytest.mark.cassette("shared")
    @pytest.mark.parametrize("n", [0, 2, 4])
    def test_shared(self, n):
        chat(f"shared {n}")


class TestOdd:
    @pytest.mark.cassette
    @pytest.mark.parametrize("n", [1, 3, 5, 7])
    def test_own(self, n):
        chat(f"own {n}")

    @pytest.mark.cassette("shared")
    @pytest.mark.parametrize("n", [1, 3, 5])
    def test_shared(self, n):
        chat(f"shared {n}")
"""

OWN = {n: f"{'TestOdd' if n % 2 else 'TestEven'}.test_own-{n}.msgpack" for n in range(8)}


def run(pytester, *args):
    return pytester.runpytest_subprocess(
        "-p", "no:hypothesispytest", "-n", "2", "--dist=loadscope", "-v", *args
    )


def test_recording_and_replaying_under_two_workers(pytester, emulator):
    pytester.makepyfile(test_suite=SUITE)

    # When the suite records with two workers
    recorded = run(pytester, "--cassette-record=once")

    # Then every test passed, the shared cassette's tests ran on both workers, and the
    # controller's summary counts every worker's cassettes
    recorded.assert_outcomes(passed=14)
    shared_on = set(
        re.findall(
            r"\[(gw\d)\] \[ *\d+%\] PASSED test_suite.py::Test\w+::test_shared",
            str(recorded.stdout),
        )
    )
    assert shared_on == {"gw0", "gw1"}
    recorded.stdout.fnmatch_lines(
        [
            "*= pytest-toolnexus =*",
            "cassettes: 9 used, 0 replayed, 9 recorded, 9 written",
            *[f"  written: cassettes/test_suite/{name}" for name in sorted(OWN.values())],
            "  written: cassettes/test_suite/shared.msgpack",
        ]
    )
    assert len(emulator.requests) == 14

    # And every file is whole, and the shared one holds one interaction per test that used it
    folder = pytester.path / "cassettes" / "test_suite"
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted([*OWN.values(), "shared.msgpack"])
    texts = {}
    for name in names:
        cassette = load_cassette(folder / name)
        texts[name] = [
            i.request.body.value["messages"][0]["content"] for i in cassette.interactions
        ]
    assert sorted(texts.pop("shared.msgpack")) == [f"shared {n}" for n in range(6)]
    assert texts == {name: [f"own {n}"] for n, name in OWN.items()}

    # When the suite replays with two workers, the server is not asked again
    replayed = run(pytester, "--cassette-record=none")

    replayed.assert_outcomes(passed=14)
    replayed.stdout.fnmatch_lines(["cassettes: 9 used, 9 replayed, 0 recorded, 0 written"])
    replayed.stdout.no_fnmatch_line("*UnusedInteractionsWarning*")
    assert len(emulator.requests) == 14
