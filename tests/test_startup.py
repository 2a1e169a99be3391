"""Loading the plugin and starting the command line import none of the cassette machinery:
httpx, httpx2, msgpack, the clock and the session load when a test first uses a cassette,
and when a command that needs them runs (issue 15, start-up)."""

import json
import subprocess
import sys

import pytest

import pytest_toolnexus

HEAVY = (
    "httpx",
    "httpx2",
    "msgpack",
    "anyio",
    "time_machine",
    "deepdiff",
    "pytest_toolnexus._session.session",
    "pytest_toolnexus._store.cassette",
    "pytest_toolnexus._timing.timepatch",
)


def heavy_modules_after(code: str) -> list[str]:
    """The HEAVY modules a fresh interpreter has loaded once ``code`` ran."""
    found = f"sorted(m for m in {HEAVY!r} if m in sys.modules)"
    script = f"{code}\nimport sys, json\nprint(json.dumps({found}))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_loading_the_plugin_imports_none_of_the_cassette_machinery():
    assert heavy_modules_after("import pytest, pytest_toolnexus.plugin") == []


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_the_command_lines_version_and_help_import_none_of_it(flag):
    code = (
        "import contextlib, io\n"
        "from pytest_toolnexus._cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main([{flag!r}])\n"
    )
    assert heavy_modules_after(code) == []


def test_a_command_imports_what_it_needs_when_it_runs(tmp_path):
    code = (
        "import contextlib, io\n"
        "from pytest_toolnexus._cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['check', {str(tmp_path)!r}])\n"
    )
    assert "pytest_toolnexus._store.cassette" in heavy_modules_after(code)


def test_a_public_name_is_imported_on_first_use_and_kept():
    code = "import pytest_toolnexus\npytest_toolnexus.CassetteSession\n"
    assert "pytest_toolnexus._session.session" in heavy_modules_after(code)
    value = pytest_toolnexus.Headers
    assert vars(pytest_toolnexus)["Headers"] is value  # later look-ups are plain attributes


def test_an_unknown_name_is_an_attribute_error_naming_the_package():
    with pytest.raises(AttributeError, match="module 'pytest_toolnexus' has no attribute 'Nope'"):
        pytest_toolnexus.Nope  # noqa: B018
