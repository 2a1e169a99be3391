"""Issue 24's done-when: a suite shaped like the second new suite of the first-hour trial
passes after ``pytest-toolnexus migrate --write`` alone. It has the three things that took
three rounds by hand:

- its ``vcr_config`` is code: the fixture returns ``make_vcr_config()``, so migrate can only
  rename it, and vcrpy's keys reach the plugin at run time (point 2);
- one cassette holds a secret-like value (a JSON Web Token's shape), which blocks only its own
  test: that test stays on ``@pytest.mark.vcr`` under pytest-recording, still installed, while
  the rest is migrated (point 1);
- a best-effort probe in ``except Exception`` sends a request no cassette holds, as
  databricks-sdk's ``Config()`` does; vcrpy's miss is an ``Exception``, and under
  ``match_on="vcrpy"`` so is ours (point 3).

The suite runs before and after, in processes of its own, with no network: the cassettes
answer on 127.0.0.1:9, where nothing listens.
"""

import json

# Imported once here: PyYAML's C loader does not survive a second import in one process.
import yaml  # noqa: F401

from pytest_toolnexus import load_cassette
from tests.support.migrate_run import INNER, migrate
from tests.test_migrate_partial import JWT, YAML

CONFTEST = """import pytest


def make_vcr_config():
    config = {"record_mode": "none", "decode_compressed_response": True}
    config["filter_headers"] = ["authorization", ("x-team", "TEAM")]
    return config


@pytest.fixture(scope="module")
def vcr_config():
    return make_vcr_config()
"""

TESTS = """import httpx
import pytest


def ask(q):
    return httpx.post("http://127.0.0.1:9/v1/ask", json={"q": q}).json()


def best_effort_probe():
    # What an SDK's config does: look for a metadata service, and carry on without one.
    try:
        httpx.get("http://127.0.0.1:9/metadata/identity", timeout=1)
    except Exception:
        return None
    return "found"


@pytest.mark.vcr
def test_reply():
    assert ask("reply") == {"answer": "reply"}


@pytest.mark.vcr
def test_login():
    assert "token" in ask("login")


@pytest.mark.vcr
def test_probe_then_reply():
    assert best_effort_probe() is None
    assert ask("probe") == {"answer": "probe"}
"""


def _suite(root):
    files = {
        "conftest.py": CONFTEST,
        "tests/test_api.py": TESTS,
        "tests/cassettes/test_api/test_reply.yaml": ("reply", {"answer": "reply"}),
        "tests/cassettes/test_api/test_login.yaml": ("login", {"token": JWT}),
        "tests/cassettes/test_api/test_probe_then_reply.yaml": ("probe", {"answer": "probe"}),
    }
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, tuple):
            q, answer = content
            content = YAML.format(q=q, answer=json.dumps(answer))
        path.write_text(content)


def test_the_second_suite_passes_after_migrate_write_alone(pytester):
    root = pytester.path
    _suite(root)
    # Given the suite passing under pytest-recording, as it did before
    pytester.runpytest_subprocess(*INNER).assert_outcomes(passed=3)

    # When migrate --write runs, once
    result = migrate(root, "--write")

    # Then the blocked cassette's test stays on vcrpy, named with the command that unblocks it
    assert result.returncode == 1, result.stdout + result.stderr
    assert "@pytest.mark.vcr\ndef test_login():" in (root / "tests/test_api.py").read_text()
    assert "--allow-secret" in result.stderr
    assert JWT not in result.stdout + result.stderr
    # and the rest is migrated: converted cassettes, our marker, the renamed fixture
    for name in ("test_reply", "test_probe_then_reply"):
        assert load_cassette(root / f"cassettes/tests/test_api/{name}.msgpack").interactions
    migrated = (root / "tests/test_api.py").read_text()
    assert "@pytest.mark.cassette\ndef test_reply():" in migrated
    assert "@pytest.mark.cassette\ndef test_probe_then_reply():" in migrated

    # And the whole suite passes as it did, with pytest-recording still installed for the one
    # test that stays on it
    after = pytester.runpytest_subprocess(*INNER, "-W", "default")
    after.assert_outcomes(passed=3)
    out = after.stdout.str()
    # the config made by a function is read, vcrpy's keys named with their native options
    assert "VcrpyOptionWarning" in out
    assert "'filter_headers' is vcrpy's option" in out
    # the swallowed probe is said, not hidden
    after.stdout.fnmatch_lines(
        [
            "misses the code under test caught and went on (as under vcrpy, match_on='vcrpy'):",
            "  tests/test_api.py::test_probe_then_reply: GET http://127.0.0.1:9/metadata/identity",
        ]
    )
