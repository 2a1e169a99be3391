"""``pytest-toolnexus check`` and ``show``, run as a user runs them: a separate process.

``check`` must pass the committed cassettes, and fail (exit 1), naming the file, on a cassette
that holds a secret (without printing it), a corrupt file and a file from a newer format
version. ``--allow-secret`` lets a known fake through. ``show`` prints a cassette with the
timeline of its stream.
"""

import subprocess
import sys
from pathlib import Path

import msgpack

from pytest_toolnexus import (
    Cassette,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    load_cassette,
)
from pytest_toolnexus._seam.depth import MAX_DEPTH
from pytest_toolnexus._store.cassette import FORMAT, JsonBody, SseBody

ROOT = Path(__file__).resolve().parent.parent
FAKE_KEY = "sk-proj-" + "Fk9_" * 6  # built at run time: no secret-shaped literal in the source


def run(*args, cwd=ROOT):
    result = subprocess.run(
        [sys.executable, "-m", "pytest_toolnexus", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr


def stream_cassette(path, *, extra=None, depth=0):
    events = [
        {"t": 120.0, "data": {"delta": "Hel"}},
        {"t": 480.5, "event": "delta", "data": {"delta": "lo"}},
        {"t": 900.0, "text": "[DONE]"},
    ]
    body = {"model": "m", "stream": True, "note": extra or "none"}
    for _ in range(depth):
        body = {"wrap": [body]}
    interaction = Interaction(
        RecordedRequest(
            "POST",
            "https://api.example.invalid/v1/chat/completions",
            Headers([("content-type", "application/json")]),
            JsonBody(body),
        ),
        RecordedResponse(
            200,
            Headers([("content-type", "text/event-stream")]),
            SseBody(events),
            t_headers=80.0,
            t_end=910.0,
        ),
    )
    # `check` must meet the secret a fixture holds, so it is written unscanned.
    Cassette(Path(path), [interaction], {"source": "test_cli"}).save(unsafe_verbatim=True)
    return path


def test_check_passes_the_committed_cassettes():
    committed = sorted((ROOT / "cassettes").rglob("*.msgpack"))
    assert committed, "the repository ships example cassettes"

    code, out = run("check", "cassettes")

    assert code == 0, out
    assert f"{len(committed)} cassette(s) checked, 0 with problems" in out
    for path in committed:
        assert f"ok   {path.relative_to(ROOT)}" in out


def test_check_fails_on_a_secret_without_printing_it(tmp_path):
    good = stream_cassette(tmp_path / "good.msgpack")
    leaky = stream_cassette(tmp_path / "sub" / "leaky.msgpack", extra=f"key={FAKE_KEY}")

    code, out = run("check", tmp_path)

    assert code == 1
    assert f"ok   {good} (1 interaction)" in out
    assert f"FAIL {leaky}: 1 secret(s)" in out
    assert "interaction #0, request.body.value['note']: an OpenAI project key" in out
    assert FAKE_KEY not in out
    assert "2 cassette(s) checked, 1 with problems" in out


def test_check_never_prints_a_secret_that_is_a_map_key(tmp_path):
    leaky = stream_cassette(tmp_path / "leaky.msgpack", extra={FAKE_KEY: "active"})

    code, out = run("check", leaky)

    assert code == 1
    assert f"FAIL {leaky}" in out
    assert FAKE_KEY not in out


def test_allow_secret_lets_a_known_fake_through(tmp_path):
    stream_cassette(tmp_path / "fake.msgpack", extra=f"key={FAKE_KEY}")

    code, out = run("check", tmp_path, "--allow-secret", FAKE_KEY)

    assert code == 0, out
    assert "1 cassette(s) checked, 0 with problems" in out


def test_check_fails_on_a_corrupt_file_and_names_it(tmp_path):
    whole = stream_cassette(tmp_path / "whole.msgpack").read_bytes()
    cuts = {"one-byte": 1, "header": 10, "half": len(whole) // 2, "last-byte-lost": -1}
    for name, cut in cuts.items():
        (tmp_path / f"{name}.msgpack").write_bytes(whole[:cut])
    (tmp_path / "garbage.msgpack").write_bytes(b"\xc1" + whole[1:])  # 0xc1 is never msgpack

    code, out = run("check", tmp_path)

    assert code == 1
    for name in cuts:
        corrupt = tmp_path / f"{name}.msgpack"
        assert f"FAIL {corrupt}: cassette {corrupt} is truncated or not msgpack" in out, name
    garbage = tmp_path / "garbage.msgpack"
    assert (
        f"FAIL {garbage}: {garbage} is not a pytest-toolnexus cassette: it is binary data that "
        "does not begin as a cassette does (a msgpack map)" in out
    )
    assert f"ok   {tmp_path / 'whole.msgpack'}" in out
    assert "6 cassette(s) checked, 5 with problems" in out
    assert "Traceback" not in out


def test_check_fails_on_a_file_from_a_newer_format_version(tmp_path):
    newer = tmp_path / "newer.msgpack"
    newer.write_bytes(
        msgpack.packb({"format": FORMAT, "version": 2, "meta": {}, "interactions": []})
    )

    code, out = run("check", newer)

    assert code == 1
    assert f"FAIL {newer}: cassette {newer} uses format version 2" in out
    assert "upgrade pytest-toolnexus" in out


def test_check_handles_a_cassette_nested_deeper_than_the_recursion_limit(tmp_path):
    # The scan used to recurse once per level and crash. 481 levels (within MAX_DEPTH, 500)
    # are more than a walk of two frames a level reaches: scanned; 941 are more than a
    # cassette holds: refused naming the limit, as replay refuses them, on every Python.
    deep = stream_cassette(tmp_path / "deep.msgpack", depth=240)
    deep_leak = stream_cassette(tmp_path / "deep_leak.msgpack", depth=240, extra=FAKE_KEY)
    too_deep = stream_cassette(tmp_path / "too_deep.msgpack", depth=470)

    code, out = run("check", tmp_path)

    assert code == 1, out
    assert "Traceback" not in out
    assert f"ok   {deep} (1 interaction)" in out
    assert f"FAIL {deep_leak}: 1 secret(s)" in out
    assert FAKE_KEY not in out
    assert f"FAIL {too_deep}: cassette {too_deep} is corrupt at interaction 0: " in out
    assert f"nested deeper than {MAX_DEPTH} levels" in out


def test_check_finds_no_cassette_in_an_empty_folder_and_ignores_temp_files(tmp_path):
    # A write killed mid-way can leave its temp file; it is not a cassette.
    (tmp_path / ".chat.msgpack.k2j3.tmp").write_bytes(b"\x85\xa6form")

    code, out = run("check", tmp_path)

    assert code == 1
    assert "no cassettes found" in out


def test_show_prints_a_cassette_with_its_timeline(tmp_path):
    path = stream_cassette(tmp_path / "chat.msgpack")

    code, out = run("show", path)

    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == f"cassette {path} (format version 1)"
    assert "  source: test_cli" in lines
    assert "#0 POST https://api.example.invalid/v1/chat/completions" in lines
    assert "-> 200 (headers at 80.0 ms, end at 910.0 ms)" in lines
    assert "  3 sse piece(s) over 910.0 ms" in lines
    timeline = [line for line in lines if " ms " in line and "|" in line]
    assert len(timeline) == 3
    assert timeline[0].strip().startswith("120.0 ms")
    # Only what differs between the pieces is shown: here the delta itself.
    assert timeline[1].rstrip().endswith('delta: delta="lo"')
    assert timeline[2].rstrip().endswith("[DONE]")
    # The bar marks each arrival further along as time goes on.
    positions = [line.index("|") for line in timeline]
    assert positions == sorted(positions)
    assert positions[0] < positions[-1]


def test_show_reports_a_corrupt_file_instead_of_crashing(tmp_path):
    corrupt = tmp_path / "corrupt.msgpack"
    corrupt.write_bytes(stream_cassette(tmp_path / "ok.msgpack").read_bytes()[:40])

    code, out = run("show", corrupt)

    assert code == 1
    assert out.startswith(f"error: cassette {corrupt} is truncated or not msgpack")
    assert "Traceback" not in out


def test_show_and_diff_help_describe_their_arguments_and_give_examples():
    # When a user asks show and diff for help
    show_code, show_help = run("show", "--help")
    diff_code, diff_help = run("diff", "--help")

    # Then each positional argument says what it is, and a runnable example follows
    assert show_code == diff_code == 0
    assert "  PATH        a .msgpack cassette (cassettes/<test file path>/<test" in show_help
    assert "examples:\n  pytest-toolnexus show cassettes/tests/test_chat/" in show_help
    assert "  A                     the old cassette (.msgpack)\n" in diff_help
    assert "  B                     the new cassette (.msgpack), compared with A\n" in diff_help
    assert "examples:\n  pytest-toolnexus diff old.msgpack new.msgpack" in diff_help


def test_check_counts_one_interaction_in_the_singular_and_more_in_the_plural(tmp_path):
    one = stream_cassette(tmp_path / "one.msgpack")
    two = tmp_path / "two.msgpack"
    first = load_cassette(one).interactions[0]
    Cassette(two, [first, first], {"source": "test_cli"}).save()

    code, out = run("check", one, two)

    assert code == 0, out
    assert f"ok   {one} (1 interaction)\n" in out
    assert f"ok   {two} (2 interactions)\n" in out


def test_the_readme_docs_list_names_every_command():
    from pytest_toolnexus._cli.main import _parser

    commands = next(a for a in _parser()._actions if a.dest == "command").choices
    readme = (ROOT / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.startswith("- [docs/cli.md](docs/cli.md)"))

    listed = line.split("`pytest-toolnexus ", 1)[1].rstrip("`").split(" | ")
    assert sorted(listed) == sorted(commands)


def test_the_readme_groups_under_toolnexus_error_only_what_derives_from_it():
    import re

    import pytest_toolnexus

    readme = " ".join((ROOT / "README.md").read_text().split())
    grouped = readme.split("`ToolnexusError` and, under it, ", 1)[1].split(";", 1)[0]
    names = re.findall(r"`(\w+)`", grouped)

    assert "CassetteError" in names
    assert "CassetteMissError" not in names
    for name in names:
        assert issubclass(getattr(pytest_toolnexus, name), pytest_toolnexus.ToolnexusError), name
    assert not issubclass(pytest_toolnexus.CassetteMissError, Exception)
    assert "`CassetteMissError`, which derives from `BaseException`" in readme
