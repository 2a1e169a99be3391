"""``pytest-toolnexus migrate`` on suites that cannot be moved in one piece, and on the
reports around it: a cassette that holds a secret blocks only its own tests (they stay on
``@pytest.mark.vcr``, listed with the command that unblocks them), the closing advice says
what is installed, the requirements report skips comments, and the rootdir ``cassette_config``
is written only where no nearer one would shadow it.

Each test writes a small suite with hand-made vcrpy YAML cassettes into a pytester folder and
runs the command as a user does: in a subprocess (or through ``main`` where the test must
stand in for an environment without pytest-recording).
"""

import importlib.metadata
import json

# Imported once here: pytester drops the modules a test imports when it ends, and PyYAML's C
# loader does not survive being imported a second time in one process.
import yaml  # noqa: F401

from pytest_toolnexus import load_cassette
from pytest_toolnexus._cli.main import main
from tests.support.migrate_run import INNER, migrate

# A JSON Web Token's shape, built at run time: no secret-shaped literal in the source.
JWT = "eyJ" + "hbGciOiJIUzI1NiJ9" + ".eyJ" + "zdWIiOiIxMjM0In0" + "." + "c2lnbmF0dXJlLXZhbHVl"

YAML = """interactions:
- request:
    body: '{{"q": "{q}"}}'
    headers:
      Content-Type:
      - application/json
    method: POST
    uri: http://127.0.0.1:9/v1/ask
  response:
    body:
      string: '{answer}'
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
    return {"record_mode": "none"}
"""

# Each test sends its request, as the recording did, and checks the answer.
CHAT = """import httpx
import pytest


def ask(q):
    return httpx.post("http://127.0.0.1:9/v1/ask", json={"q": q}).json()


@pytest.mark.vcr
def test_reply():
    assert ask("reply") == {"answer": "reply"}


@pytest.mark.vcr
def test_login():
    assert "token" in ask("login")
"""

# The marker is the module's: it cannot stay on one of these tests alone.
MODULE = """import httpx
import pytest

pytestmark = pytest.mark.vcr


def ask(q):
    return httpx.post("http://127.0.0.1:9/v1/ask", json={"q": q}).json()


def test_plain():
    assert ask("plain") == {"answer": "plain"}


def test_session():
    assert "token" in ask("session")
"""


def write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def cassette(q, answer):
    return YAML.format(q=q, answer=json.dumps(answer))


def blocked_suite(pytester):
    write(
        pytester.path,
        {
            "conftest.py": CONFTEST,
            "tests/test_chat.py": CHAT,
            "tests/test_module.py": MODULE,
            "tests/cassettes/test_chat/test_reply.yaml": cassette("reply", {"answer": "reply"}),
            "tests/cassettes/test_chat/test_login.yaml": cassette("login", {"token": JWT}),
            "tests/cassettes/test_module/test_plain.yaml": cassette("plain", {"answer": "plain"}),
            "tests/cassettes/test_module/test_session.yaml": cassette("session", {"token": JWT}),
        },
    )
    return pytester.path


# -- point 1: one blocked file blocks only its own tests ------------------------------------


