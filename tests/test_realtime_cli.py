"""The CLI reads WebSocket sessions (issue 21, point 6): ``show`` draws both directions on one
timeline, as text, as the JSON timeline and in the HTML page; ``check`` validates every
frame, scans every frame for secrets and reads the session through its provider view;
``diff`` compares sessions frame by frame, times within the tolerance.
"""

import base64
import json

import pytest

from pytest_toolnexus import Cassette, Interaction, RecordedRequest, RecordedResponse, build
from pytest_toolnexus._cli.main import main
from pytest_toolnexus._store.cassette import JsonBody
from pytest_toolnexus._store.ws_frames import frame_doc
from tests.test_realtime_views import OPENAI_URL, client, server, session

FAKE_KEY = "sk-proj-" + "Wq7_" * 6  # built at run time: no secret-shaped literal in the source


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out + err


def built(tmp_path, name="rt.msgpack", text="Hi there!", city="Paris"):
    path = tmp_path / name
    build.build_cassette(
        path,
        [
            build.openai_realtime(
                [
                    build.RealtimeTurn(text=text),
                    build.RealtimeTurn(tool_calls=[build.ToolCall("weather", {"city": city})]),
                ]
            )
        ],
    )
    return path


def frames_of(path):
    from pytest_toolnexus import load_cassette

    return load_cassette(path).interactions[0].response.body.frames


def test_show_json_and_html_draw_both_directions_on_one_timeline(tmp_path, capsys):
    path = built(tmp_path)
    frames = frames_of(path)

    code, out = cli(capsys, "show", path, "--json")
    assert code == 0, out
    (interaction,) = json.loads(out)["interactions"]
    assert interaction["kind"] == "websocket"
    pieces = interaction["pieces"]
    assert [(p["t"], p["from"]) for p in pieces] == [(f["t"], f["from"]) for f in frames]
    arrows = {"client": "client > ", "server": "< server "}
    assert all(p["label"].startswith(arrows[p["from"]]) for p in pieces)
    assert pieces[-1]["label"] == "client > close 1000"

    page = tmp_path / "rt.html"
    code, out = cli(capsys, "show", path, "--html", page)
    assert code == 0, out
    html = page.read_text()
    client_frames = sum(1 for f in frames if f["from"] == "client")
    assert html.count('class="mark rec out"') == client_frames
    assert html.count('class="mark rec"') == len(frames) - client_frames
    assert "sent by the client (WebSocket)" in html


def test_show_text_marks_the_built_client_frames_as_patterns(tmp_path, capsys):
    code, out = cli(capsys, "show", built(tmp_path))
    assert code == 0, out
    client_lines = [line for line in out.splitlines() if " client > " in line]
    assert [line.split("client > ")[1] for line in client_lines] == [
        'matches type="conversation.item.create"',
        'matches type="response.create"',
        'matches type="conversation.item.create"',
        'matches type="response.create"',
        "close 1000",
    ]


def test_check_reads_a_session_through_its_provider_view(tmp_path, capsys):
    good = built(tmp_path)
    code, out = cli(capsys, "check", good)
    assert code == 0, out
    assert f"ok   {good} (1 interaction)" in out

    bad = tmp_path / "bad.msgpack"
    frames = [
        client(1.0, {"type": "response.create"}),
        server(2.0, {"type": "response.output_audio.delta", "response_id": "r", "delta": "!!"}),
    ]
    Cassette(bad, [session(OPENAI_URL, frames)]).save()
    code, out = cli(capsys, "check", bad)
    assert code == 1, out
    assert f"FAIL {bad}: 1 provider answer(s) do not parse" in out
    assert "interaction #0 (openai-realtime): the openai-realtime answer does not parse" in out


def test_check_says_a_session_that_reports_an_error_and_passes(tmp_path, capsys):
    path = tmp_path / "error.msgpack"
    frames = [
        client(1.0, {"type": "response.create"}),
        server(2.0, {"type": "error", "error": {"type": "server_error", "message": "Overloaded"}}),
    ]
    Cassette(path, [session(OPENAI_URL, frames)]).save()
    code, out = cli(capsys, "check", path)
    assert code == 0, out
    assert (
        "info: interaction #0 (openai-realtime) carries an error in its answer: Overloaded" in out
    )


