"""A cassette miss in an async test run by anyio fails that test and nothing else.

anyio runs a module's async tests in one runner task and ends it on a ``BaseException`` that
is not one of pytest's outcomes; a miss is one (so code under test cannot swallow it). Before
the plugin let a miss leave an async test as an ``Exception`` too, the task died with it,
asyncio logged "Task exception was never retrieved" with the miss's traceback when it was
collected, and on Python 3.11 that log, run inside an import pytest rewrites, ended the run
with ``INTERNALERROR> SystemError: AST constructor recursion depth mismatch``.
"""

pytest_plugins = ["pytester"]

TESTS = """
import gc

import httpx
import pytest

from pytest_toolnexus import CassetteMissError, use_cassette


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.cassette("nothing.msgpack")
async def test_a_miss_through_the_marker():
    async with httpx.AsyncClient() as client:
        await client.get("https://api.example.invalid/v1/models")


@pytest.mark.anyio
async def test_a_miss_in_a_block(tmp_path):
    with use_cassette(tmp_path / "nothing.msgpack"):
        async with httpx.AsyncClient() as client:
            await client.get("https://api.example.invalid/v1/files")


@pytest.mark.anyio
async def test_a_miss_the_test_expects():
    with pytest.raises(CassetteMissError) as caught:
        with use_cassette("nowhere.msgpack"):
            async with httpx.AsyncClient() as client:
                await client.get("https://api.example.invalid/v1/expected")
    assert type(caught.value) is CassetteMissError  # inside the test it is the miss as raised


@pytest.mark.anyio
async def test_after_them_in_the_same_runner(caplog):
    gc.collect()  # a runner task that died with a miss would be logged now
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def test_a_plain_test_still_runs():
    assert True
"""


def test_a_miss_fails_its_async_test_and_leaves_anyios_runner_and_the_run_whole(
    pytester, monkeypatch
):
    monkeypatch.setenv("COLUMNS", "400")  # the summary lines whole
    pytester.makepyfile(test_async=TESTS)

    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")

    result.assert_outcomes(passed=3, failed=2)
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
    assert "never retrieved" not in out
    result.stdout.fnmatch_lines(
        [
            "FAILED test_async.py::test_a_miss_through_the_marker - "
            "pytest_toolnexus.CassetteMissError: cassette *",
            "FAILED test_async.py::test_a_miss_in_a_block - "
            "pytest_toolnexus.CassetteMissError: cassette *",
        ]
    )
    assert "GET https://api.example.invalid/v1/models" in out
    # The report still leads with the test's own line, not the plugin's wrapper.
    result.stdout.fnmatch_lines(["test_async.py:*: CassetteMissError"])
    assert "async_tests.py" not in out
