"""``pytest-toolnexus migrate``, as a pytest-recording user meets it: the dry-run diff and
report, ``--write``, a second run that changes nothing, where each test's cassette goes, and
the untranslated report with file and line.

Each test writes a small suite with hand-made vcrpy YAML cassettes and runs the command in a
subprocess; migrate collects the suite with pytest (in a subprocess of its own).
"""

import subprocess
import sys

import pytest

from pytest_toolnexus import load_cassette

YAML = """interactions:
- request:
    body: '{{"model": "m", "q": "{q}"}}'
    headers:
      Content-Type:
      - application/json
    method: POST
    uri: http://127.0.0.1:9/v1/chat/completions
  response:
    body:
      string: '{{"answer": "{q}"}}'
    headers:
      Content-Type:
      - application/json
    status:
      code: 200
      message: OK
version: 1
"""

CONFTEST = """import pytest


@pytest.fixture
def vcr_config():
    return {
        "filter_headers": ["authorization"],
        "record_mode": "once",
    }
"""

TESTS = """import pytest


@pytest.mark.vcr
def test_reply():
    pass
"""


def migrate(path, *args):
    return subprocess.run(
        [sys.executable, "-m", "pytest_toolnexus", "migrate", str(path), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def suite(pytester, files, cassettes):
    for name, text in files.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for name, q in cassettes.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(YAML.format(q=q))
    return pytester.path


def answers(path):
    return [i.response.body.value["answer"] for i in load_cassette(path).interactions]


def snapshot(root):
    return {
        p: p.read_bytes() for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    }


# -- dry run, --write, a second run -------------------------------------------------------------


def test_the_dry_run_prints_a_unified_diff_and_a_report_and_writes_nothing(pytester):
    # Given a pytest-recording suite with one recorded test
    root = suite(
        pytester,
        {"conftest.py": CONFTEST, "tests/test_chat.py": TESTS},
        {"tests/cassettes/test_chat/test_reply.yaml": "a"},
    )
    before = snapshot(root)

    # When migrate runs without --write
    result = migrate(root)

    # Then it shows the edit and the cassette it would write, and leaves every file alone
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "--- a/tests/test_chat.py\n+++ b/tests/test_chat.py\n" in out
    assert "-@pytest.mark.vcr\n+@pytest.mark.cassette\n" in out
    assert "-def vcr_config():\n+def cassette_config():\n" in out
    assert '-        "filter_headers": ["authorization"],\n' in out
    assert '-        "record_mode": "once",\n+        "record": "once",\n' in out
    assert '+        "match_on": "vcrpy",\n' in out
    assert "(dry run: nothing written; --write applies it)" in out
    assert (
        "  would write cassettes/tests/test_chat/test_reply.msgpack (1 interaction(s)) from "
        "tests/cassettes/test_chat/test_reply.yaml\n"
    ) in out
    assert (
        "conftest.py:7: vcr_config: filter_headers ['authorization'] dropped: credential "
        "headers are redacted by default"
    ) in out
    assert snapshot(root) == before


def test_write_applies_it_and_a_second_run_changes_nothing(pytester):
    # Given the same suite
    root = suite(
        pytester,
        {"conftest.py": CONFTEST, "tests/test_chat.py": TESTS},
        {"tests/cassettes/test_chat/test_reply.yaml": "a"},
    )

    # When migrate --write runs, then migrate runs again (dry and with --write)
    wrote = migrate(root, "--write")
    after_write = snapshot(root)
    again = migrate(root)
    again_write = migrate(root, "--write")

    # Then the cassette sits where the plugin looks, the sources are rewritten, and the second
    # runs find nothing to do and touch nothing
    assert wrote.returncode == 0, wrote.stderr
    assert "  wrote cassettes/tests/test_chat/test_reply.msgpack" in wrote.stdout
    assert answers(root / "cassettes/tests/test_chat/test_reply.msgpack") == ["a"]
    assert (root / "tests/test_chat.py").read_text() == TESTS.replace("mark.vcr", "mark.cassette")
    expected = (
        CONFTEST.replace("vcr_config", "cassette_config")
        .replace('        "filter_headers": ["authorization"],\n', "")
        .replace('"record_mode"', '"record"')
        .replace('"once",\n', '"once",\n        "match_on": "vcrpy",\n')
    )
    assert (root / "conftest.py").read_text() == expected
    for run in (again, again_write):
        assert run.returncode == 0, run.stderr
        assert "nothing to change" in run.stdout
        assert "---" not in run.stdout
    assert snapshot(root) == after_write


def test_a_suite_that_does_not_collect_is_refused_with_pytests_words(pytester):
    # Given a suite with a syntax error in a test file
    root = suite(pytester, {"tests/test_bad.py": "def test_x(:\n"}, {})

    # When migrate runs
    result = migrate(root, "--write")

    # Then it stops, says why and quotes pytest
    assert result.returncode == 2
    assert "error: pytest could not collect" in result.stderr
    assert "fix the collection first" in result.stderr
    assert "test_bad.py" in result.stderr


# -- naming -------------------------------------------------------------------------------------

NAMING = """import os

import pytest


@pytest.mark.vcr
class TestOuter:
    def test_method(self):
        pass

    class TestInner:
        def test_nested(self):
            pass


@pytest.mark.vcr
@pytest.mark.parametrize("x", ["a-b", "c/d"])
def test_param(x):
    pass
"""


def test_class_parametrized_and_nested_names_follow_pytest_recording_and_land_on_ours(pytester):
    # Given pytest-recording's names: Class.test, the parametrized id, and for a nested class
    # only the innermost class (request.cls.__name__); "/" in an id becomes "-"
    root = suite(
        pytester,
        {"tests/test_names.py": NAMING},
        {
            "tests/cassettes/test_names/TestOuter.test_method.yaml": "method",
            "tests/cassettes/test_names/TestInner.test_nested.yaml": "nested",
            "tests/cassettes/test_names/test_param[a-b].yaml": "ab",
            "tests/cassettes/test_names/test_param[c-d].yaml": "cd",
        },
    )

    # When migrated
    result = migrate(root, "--write")

    # Then each lands on the plugin's name for the test
    assert result.returncode == 0, result.stderr
    folder = root / "cassettes/tests/test_names"
    assert answers(folder / "TestOuter.test_method.msgpack") == ["method"]
    assert answers(folder / "TestOuter.TestInner.test_nested.msgpack") == ["nested"]
    assert answers(folder / "test_param-a-b.msgpack") == ["ab"]
    assert answers(folder / "test_param-c_d.msgpack") == ["cd"]


OVERRIDES = """import os

import pytest


@pytest.fixture(scope="module")
def vcr_cassette_dir(request):
    return os.path.join(os.path.dirname(request.module.__file__), "recorded")


@pytest.fixture
def default_cassette_name(request):
    return "custom-" + request.node.name


@pytest.mark.vcr
def test_custom():
    pass
"""

DEFAULT_CASSETTE = """import pytest


@pytest.mark.vcr
@pytest.mark.default_cassette("picked")
def test_marker_name():
    pass
"""


def test_vcr_cassette_dir_and_default_cassette_name_overrides_are_followed_then_removed(
    pytester,
):
    # Given a module that overrides both fixtures, and a default_cassette marker
    root = suite(
        pytester,
        {"tests/test_over.py": OVERRIDES, "tests/test_marker.py": DEFAULT_CASSETTE},
        {
            "tests/recorded/custom-test_custom.yaml": "custom",
            "tests/cassettes/test_marker/picked.yaml": "p",
        },
    )

    # When migrated
    result = migrate(root, "--write")

    # Then the files they named are converted to the default paths, and the fixtures and the
    # marker go, each reported
    assert result.returncode == 0, result.stderr
    folder = root / "cassettes/tests/test_over"
    assert answers(folder / "test_custom.msgpack") == ["custom"]
    assert answers(root / "cassettes/tests/test_marker/test_marker_name.msgpack") == ["p"]
    text = (root / "tests/test_over.py").read_text()
    assert "vcr_cassette_dir" not in text
    assert "default_cassette_name" not in text
    assert "default_cassette" not in (root / "tests/test_marker.py").read_text()
    assert "tests/test_over.py:7: the vcr_cassette_dir fixture removed" in result.stdout
    assert "tests/test_over.py:12: the default_cassette_name fixture removed" in result.stdout
    assert "tests/test_marker.py:5: @pytest.mark.default_cassette removed" in result.stdout


SHARED = """import pytest


@pytest.mark.vcr("shared.yaml")
def test_one():
    pass


@pytest.mark.vcr("shared.yaml")
def test_two():
    pass


@pytest.mark.vcr("shared.yaml", "other.yaml")
def test_both():
    pass


@pytest.mark.vcr("shared.yaml")
class TestShared:
    def test_own_and_shared(self):
        pass
"""


def test_named_cassettes_become_one_named_cassette_or_merge_into_the_tests_own(pytester):
    # Given tests that name shared cassettes: alone, two on one test, and on a class whose test
    # also has a recording of its own
    root = suite(
        pytester,
        {"tests/test_shared.py": SHARED},
        {
            "tests/cassettes/test_shared/shared.yaml": "shared",
            "tests/cassettes/test_shared/other.yaml": "other",
            "tests/cassettes/test_shared/TestShared.test_own_and_shared.yaml": "own",
        },
    )

    # When migrated
    result = migrate(root, "--write")

    # Then tests naming one cassette share one converted file named on their marker; two
    # names make one merged cassette; a class marker's names merge into each test's own
    assert result.returncode == 0, result.stderr
    folder = root / "cassettes/tests/test_shared"
    assert answers(folder / "shared.msgpack") == ["shared"]
    assert answers(folder / "shared_other.msgpack") == ["shared", "other"]
    assert answers(folder / "TestShared.test_own_and_shared.msgpack") == ["own", "shared"]
    text = (root / "tests/test_shared.py").read_text()
    assert text.count('@pytest.mark.cassette("shared")\n') == 2
    assert '@pytest.mark.cassette("shared_other")\n' in text
    assert "@pytest.mark.cassette\nclass TestShared:" in text
    assert (
        'tests/test_shared.py:19: @pytest.mark.vcr("shared.yaml"): these cassettes were '
        "merged into each test's own cassette"
    ) in result.stdout


# -- the report of what could not be translated -------------------------------------------------

UNTRANSLATED_CONFTEST = """import pytest


def scrub(response):
    return response


@pytest.fixture
def vcr_config():
    return {
        "filter_headers": ["x-internal-token"],
        "before_record_response": scrub,
        "match_on": ["method", "uri", "headers", "my_matcher"],
        "ignore_localhost": True,
    }
"""

UNTRANSLATED_TESTS = """import pytest
import vcr as vcrpy


@pytest.mark.vcr(record_mode="rewrite", allow_playback_repeats=True)
def test_reply(vcr):
    assert vcr.play_count == 0
    assert vcr.data == []
"""


def test_what_cannot_be_translated_is_listed_with_file_line_and_the_fix(pytester):
    # Given a config with a custom header filter, a callback and a headers matcher, and a test
    # that reads a vcrpy-only attribute
    root = suite(
        pytester,
        {
            "conftest.py": UNTRANSLATED_CONFTEST,
            "tests/test_it.py": UNTRANSLATED_TESTS,
            "pytest.ini": "[pytest]\naddopts = --record-mode=none\n",
            "requirements-dev.txt": "pytest\npytest-recording>=0.13\nvcrpy\n",
        },
        {},
    )

    # When migrate runs
    result = migrate(root)

    # Then each is listed with its file and line and what to do instead
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "untranslated (6): change these by hand\n" in out
    for line in [
        "  conftest.py:11: vcr_config: filter_headers ['x-internal-token']: not redacted by "
        "default (only credential headers are); write a pytest_toolnexus_redact hook",
        "  conftest.py:12: vcr_config: before_record_response is a vcrpy callback; write a "
        "pytest_toolnexus_redact hook",
        "  conftest.py:13: vcr_config: match_on matcher(s) ['my_matcher'] have no equivalent; "
        "decide in a pytest_toolnexus_match hook",
        "  tests/test_it.py:2: imports vcr; remove it once nothing here uses vcrpy",
        "  tests/test_it.py:8: vcr.data: the cassette fixture has no data",
        "  pytest.ini:2: --record-mode: use --cassette-record (none, once, new, all; "
        "new_episodes is new)",
    ]:
        assert line in out
    assert "  remove from requirements: requirements-dev.txt:2: pytest-recording>=0.13\n" in out
    assert "  remove from requirements: requirements-dev.txt:3: vcrpy\n" in out
    # and what was translated is in the diff
    assert (
        '+        "match_on": ["method", "scheme", "host", "port", "path", "query", "headers"],'
    ) in out
    assert '+        "allow_hosts": ["localhost", "127.0.0.1", "0.0.0.0", "::1"],' in out
    assert '+@pytest.mark.cassette(record="all", allow_repeats=True)' in out
    assert "+def test_reply(cassette):\n+    assert cassette.play_count == 0\n" in out
    assert "record_mode 'rewrite' became record 'all'" in out


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('record_mode="none"', 'record="none"'),
        ('record_mode="once"', 'record="once"'),
        ('record_mode="new_episodes"', 'record="new"'),
        ('record_mode="all"', 'record="all"'),
        ('record_mode="rewrite"', 'record="all"'),
        ('match_on=["method", "uri"]', 'match_on="vcrpy"'),
        ('match_on=("method", "path", "raw_body")', 'match_on=["method", "path", "body"]'),
        (
            'match_on=["uri", "method", "body"]',
            'match_on=["method", "scheme", "host", "port", "path", "query", "body"]',
        ),
        ("allow_playback_repeats=True", "allow_repeats=True"),
        ("record_on_exception=False", "record_on_error=False"),
        ('ignore_hosts=["api.internal"]', 'allow_hosts=["api.internal"]'),
        ("ignore_localhost=True", 'allow_hosts=["localhost", "127.0.0.1", "0.0.0.0", "::1"]'),
        ("decode_compressed_response=True", ""),
        ('serializer="json"', ""),
        ('filter_headers=["Authorization", ("x-api-key", "X")]', ""),
        ('filter_query_parameters=["api_key"]', ""),
        ('filter_post_data_parameters=["user_id"]', ""),
    ],
)
def test_each_marker_keyword_maps_to_its_option(source, expected):
    from pytest_toolnexus._cli.migrate_source import rewrite_source

    text = f"import pytest\n\n\n@pytest.mark.vcr({source})\ndef test_x():\n    pass\n"

    result = rewrite_source(text, {})

    marker = f"@pytest.mark.cassette({expected})" if expected else "@pytest.mark.cassette"
    assert result.text == text.replace(f"@pytest.mark.vcr({source})", marker)
    assert not [f for f in result.findings if f.untranslated]