@pytest.mark.parametrize(
    ("sender", "frame"),
    [
        ("client", lambda: frame_doc(5.0, "client", f'{{"type":"x","key":"{FAKE_KEY}"}}')),
        ("server", lambda: frame_doc(5.0, "server", f"key {FAKE_KEY}".encode())),
        (
            "server",
            lambda: frame_doc(
                5.0,
                "server",
                json.dumps({"audio": base64.b64encode(b"pcm").decode(), "note": FAKE_KEY}),
            ),
        ),
    ],
    ids=["client-json", "server-binary", "server-json"],
)
def test_check_finds_a_secret_in_any_frame_without_printing_it(tmp_path, capsys, sender, frame):
    path = tmp_path / "leak.msgpack"
    frames = [client(1.0, {"type": "response.create"}), frame()]
    Cassette(path, [session(OPENAI_URL, frames)]).save(unsafe_verbatim=True)

    code, out = cli(capsys, "check", path)

    assert code == 1, out
    assert f"FAIL {path}: 1 secret(s)" in out
    assert "response.body.frames[1]" in out
    assert FAKE_KEY not in out


def test_check_names_a_damaged_frame(tmp_path, capsys):
    path = tmp_path / "damaged.msgpack"
    frames = [
        client(1.0, {"type": "response.create"}),
        {"t": 2.0, "from": "nobody", "kind": "text"},
    ]
    Cassette(path, [session(OPENAI_URL, frames)]).save(unsafe_verbatim=True)

    code, out = cli(capsys, "check", path)

    assert code == 1, out
    assert "websocket frame 1" in out
    assert "'from' must be 'client' or 'server'" in out


def test_diff_compares_sessions_frame_by_frame(tmp_path, capsys):
    one = built(tmp_path, "one.msgpack")
    other = built(tmp_path, "other.msgpack", city="Rome")

    code, out = cli(capsys, "diff", one, other)

    assert code == 1, out
    position = next(
        n
        for n, f in enumerate(frames_of(one))
        if f["from"] == "server" and f["data"]["type"] == "response.function_call_arguments.done"
    )
    changed = [line.strip() for line in out.splitlines() if line.strip().startswith("~")]
    assert (
        f"~ response.body.frames[{position}].data['arguments']: "
        '"{\\"city\\":\\"Paris\\"}" -> "{\\"city\\":\\"Rome\\"}"'
    ) in changed
    assert all("frames[" in line or "t_end" in line for line in changed)


def test_diff_reports_frame_times_beyond_the_tolerance_only(tmp_path, capsys):
    one = tmp_path / "one.msgpack"
    other = tmp_path / "other.msgpack"
    base = [client(1.0, {"type": "response.create"}), server(100.0, {"type": "response.done"})]
    near = [client(1.0, {"type": "response.create"}), server(120.0, {"type": "response.done"})]
    Cassette(one, [session(OPENAI_URL, base)]).save()
    Cassette(other, [session(OPENAI_URL, near)]).save()

    assert cli(capsys, "diff", one, other)[0] == 0  # 20 ms: within the default 50 ms

    code, out = cli(capsys, "diff", one, other, "--time-tolerance", "10")
    assert code == 1, out
    assert "~ response.body.frames[1].t: 100.0 ms -> 120.0 ms (+20.0 ms)" in out


def test_check_leaves_an_http_answer_on_a_realtime_path_alone(tmp_path, capsys):
    # A status page at .../realtime is no realtime session: no view is asked to read it.
    path = tmp_path / "status.msgpack"
    request = RecordedRequest("GET", "https://status.example.test/v1/realtime")
    response = RecordedResponse(200, body=JsonBody({"status": "green"}), t_end=3.0)
    Cassette(path, [Interaction(request, response)]).save()

    code, out = cli(capsys, "check", path)

    assert code == 0, out
    assert f"ok   {path} (1 interaction)" in out