def test_a_cassette_holding_a_secret_keeps_only_its_tests_on_the_vcr_marker(pytester):
    # Given a suite where two cassettes hold a JWT-shaped value: one under a test's own
    # marker, one under a module's pytestmark
    root = blocked_suite(pytester)

    # When migrate --write runs
    result = migrate(root, "--write")

    # Then it fails, but everything that can be migrated is
    assert result.returncode == 1, result.stdout + result.stderr
    assert load_cassette(root / "cassettes/tests/test_chat/test_reply.msgpack")
    chat = (root / "tests/test_chat.py").read_text()
    assert "@pytest.mark.cassette\ndef test_reply():" in chat
    assert "@pytest.mark.vcr\ndef test_login():" in chat
    assert "def cassette_config():" in (root / "conftest.py").read_text()
    # and the file whose marker is the module's is left whole, with no cassette written
    assert (root / "tests/test_module.py").read_text() == MODULE
    assert not (root / "cassettes/tests/test_module").exists()
    assert not (root / "cassettes/tests/test_chat/test_login.msgpack").exists()
    # The report lists each blocked file, where its secret sits, and its tests
    out = result.stdout
    assert "blocked (2 cassette(s), 3 test(s)): these tests stay on @pytest.mark.vcr" in out
    assert (
        "  tests/cassettes/test_chat/test_login.yaml would still hold a secret after "
        "redaction:\n    - interaction #0, response.body.value['token']: a JSON Web Token"
    ) in out
    assert "    tests/test_chat.py::test_login\n" in out
    assert "    tests/test_module.py::test_session\n" in out
    assert "    tests/test_module.py::test_plain\n" in out
    # and the error says what stayed and the command that unblocks it
    err = result.stderr
    assert (
        "error: 3 test(s) stay on @pytest.mark.vcr, because 2 vcrpy cassette(s) cannot be "
        "converted: tests/cassettes/test_chat/test_login.yaml, "
        "tests/cassettes/test_module/test_session.yaml"
    ) in err
    assert f"`pytest-toolnexus migrate {root} --write --allow-secret VALUE`" in err
    assert f"run `pytest-toolnexus migrate {root} --write` again" in err
    assert JWT not in out + err

    # When the suite runs without pytest-recording, the migrated test passes and each blocked
    # one fails, saying so
    run = pytester.runpytest_subprocess(*INNER, "-p", "no:recording")
    run.assert_outcomes(passed=1, errors=3)
    run.stdout.fnmatch_lines(["*test_login is marked @pytest.mark.vcr, but neither*"])


def test_the_command_it_names_unblocks_the_rest_and_the_suite_then_passes(pytester):
    # Given the suite migrated as far as it goes
    root = blocked_suite(pytester)
    first = migrate(root, "--write")
    assert first.returncode == 1

    # When the value is known to be fake and migrate runs again as the error says
    second = migrate(root, "--write", "--allow-secret", JWT)
    third = migrate(root)

    # Then the rest is migrated, and the whole suite passes without pytest-recording
    assert second.returncode == 0, second.stdout + second.stderr
    assert "blocked" not in second.stdout
    assert "pytestmark = pytest.mark.cassette\n" in (root / "tests/test_module.py").read_text()
    assert "@pytest.mark.cassette\ndef test_login():" in (root / "tests/test_chat.py").read_text()
    run = pytester.runpytest_subprocess(*INNER, "-p", "no:recording")
    run.assert_outcomes(passed=4)
    assert third.returncode == 0
    assert "nothing to change" in third.stdout


def test_a_dry_run_with_a_blocked_cassette_says_what_would_stay_and_writes_nothing(pytester):
    root = blocked_suite(pytester)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}

    result = migrate(root)

    assert result.returncode == 1
    assert "error: 3 test(s) would stay on @pytest.mark.vcr" in result.stderr
    assert "everything else would be migrated." in result.stderr
    assert f"`pytest-toolnexus migrate {root} --allow-secret VALUE`" in result.stderr
    assert "-@pytest.mark.vcr\n+@pytest.mark.cassette\n def test_reply():" in result.stdout
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


# -- point 4: the closing advice, the requirements, the rootdir conftest ---------------------


