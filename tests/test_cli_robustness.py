"""The command line where users trip (issue 14, items 20 to 22): a reader that closes the pipe
early, a file that is not a cassette at all, stream rows that look the same, and a fault body
that is not text. Each command runs in a subprocess, as a shell runs it."""

import gzip
import json
import random
import subprocess
import sys

import pytest

from pytest_toolnexus import (
    Cassette,
    CassetteSession,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    TransportRequest,
    faults,
    load_cassette,
)
from pytest_toolnexus._seam.errors import CassetteFormatError
from pytest_toolnexus._store.cassette import JsonBody, SseBody
from tests.test_cli import ROOT, run


def chunk_stream(path, words):
    """An OpenAI-style stream: every chunk repeats id, model and created; only the delta
    differs."""
    events = [
        {
            "t": 10.0 * n,
            "data": {
                "id": "chatcmpl-" + "x" * 30,
                "object": "chat.completion.chunk",
                "created": 1700000000,
                "model": "gpt-4o-mini-2024-07-18",
                "system_fingerprint": "fp_0123456789",
                "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}],
            },
        }
        for n, word in enumerate(words)
    ]
    request = RecordedRequest(
        "POST", "https://api.example.invalid/v1/chat/completions", Headers(), JsonBody({})
    )
    response = RecordedResponse(
        200, Headers([("content-type", "text/event-stream")]), SseBody(events), 1.0, 99.0
    )
    Cassette(path, [Interaction(request, response)]).save()
    return path


# -- 20: a closed pipe ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["show", "diff"])
@pytest.mark.parametrize("read", [0, 1, 200])
def test_a_reader_that_closes_the_pipe_gets_no_traceback(tmp_path, command, read):
    words = [f"word{n} " * 20 for n in range(3000)]
    one = chunk_stream(tmp_path / "a.msgpack", words)
    other = chunk_stream(tmp_path / "b.msgpack", list(reversed(words)))
    args = [one] if command == "show" else [one, other, "--unified"]
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_toolnexus", command, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    process.stdout.read(read)
    process.stdout.close()  # as `| head -c N` does
    err = process.stderr.read().decode()
    code = process.wait(timeout=60)

    assert "Traceback" not in err
    assert "BrokenPipeError" not in err
    assert err == ""
    assert code == 141


# -- 21: files that are not cassettes ------------------------------------------------------------


VCR_YAML = b"""interactions:
- request:
    body: '{"q": 1}'
    headers: {}
    method: POST
    uri: https://api.example.invalid/v1/x
  response:
    body: {string: '{"ok": true}'}
    headers: {}
    status: {code: 200, message: OK}
version: 1
"""


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (VCR_YAML, "YAML text, which looks like a vcrpy cassette: convert it with"),
        (b"---\n" + VCR_YAML, "YAML text, which looks like a vcrpy cassette"),
        (json.dumps({"interactions": [], "version": 1}).encode(), "JSON text, which looks"),
        (json.dumps([1, 2]).encode(), "it is JSON text, not msgpack"),
        (gzip.compress(VCR_YAML), "gzip-compressed"),
        (b"hello, this is a note\n", "it is plain text"),
    ],
)
def test_a_file_that_is_not_a_cassette_is_named_for_what_it_is(tmp_path, content, says):
    path = tmp_path / "renamed.msgpack"
    path.write_bytes(content)

    with pytest.raises(CassetteFormatError) as caught:
        load_cassette(path)

    assert says in str(caught.value)
    assert "trailing bytes" not in str(caught.value)
    code, out = run("show", path)
    assert code == 1
    assert says in out


@pytest.mark.parametrize("seed", range(40))
def test_random_bytes_are_never_called_a_damaged_cassette_with_trailing_bytes(tmp_path, seed):
    rng = random.Random(seed)
    data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
    path = tmp_path / "noise.msgpack"
    path.write_bytes(data)

    with pytest.raises(CassetteFormatError) as caught:
        load_cassette(path)

    message = str(caught.value)
    assert str(path) in message
    if not (0x80 <= data[0] <= 0x8F or data[0] in (0xDE, 0xDF)):
        assert "not a pytest-toolnexus cassette" in message


# -- 22: show's rows and non-text fault bodies ---------------------------------------------------


def test_show_rows_show_what_differs_between_stream_pieces(tmp_path):
    path = chunk_stream(tmp_path / "s.msgpack", ["Hel", "lo", " there"])

    code, out = run("show", path)

    assert code == 0
    rows = [line for line in out.splitlines() if " ms " in line and "|" in line]
    assert len(rows) == 3
    for row, word in zip(rows, ["Hel", "lo", " there"], strict=True):
        assert f'choices.0.delta.content="{word}"' in row
        assert "chatcmpl-" not in row


def test_show_width_sets_how_much_of_a_row_is_shown(tmp_path):
    path = chunk_stream(tmp_path / "s.msgpack", ["a" * 300, "b" * 300])

    _, narrow = run("show", path, "--width", "40")
    _, wide = run("show", path, "--width", "400")

    narrow_rows = [line for line in narrow.splitlines() if "choices.0.delta" in line]
    wide_rows = [line for line in wide.splitlines() if "choices.0.delta" in line]
    assert all(row.endswith("...") for row in narrow_rows)
    assert all("a" * 300 in row or "b" * 300 in row for row in wide_rows)
    code, out = run("show", path, "--width", "3")
    assert code == 2
    assert "at least 10" in out


@pytest.mark.parametrize(
    "data", [b"\xff\xfe\x00binary", bytes(range(128, 256)), "é".encode("latin-1")]
)
def test_a_fault_body_that_is_not_text_is_served_as_bytes(tmp_path, data):
    path = tmp_path / "c.msgpack"
    request = RecordedRequest("POST", "https://api.example.invalid/v1/x", Headers(), JsonBody({}))
    response = RecordedResponse(200, Headers(), JsonBody({"ok": True}), 1.0, 1.0)
    Cassette(path, [Interaction(request, response)]).save()
    session = CassetteSession(
        path, timing="instant", faults=[faults.prepend(500, body=data)], on_unused="ignore"
    )

    with session:
        answer = session.transport(TransportRequest("POST", "https://api.example.invalid/v1/x"))
        assert answer.status == 500
        served = answer.body if isinstance(answer.body, bytes) else answer.body.read()
        assert served == data
        assert answer.headers["content-type"] == "application/octet-stream"
