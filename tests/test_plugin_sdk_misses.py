"""A miss seen through the official SDKs: the openai and anthropic clients retry any
``Exception`` and wrap it in ``APIConnectionError: Connection error.``. A cassette miss is not
an ``Exception``, so it reaches the test unwrapped, on the first attempt and with no backoff
sleep, and pytest's short summary leads with the miss message.

Each case records one request against the loopback emulator, then replays with the emulator's
requests counted, sending a request the cassette does not hold.
"""

import json

# Imported once here, so that pytester's in-process runs find them loaded.
import anthropic  # noqa: F401
import openai  # noqa: F401
import pytest

CONFTEST = """
import json
import os

import pytest

BASE = os.environ["EMULATOR_URL"]


@pytest.fixture
def probe(cassette):
    # Torn down before the cassette: what the session saw, for the outer test to read.
    yield
    record = {
        "requests": [r.url for r in cassette.requests],
        "sleeps": [s.seconds for s in cassette.sleeps],
        "misses": len(cassette.misses),
    }
    with open(os.environ["PROBE_FILE"], "w") as out:
        json.dump(record, out)
"""

CASES = {
    "openai_sync": """
import os
import openai
import pytest

@pytest.mark.cassette
def test_it(probe):
    with openai.OpenAI(
        base_url=os.environ["EMULATOR_URL"] + "/v1", api_key="sk-test", max_retries=3
    ) as client:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": os.environ["TEXT"]}]
        )
""",
    "openai_async": """
import os
import openai
import pytest

@pytest.mark.anyio
@pytest.mark.cassette
async def test_it(probe):
    # Closed in the test's own loop: a client left to the garbage collector closes its
    # connections in whatever loop runs then, or in none.
    async with openai.AsyncOpenAI(
        base_url=os.environ["EMULATOR_URL"] + "/v1", api_key="sk-test", max_retries=3
    ) as client:
        stream = await client.chat.completions.create(
            model="m", stream=True, messages=[{"role": "user", "content": os.environ["TEXT"]}]
        )
        async for _ in stream:
            pass
""",
    "anthropic_sync": """
import os
import anthropic
import pytest

@pytest.mark.cassette
def test_it(probe):
    with anthropic.Anthropic(
        base_url=os.environ["EMULATOR_URL"], api_key="sk-ant-test", max_retries=3
    ) as client, client.messages.stream(
        model="m", max_tokens=64, messages=[{"role": "user", "content": os.environ["TEXT"]}]
    ) as stream:
        stream.until_done()
""",
    "anthropic_async": """
import os
import anthropic
import pytest

@pytest.mark.anyio
@pytest.mark.cassette
async def test_it(probe):
    async with anthropic.AsyncAnthropic(
        base_url=os.environ["EMULATOR_URL"], api_key="sk-ant-test", max_retries=3
    ) as client:
        await client.messages.create(
            model="m", max_tokens=64, messages=[{"role": "user", "content": os.environ["TEXT"]}]
        )
""",
}

ANYIO = """
@pytest.fixture
def anyio_backend():
    return "asyncio"
"""


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_miss_through_the_sdk_leads_the_short_summary_with_no_retry(
    pytester, emulator, monkeypatch, case
):
    pytester.makeconftest(CONFTEST + ANYIO)
    pytester.makepyfile(test_sdk=CASES[case])
    probe = pytester.path / "probe.json"
    monkeypatch.setenv("PROBE_FILE", str(probe))
    monkeypatch.setenv("COLUMNS", "400")
    args = ("-p", "no:hypothesispytest", "-p", "no:randomly")

    monkeypatch.setenv("TEXT", "as recorded")
    pytester.runpytest(*args, "--cassette-record=once").assert_outcomes(passed=1)
    assert len(emulator.requests) == 1

    monkeypatch.setenv("TEXT", "something the cassette never saw")
    # A process of its own, as a user's run is: on CPython 3.11.7, in-process runs that follow
    # one another can trip pytest's traceback formatting over a CPython bug (the AST
    # constructor's depth counter, python/cpython#106905, fixed in 3.11.8).
    result = pytester.runpytest_subprocess(*args, "-rf")

    result.assert_outcomes(failed=1)
    path = "/v1/chat/completions" if case.startswith("openai") else "/v1/messages"
    result.stdout.fnmatch_lines(
        [
            "FAILED test_sdk.py::test_it - pytest_toolnexus.CassetteMissError: No recorded "
            f"interaction matches POST {emulator.base_url}{path}"
        ]
    )
    result.stdout.no_fnmatch_line("*APIConnectionError*")
    result.stdout.no_fnmatch_line("*Connection error*")
    # One attempt (each attempt would be one more miss), no backoff, nothing answered.
    seen = json.loads(probe.read_text())
    assert seen == {"requests": [], "sleeps": [], "misses": 1}
    assert len(emulator.requests) == 1