def run_main(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def plain_suite(pytester):
    write(
        pytester.path,
        {
            "conftest.py": CONFTEST,
            "tests/test_chat.py": CHAT.split("\n\n@pytest.mark.vcr\ndef test_login")[0] + "\n",
            "tests/cassettes/test_chat/test_reply.yaml": cassette("reply", {"answer": "reply"}),
            "requirements-dev.txt": (
                "# pytest-recording is being replaced by pytest-toolnexus\n"
                "pytest-recording>=0.13  # the old recorder\n"
                "httpx\n"
                "vcrpy\n"
            ),
        },
    )
    return pytester.path


def test_the_advice_names_what_is_still_installed_and_not_what_is_gone(
    pytester, capsys, monkeypatch
):
    # Given a suite migrated once, with pytest-recording and vcrpy installed
    root = plain_suite(pytester)
    code, first, _ = run_main(["migrate", str(root), "--write"], capsys)
    assert code == 0
    assert (
        "afterwards: pytest-recording and vcrpy are still installed. Run the suite with "
        "-p no:recording to check it, then: pip uninstall pytest-recording vcrpy."
    ) in first

    # When both are uninstalled (here: this process no longer finds them) and migrate runs
    real = importlib.metadata.distribution

    def uninstalled(name):
        if name in ("pytest-recording", "vcrpy"):
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", uninstalled)
    code, second, _ = run_main(["migrate", str(root)], capsys)

    # Then it no longer says they were left installed
    assert code == 0
    assert "nothing to change" in second
    assert "installed" not in second
    assert (
        "\nafterwards: These requirement lines still name pytest-recording or vcrpy:\n"
        "  remove from requirements: requirements-dev.txt:2: pytest-recording>=0.13\n"
    ) in second


def test_the_requirements_report_names_requirement_lines_and_never_comments(pytester, capsys):
    root = plain_suite(pytester)

    code, out, err = run_main(["migrate", str(root)], capsys)

    assert code == 0, out + err
    lines = [line for line in out.splitlines() if "remove from requirements" in line]
    assert lines == [
        "  remove from requirements: requirements-dev.txt:2: pytest-recording>=0.13",
        "  remove from requirements: requirements-dev.txt:4: vcrpy",
    ]


NESTED_CONFTEST = """import pytest


@pytest.fixture
def vcr_config():
    return {"record_mode": "none"}
"""


def test_no_rootdir_conftest_is_created_when_a_nearer_vcr_config_would_shadow_it(pytester):
    # Given a suite whose only vcr_config is in tests/conftest.py
    write(
        pytester.path,
        {
            "tests/conftest.py": NESTED_CONFTEST,
            "tests/test_chat.py": CHAT.split("\n\n@pytest.mark.vcr\ndef test_login")[0] + "\n",
            "tests/cassettes/test_chat/test_reply.yaml": cassette("reply", {"answer": "reply"}),
        },
    )

    result = migrate(pytester.path, "--write")

    # Then the match_on goes where the tests get their config, and no rootdir file is made
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (pytester.path / "conftest.py").exists()
    assert '"match_on": "vcrpy"' in (pytester.path / "tests/conftest.py").read_text()
    run = pytester.runpytest_subprocess(*INNER, "-p", "no:recording")
    run.assert_outcomes(passed=1)


def test_a_rootdir_conftest_that_a_nearer_one_shadows_for_some_tests_says_so(pytester):
    # Given tests under tests/a/ with a vcr_config of their own, and tests under tests/b/
    # with none
    test = CHAT.split("\n\n@pytest.mark.vcr\ndef test_login")[0] + "\n"
    write(
        pytester.path,
        {
            "tests/a/conftest.py": NESTED_CONFTEST,
            "tests/a/test_a.py": test,
            "tests/b/test_b.py": test,
            "tests/a/cassettes/test_a/test_reply.yaml": cassette("reply", {"answer": "reply"}),
            "tests/b/cassettes/test_b/test_reply.yaml": cassette("reply", {"answer": "reply"}),
        },
    )

    result = migrate(pytester.path, "--write")

    # Then the rootdir conftest is created for tests/b, and the report says tests/a's shadows it
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"match_on": "vcrpy"' in (pytester.path / "conftest.py").read_text()
    assert (
        "  conftest.py: its cassette_config serves the 1 test(s) with no vcr_config of their "
        "own; the other 1 get the cassette_config of tests/a/conftest.py instead"
    ) in result.stdout
    run = pytester.runpytest_subprocess(*INNER, "-p", "no:recording")
    run.assert_outcomes(passed=2)


def test_a_nearer_vcr_config_made_by_a_call_is_told_to_carry_match_on_itself(pytester):
    # Given the only vcr_config in tests/conftest.py, returning what a function builds
    write(
        pytester.path,
        {
            "tests/conftest.py": (
                "import pytest\n\n\ndef make():\n    return {}\n\n\n"
                "@pytest.fixture\ndef vcr_config():\n    return make()\n"
            ),
            "tests/test_chat.py": CHAT.split("\n\n@pytest.mark.vcr\ndef test_login")[0] + "\n",
            "tests/cassettes/test_chat/test_reply.yaml": cassette("reply", {"answer": "reply"}),
        },
    )

    result = migrate(pytester.path)

    # Then no rootdir conftest would be created (it would be shadowed), and the report says
    # that the vcrpy matching must be added where the tests get their config
    assert result.returncode == 0, result.stdout + result.stderr
    assert "would create conftest.py" not in result.stdout
    assert (
        "  tests/conftest.py:10: cassette_config returns something other than a dict literal; "
        'map its keys by hand, and add "match_on": "vcrpy" to what it returns'
    ) in result.stdout
