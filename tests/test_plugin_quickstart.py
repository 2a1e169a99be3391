"""The README's first example, copied verbatim into a fresh project: it records once against a
loopback server, then replays with the server gone, and the cassette is where the README says.

The openai SDK reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` from the environment, so the
example's ``openai.OpenAI()`` needs no change to talk to the loopback emulator.
"""

import re
from pathlib import Path

# Imported once here, so that pytester's in-process runs find it loaded.
import openai  # noqa: F401

from pytest_toolnexus import load_cassette
from tests.support.emulator import Emulator

README = Path(__file__).resolve().parent.parent / "README.md"
# This checkout's dev tools include hypothesis, whose plugin a new user would not have.
NO_HYPOTHESIS = ("-p", "no:hypothesispytest")


def readme_example():
    """The first ```python block of the README, exactly as written there."""
    blocks = re.findall(r"^```python\n(.*?)^```$", README.read_text(), re.MULTILINE | re.DOTALL)
    assert blocks, "README.md has no ```python block"
    return blocks[0]


def readme_cassette_location(test_file, test_name):
    """Where the README says the cassette lands, filled in for one test."""
    text = README.read_text()
    found = re.search(r"`(cassettes/<test file path>/<test name>\.msgpack)`", text)
    assert found, "README.md no longer says where the cassette lands"
    # The README's worked example of the rule, which must follow it too.
    example = "`tests/test_openai.py::test_chat` records `cassettes/tests/test_openai/test_chat"
    assert example in text
    template = found.group(1)
    return template.replace("<test file path>", test_file).replace("<test name>", test_name)


def test_the_readme_example_records_once_then_replays_offline(pytester, monkeypatch):
    example = readme_example()
    test_name = re.search(r"^def (test_\w+)\(", example, re.MULTILINE).group(1)
    # In a tests/ folder, as most suites keep them: the folder is part of the cassette's path.
    pytester.mkdir("tests").joinpath("test_quickstart.py").write_text(example)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-a-secret")

    # Given a loopback server that streams its deltas 50 ms apart
    with Emulator(events=5, delay=0.05) as emulator:
        monkeypatch.setenv("OPENAI_BASE_URL", emulator.base_url + "/v1")
        recorded = pytester.runpytest(*NO_HYPOTHESIS, "--cassette-record=once")
        hits = len(emulator.requests)

    # When the server is gone and the suite runs with no option at all
    replayed = pytester.runpytest(*NO_HYPOTHESIS)

    recorded.assert_outcomes(passed=1)
    replayed.assert_outcomes(passed=1)
    assert hits == 1
    location = readme_cassette_location("tests/test_quickstart", test_name)
    assert location == f"cassettes/tests/test_quickstart/{test_name}.msgpack"
    recorded.stdout.fnmatch_lines([f"  written: {location}"])
    replayed.stdout.fnmatch_lines(["cassettes: 1 used, 1 replayed, 0 recorded, 0 written"])
    cassette = load_cassette(pytester.path / location)
    assert [i.request.url for i in cassette.interactions] == [
        f"{emulator.base_url}/v1/chat/completions"
    ]
