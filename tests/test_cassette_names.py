"""Cassette file names (issue 14, item 11): distinct names give distinct files, stable across
runs and platforms, and a name that names no file is refused as a usage error.

- A name that is all ASCII maps exactly as it always has (committed cassettes and users'
  suites keep their paths): checked against a copy of the old rule on generated names.
- A name with any other character keeps its Unicode letters and digits, in NFC, and gains a
  short hash of the exact name: "日本語", "русский" and "🙂" get three files, and so do the NFC
  and NFD spellings of one word, and two names that differ only in case (for the file systems
  of macOS and Windows, which ignore case and normalisation).
- Every file name is non-empty, at most 100 bytes of UTF-8, and holds no separator or control
  character.
"""

import hashlib
import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_toolnexus import load_cassette
from pytest_toolnexus._plugin.settings import (
    CassetteOptions,
    cassette_file_name,
    default_cassette_path,
    layer,
)
from tests.support.fuzzing import counted, report_examples, scaled
from tests.support.servers import LoopbackServer
from tests.test_write_safety import Counting


@pytest.fixture(scope="module", autouse=True)
def _examples_report():
    yield
    report_examples("file-name property")


_OLD_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def old_rule(test_name: str) -> str:
    """The rule every ASCII name was named by before Unicode names got their own."""
    readable = test_name.replace("[", "-").replace("]", "")
    safe = _OLD_UNSAFE.sub("_", readable).strip("._-") or "cassette"
    if len(safe) > 100:
        digest = hashlib.sha256(test_name.encode()).hexdigest()[:12]
        safe = f"{safe[:87]}-{digest}"
    return safe


ASCII_NAMES = st.text(alphabet=st.characters(max_codepoint=127), max_size=140)
ANY_NAMES = st.text(max_size=140)
FUZZ = settings(
    max_examples=scaled(300),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FUZZ
@given(ASCII_NAMES)
@example("test_chat[gpt-4o-mini]")
@example("TestA.test_x[1-2]")
@example("a b")
@example("x" * 150)
@counted("ASCII names keep their file")
def test_an_ascii_name_keeps_the_file_name_it_always_had(name):
    assert cassette_file_name(name) == old_rule(name)


def well_formed(file_name: str) -> None:
    assert file_name
    assert len(file_name.encode("utf-8")) <= 100
    assert file_name not in (".", "..")
    assert not any(ch in file_name for ch in "/\\\x00")
    assert all(unicodedata.category(ch)[0] != "C" for ch in file_name), ascii(file_name)
    assert unicodedata.normalize("NFC", file_name) == file_name


@FUZZ
@given(ANY_NAMES)
@example("日本語")
@example("🙂")
@example("\ud800 lone surrogate")
@example("é" * 200)
@example("\u0301\u0301")
@counted("file names well formed")
def test_every_name_gives_a_well_formed_bounded_file_name(name):
    well_formed(cassette_file_name(name))


@FUZZ
@given(ANY_NAMES, ANY_NAMES)
@example("日本語", "русский")
@example("🙂", "🙃")
@example("caf\u00e9", "cafe\u0301")
@example("Ärger", "ärger")
@example("日本語", "cassette")
@counted("distinct names, distinct files")
def test_distinct_names_give_distinct_files_on_any_file_system(first, second):
    if first == second or (first.isascii() and second.isascii()):
        return  # ASCII names keep the old rule, collisions and all
    one, other = cassette_file_name(first), cassette_file_name(second)
    # macOS and Windows ignore case and Unicode normalisation when they compare names.
    assert unicodedata.normalize("NFC", one).casefold() != (
        unicodedata.normalize("NFC", other).casefold()
    ), (first, second, one)


def test_the_file_names_are_stable_across_runs_and_platforms():
    # Pinned: a change here moves users' committed cassettes.
    assert cassette_file_name("日本語") == "日本語-77710aedc7"
    assert cassette_file_name("русский") == "русский-2ac3f3eb8f"
    assert cassette_file_name("🙂") == "cassette-d06f1525f7"
    assert cassette_file_name("caf\u00e9") == "café-850f7dc439"
    assert cassette_file_name("cafe\u0301") == "café-81ef060bcd"
    assert cassette_file_name("test_chat[gpt-4o-mini]") == "test_chat-gpt-4o-mini"


def test_distinct_names_make_distinct_files_on_disk(tmp_path):
    names = ["日本語", "русский", "🙂", "🙃", "caf\u00e9", "cafe\u0301", "Ärger", "ärger", "ü"]
    for name in names:
        target = default_cassette_path(tmp_path, tmp_path, tmp_path / "test_x.py", "t", name)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("x") as handle:  # "x": it must not exist yet
            handle.write(name)
    files = list((tmp_path / "test_x").iterdir())
    assert len(files) == len(names)
    assert sorted(f.read_text() for f in files) == sorted(names)


@pytest.mark.parametrize(
    "name", [".", "..", "./", "a/..", "/abs/x", "../up", "sub/../x", " ", "", "//"]
)
def test_a_name_that_names_no_file_inside_the_folder_is_a_usage_error(name):
    with pytest.raises(TypeError, match="cassette name"):
        layer(CassetteOptions(), {"name": name}, "@pytest.mark.cassette")


def test_the_plugin_reports_a_name_that_names_no_file_as_a_usage_error(pytester):
    pytester.makepyfile(
        test_dot="""
        import pytest

        @pytest.mark.cassette(".")
        def test_it(cassette):
            pass
        """
    )
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*test_it*cassette name '.'*"])
    assert "ValueError" not in result.stdout.str()


def test_three_tests_with_unicode_names_record_three_cassettes(pytester):
    handler = Counting()
    with LoopbackServer(handler) as server:
        pytester.makepyfile(
            test_names=f"""
            import httpx, pytest

            @pytest.mark.cassette("日本語", record="once")
            def test_ja(cassette):
                httpx.post("{server.url("/")}", json={{"n": "ja"}})

            @pytest.mark.cassette("русский", record="once")
            def test_ru(cassette):
                httpx.post("{server.url("/")}", json={{"n": "ru"}})

            @pytest.mark.cassette("🙂", record="once")
            def test_smile(cassette):
                httpx.post("{server.url("/")}", json={{"n": "smile"}})
            """
        )
        result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    folder = Path(pytester.path) / "cassettes" / "test_names"
    files = sorted(folder.glob("*.msgpack"))
    assert len(files) == 3, files
    bodies = sorted(load_cassette(f).interactions[0].request.body.value["n"] for f in files)
    assert bodies == ["ja", "ru", "smile"]
    assert all(len(load_cassette(f).interactions) == 1 for f in files)
