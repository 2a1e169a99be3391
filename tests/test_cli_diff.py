"""``pytest-toolnexus diff`` and ``show`` as a git textconv driver.

``diff`` compares two cassettes interaction by interaction and exits 0 when they are equal, 1
when they differ, 2 when a file cannot be read. Small timing jitter is not a difference.
``show`` must print the same text for the same cassette every time, so that git can diff it.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest

from pytest_toolnexus import Cassette, Headers, Interaction, RecordedRequest, RecordedResponse
from pytest_toolnexus._cli.main import main
from pytest_toolnexus._seam.depth import MAX_DEPTH
from pytest_toolnexus._store.cassette import FORMAT, JsonBody, RecordedError, SseBody, TextBody

ROOT = Path(__file__).resolve().parent.parent
URL = "https://api.example.invalid/v1/chat/completions"


def chat(content="Hello", *, jitter=0.0, date="Sat, 28 Nov 2026 12:00:00 GMT"):
    """A non-streamed chat completion."""
    return Interaction(
        RecordedRequest(
            "POST",
            URL,
            Headers([("content-type", "application/json")]),
            JsonBody({"model": "m", "messages": [{"role": "user", "content": "Hi"}]}),
        ),
        RecordedResponse(
            200,
            Headers([("Content-Type", "application/json"), ("date", date)]),
            JsonBody(
                {
                    "id": "cmpl-1",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                    "usage": {"total_tokens": 7},
                }
            ),
            t_headers=300.0 + jitter,
            t_end=300.0 + jitter,
        ),
    )


def stream(*, jitter=0.0, last="[DONE]"):
    """A streamed chat completion."""
    return Interaction(
        RecordedRequest(
            "POST", URL, Headers([("content-type", "application/json")]), JsonBody({"stream": True})
        ),
        RecordedResponse(
            200,
            Headers([("content-type", "text/event-stream")]),
            SseBody(
                [
                    {"t": 120.0 + jitter, "data": {"choices": [{"delta": {"content": "Hel"}}]}},
                    {"t": 480.5 + jitter, "data": {"choices": [{"delta": {"content": "lo"}}]}},
                    {"t": 900.0 + jitter, "text": last},
                ]
            ),
            t_headers=80.0 + jitter,
            t_end=910.0 + jitter,
        ),
    )


def refused():
    return Interaction(
        RecordedRequest("GET", "https://api.example.invalid/v1/models"),
        error=RecordedError("ConnectError", "connection refused", 2.5),
    )


def write(path, *interactions, meta=None):
    meta = meta if meta is not None else {"recorded_at": "2026-11-28T12:00:00+00:00"}
    Cassette(Path(path), list(interactions), dict(meta)).save()
    return path


def diff(*args, capsys):
    code = main(["diff", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_identical_files_are_equal(tmp_path, capsys):
    a = write(tmp_path / "a.msgpack", chat(), stream(), refused())
    b = tmp_path / "b.msgpack"
    shutil.copy(a, b)

    code, out, err = diff(a, b, capsys=capsys)

    assert code == 0
    assert out == "no differences (3 interaction(s); time differences up to 50 ms ignored)\n"
    assert err == ""


def test_a_changed_message_content_is_reported_by_its_path(tmp_path, capsys):
    a = write(tmp_path / "a.msgpack", chat("Hello"), stream())
    b = write(tmp_path / "b.msgpack", chat("Howdy"), stream(last="[END]"))

    code, out, _ = diff(a, b, capsys=capsys)

    assert code == 1
    assert out.splitlines() == [
        f"--- {a}",
        f"+++ {b}",
        f"== #0 POST {URL}",
        "  ~ response.body.value['choices'][0]['message']['content']: \"Hello\" -> \"Howdy\"",
        f"== #1 POST {URL}",
        '  ~ response.body.events[2].text: "[DONE]" -> "[END]"',
        f"2 interaction(s) differ, 0 only in {a}, 0 only in {b} "
        "(time differences up to 50 ms ignored)",
    ]


def test_the_unified_view_shows_the_changed_lines_in_context(tmp_path, capsys):
    a = write(tmp_path / "a.msgpack", chat("Hello"))
    b = write(tmp_path / "b.msgpack", chat("Howdy", jitter=3.0))

    code, out, _ = diff(a, b, "--unified", capsys=capsys)

    assert code == 1
    lines = out.splitlines()
    assert f"== #0 POST {URL}" in lines
    removed = [line for line in lines if line.startswith("-") and not line.startswith("---")]
    added = [line for line in lines if line.startswith("+") and not line.startswith("+++")]
    assert removed == ['-              "content": "Hello",']
    assert added == ['+              "content": "Howdy",']
    # A time within the tolerance is shown as it was in A, so it is no part of the diff.
    assert "303.0" not in out


def test_small_timing_jitter_is_ignored_and_large_is_not(tmp_path, capsys):
    a = write(tmp_path / "a.msgpack", chat(), stream())
    jittered = write(tmp_path / "jitter.msgpack", chat(jitter=12.5), stream(jitter=-7.0))
    slow = write(tmp_path / "slow.msgpack", chat(), stream(jitter=400.0))

    assert diff(a, jittered, capsys=capsys)[0] == 0

    code, out, _ = diff(a, jittered, "--time-tolerance", "10", capsys=capsys)
    assert code == 1
    assert "  ~ response.t_headers: 300.0 ms -> 312.5 ms (+12.5 ms)" in out
    assert "events" not in out  # 7 ms is within 10 ms

    code, out, _ = diff(a, slow, capsys=capsys)
    assert code == 1
    assert "  ~ response.body.events[0].t: 120.0 ms -> 520.0 ms (+400.0 ms)" in out
    assert "  ~ response.t_end: 910.0 ms -> 1310.0 ms (+400.0 ms)" in out

    code, out, _ = diff(a, slow, "--ignore-times", capsys=capsys)
    assert code == 0
    assert "times ignored" in out


def test_an_added_interaction_does_not_shift_the_others(tmp_path, capsys):
    a = write(tmp_path / "a.msgpack", chat(), stream())
    b = write(tmp_path / "b.msgpack", refused(), chat(), stream())

    code, out, _ = diff(a, b, capsys=capsys)

    assert code == 1
    assert out.splitlines() == [
        f"--- {a}",
        f"+++ {b}",
        f"+ #0 GET https://api.example.invalid/v1/models (only in {b})",
        f"0 interaction(s) differ, 0 only in {a}, 1 only in {b} "
        "(time differences up to 50 ms ignored)",
    ]


def test_a_changed_url_is_one_interaction_that_changed(tmp_path, capsys):
    moved = chat()
    moved = Interaction(
        RecordedRequest("POST", URL.replace("v1", "v2"), moved.request.headers, moved.request.body),
        moved.response,
    )
    a = write(tmp_path / "a.msgpack", chat())
    b = write(tmp_path / "b.msgpack", moved)

    code, out, _ = diff(a, b, capsys=capsys)

    assert code == 1
    assert f'  ~ request.url: "{URL}" -> "{URL.replace("v1", "v2")}"' in out
    assert "only in" not in out.splitlines()[-2]


def test_headers_ignore_case_and_can_be_left_out(tmp_path, capsys):
    a = write(tmp_path / "a.msgpack", chat(date="Sat, 28 Nov 2026 12:00:00 GMT"))
    b = write(tmp_path / "b.msgpack", chat(date="Sun, 29 Nov 2026 08:30:00 GMT"))

    code, out, _ = diff(a, b, capsys=capsys)
    assert code == 1
    assert "  ~ response.headers['date']: \"Sat, 28 Nov 2026 12:00:00 GMT\" -> " in out

    assert diff(a, b, "--ignore-header", "Date", capsys=capsys)[0] == 0


def test_meta_is_compared_only_when_asked(tmp_path, capsys):
    a = write(tmp_path / "a.msgpack", chat(), meta={"recorded_at": "2026-11-28"})
    b = write(tmp_path / "b.msgpack", chat(), meta={"recorded_at": "2026-11-29", "run_id": "r"})

    assert diff(a, b, capsys=capsys)[0] == 0
    code, out, _ = diff(a, b, "--meta", capsys=capsys)
    assert code == 1
    assert '  ~ meta.recorded_at: "2026-11-28" -> "2026-11-29"' in out
    assert '  + meta.run_id: "r"' in out


def test_body_kinds_and_multi_line_text(tmp_path, capsys):
    page = "<html>\n<h1>502</h1>\n<p>upstream gone</p>\n</html>\n"
    html = Interaction(
        RecordedRequest("GET", "https://api.example.invalid/"),
        RecordedResponse(502, Headers([("content-type", "text/html")]), TextBody(page)),
    )
    other = Interaction(
        RecordedRequest("GET", "https://api.example.invalid/"),
        RecordedResponse(
            502, Headers([("content-type", "text/html")]), TextBody(page.replace("gone", "down"))
        ),
    )
    a = write(tmp_path / "a.msgpack", html, chat())
    b = write(tmp_path / "b.msgpack", other, refused())

    code, out, _ = diff(a, b, capsys=capsys)

    assert code == 1
    assert "  ~ response.body.text:" in out
    assert "      -<p>upstream gone</p>" in out
    assert "      +<p>upstream down</p>" in out
    assert f"- #1 POST {URL} (only in {a})" in out
    assert f"+ #1 GET https://api.example.invalid/v1/models (only in {b})" in out


def test_diff_exit_codes_in_a_separate_process(tmp_path):
    a = write(tmp_path / "a.msgpack", chat(), stream())
    same = write(tmp_path / "same.msgpack", chat(jitter=1.0), stream())
    other = write(tmp_path / "other.msgpack", chat("Howdy"), stream())
    corrupt = tmp_path / "corrupt.msgpack"
    corrupt.write_bytes(a.read_bytes()[:-5])

    assert run("diff", a, same) == (
        0,
        "no differences (2 interaction(s); time differences up to 50 ms ignored)\n",
    )
    assert run("diff", "--quiet", a, other) == (1, "")

    code, out = run("diff", a, corrupt)
    assert code == 2
    assert out.startswith(f"error: cassette {corrupt} is truncated or not msgpack")
    assert "Traceback" not in out


@pytest.mark.parametrize("broken", ["missing", "directory", "newer", "not-a-cassette"])
def test_a_file_that_cannot_be_read_exits_2_naming_it(tmp_path, capsys, broken):
    a = write(tmp_path / "a.msgpack", chat())
    bad = tmp_path / f"{broken}.msgpack"
    if broken == "directory":
        bad.mkdir()
    elif broken == "newer":
        bad.write_bytes(msgpack.packb({"format": FORMAT, "version": 2, "interactions": []}))
    elif broken == "not-a-cassette":
        bad.write_bytes(msgpack.packb({"hello": "world"}))

    code, out, err = diff(a, bad, capsys=capsys)

    assert code == 2
    assert out == ""
    assert err.startswith("error: ")
    assert str(bad) in err
    assert err.count("\n") == 1


def test_a_bad_tolerance_is_a_usage_error(tmp_path, capsys):
    a = write(tmp_path / "a.msgpack", chat())
    with pytest.raises(SystemExit) as exc:
        main(["diff", str(a), str(a), "--time-tolerance", "-1"])
    assert exc.value.code == 2
    assert "the time tolerance must be 0 or more milliseconds" in capsys.readouterr().err


def test_a_deeply_nested_body_is_compared(tmp_path, capsys):
    # 481 levels, within what a cassette holds (MAX_DEPTH, 500), and more than a walk of two
    # frames a level reaches: compared. 941 levels are damage: refused naming the limit, as
    # check and replay refuse them, on every Python.
    def nested(leaf, wraps):
        value = {"leaf": leaf}
        for _ in range(wraps):
            value = {"wrap": [value]}
        return value

    def deep(leaf, wraps=240):
        return Interaction(
            RecordedRequest("POST", URL, body=JsonBody(nested(leaf, wraps))),
            RecordedResponse(200, body=JsonBody({})),
        )

    a = write(tmp_path / "a.msgpack", deep("x"))
    b = write(tmp_path / "b.msgpack", deep("y"))
    too_deep = write(tmp_path / "too_deep.msgpack", deep("y", wraps=470))

    code, out, _ = diff(a, b, capsys=capsys)
    assert code == 1
    assert out.count("['wrap'][0]") == 240
    assert out.splitlines()[3].endswith('[\'leaf\']: "x" -> "y"')

    code, out, err = diff(a, too_deep, capsys=capsys)
    assert code == 2
    assert f"{too_deep} is corrupt at interaction 0" in out + err
    assert f"nested deeper than {MAX_DEPTH} levels" in out + err


# ---------------------------------------------------------------------------------------------
# show, for git


def test_show_is_deterministic(tmp_path, capsys):
    # The same cassette, written twice with its meta keys in another order, and read in
    # processes with different hash seeds: the text is the same every time.
    first = write(tmp_path / "one.msgpack", chat(), stream(), refused(), meta={"a": 1, "b": 2})
    second = write(tmp_path / "two.msgpack", chat(), stream(), refused(), meta={"b": 2, "a": 1})

    outputs = []
    for path in (first, second, first):
        assert main(["show", "--no-path", str(path)]) == 0
        outputs.append(capsys.readouterr().out)
    for seed in ("1", "2"):
        code, out = run("show", "--no-path", first, env={"PYTHONHASHSEED": seed})
        assert code == 0
        outputs.append(out)

    assert len(set(outputs)) == 1
    assert outputs[0].splitlines()[0] == "cassette (format version 1)"
    assert "  a: 1" in outputs[0].splitlines()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_show_as_a_git_textconv_driver(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "HOME": str(tmp_path),
    }

    def git(*args):
        result = subprocess.run(
            ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
        )
        return result.stdout

    git("init", "-q", ".")
    (repo / ".gitattributes").write_text("*.msgpack diff=toolnexus\n")
    git("config", "diff.toolnexus.textconv", f"{sys.executable} -m pytest_toolnexus show --no-path")
    cassette = repo / "cassettes" / "chat.msgpack"
    write(cassette, chat("Hello"))
    git("add", "-A")
    git("commit", "-q", "-m", "one")
    write(cassette, chat("Howdy"))

    out = git("diff")

    assert "Binary files" not in out
    assert '-          "content": "Hello"' in out
    assert '+          "content": "Howdy"' in out
    changed = [line for line in out.splitlines() if line[:1] in "+-" and line[:3] not in "+++---"]
    assert len(changed) == 2, out


def run(*args, env=None):
    result = subprocess.run(
        [sys.executable, "-m", "pytest_toolnexus", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )
    return result.returncode, result.stdout + result.stderr
