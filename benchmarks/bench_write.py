"""Benchmark 9: recording ``new`` into a large cassette, and ``check`` of it, in memory within
3x the file's size (DESIGN.md section 8; issue 23, row 7).

A cassette of about ``SIZE_MB`` MB is written through the public API (``Cassette.save``, so
through the gate like any recording): chat exchanges with JSON answers of a few KB, each
request distinct, and a few long OpenAI chat streams from ``pytest_toolnexus.build``. A
generated project holds one test that sends one new chat request to a loopback server started
by its conftest, with ``@pytest.mark.cassette`` on that file.

Each figure is a whole process (``python -m pytest``, or ``python -m pytest_toolnexus check``),
its peak resident memory and CPU time read with ``getrusage(RUSAGE_CHILDREN)`` in a small
launcher that started it (a process forked from the benchmark's would count its pages):

- record: ``--cassette-record=new`` on a fresh copy of the cassette (the one request is
  recorded, the file written with it), against the same test replaying the written file with
  ``--cassette-record=none`` (the same interpreter, pytest, plugin, file read and open;
  nothing written). Goal: the peak over the baseline's at most 3x the file's size.
- check: ``pytest-toolnexus check`` of the file against ``check`` of a one-interaction
  cassette (the same imports). Goal: the same.
- time (information): the CPU seconds each spends over its baseline, over the CPU seconds of
  a plain ``msgpack.unpackb`` + ``packb`` of the same file in this process.

Run alone: ``python benchmarks/bench_write.py`` (about two minutes).
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
from _common import Table, cpu_now, median, now, ratio, verdict
from _projects import BASE_ARGS, clean_env

from pytest_toolnexus import (
    Cassette,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    build,
)
from pytest_toolnexus._store.cassette import JsonBody

SIZE_MB = 30
ROUNDS = 3
MEMORY_GOAL = 3.0
CHAT = "https://api.openai.com/v1/chat/completions"
STREAMS = 8
STREAM_WORDS = 6_000

_WORDS = (  # noqa: SIM905 (a word list reads better as text)
    "alpha bravo cache delta echo fjord gamma harbor index jitter kernel lambda matrix "
    "nexus orbit packet quorum replay signal tensor update vector window xenon yield "
    "zenith async buffer cursor daemon entropy ferry gradient hash iterate journal "
    "ledger mutex the of and to in is that for with as on by this be are from"
).split()

_CONFTEST = """
import http.server
import json
import os
import threading

import pytest


class _Model(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        asked = json.loads(self.rfile.read(int(self.headers["content-length"])))
        body = json.dumps(
            {
                "id": "chatcmpl-new",
                "object": "chat.completion",
                "model": asked["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "The newest answer."},
                        "finish_reason": "stop",
                    }
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def model_url(request):
    port = int(os.environ["BENCH_PORT"])
    if request.config.getoption("cassette_record") != "none":
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Model)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        request.addfinalizer(server.shutdown)
        request.addfinalizer(server.server_close)
    return f"http://127.0.0.1:{port}/v1/chat/completions"
"""

_TEST = """
import httpx
import pytest


@pytest.mark.cassette
def test_one_more_answer(model_url):
    with httpx.Client() as client:
        answer = client.post(
            model_url,
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "One more?"}]},
        )
    assert answer.json()["choices"][0]["message"]["content"] == "The newest answer."
"""


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _exchange(rng: random.Random, i: int) -> Interaction:
    """One chat request (a short history, so each is distinct) and a JSON answer of a few KB."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful assistant for a test suite."}
    ]
    for turn in range(rng.randrange(1, 4)):
        messages.append({"role": "user", "content": f"Q{i}.{turn}: {_sentence(rng, 20)}?"})
        messages.append({"role": "assistant", "content": _sentence(rng, 40)})
    messages.append({"role": "user", "content": f"Question {i}: {_sentence(rng, 16)}?"})
    answer = {
        "id": f"chatcmpl-{rng.getrandbits(96):024x}",
        "object": "chat.completion",
        "created": 1732000000 + i,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": _sentence(rng, rng.randrange(250, 650)),
                    "refusal": None,
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 120 + i % 97, "completion_tokens": 400 + i % 211},
        "system_fingerprint": "fp_0ba0d124f1",
    }
    request = RecordedRequest(
        "POST",
        CHAT,
        Headers([("content-type", "application/json"), ("user-agent", "OpenAI/Python 1.57.0")]),
        JsonBody({"model": "gpt-4o-mini", "messages": messages, "temperature": 0.2}),
    )
    t_headers = 250.0 + (i * 37) % 400
    response = RecordedResponse(
        200,
        Headers(
            [
                ("date", "Tue, 19 Nov 2024 07:06:40 GMT"),
                ("content-type", "application/json"),
                ("x-request-id", f"req_{i:032x}"),
                ("openai-processing-ms", str(300 + i % 500)),
            ]
        ),
        JsonBody(answer),
        t_headers=t_headers,
        t_end=t_headers + 2.5,
    )
    return Interaction(request, response)


def write_cassette(path: Path, size_mb: int = SIZE_MB) -> int:
    """A cassette of about ``size_mb`` MB, through ``Cassette.save``; returns its size."""
    rng = random.Random(23)
    streams = [
        build.openai_chat(
            _sentence(rng, STREAM_WORDS),
            request_body={"model": "gpt-4o-mini", "stream": True, "n": n},
            cadence=build.Cadence(ttft=0.3, gap=0.01, jitter=0.004, seed=n),
        )
        for n in range(STREAMS)
    ]
    streamed = len(Cassette(path, streams).to_bytes())
    per_exchange = len(Cassette(path, [_exchange(random.Random(0), 0)]).to_bytes())
    count = max(1, (size_mb * 1_000_000 - streamed) // per_exchange)
    interactions = [_exchange(rng, i) for i in range(count)]
    # The streams among the exchanges, as a long recording would have them.
    step = max(1, len(interactions) // (STREAMS + 1))
    for n, stream in enumerate(streams):
        interactions.insert((n + 1) * step + n, stream)
    Cassette(path, interactions, {"clock_epoch": 1732000000.0}).save()
    return path.stat().st_size


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float  # user + system seconds of the process
    peak: int  # bytes
    code: int
    output: str


# Runs the command it is given and prints that child's peak resident memory (KiB on Linux,
# bytes on macOS) and CPU seconds. A process forked from a big one starts with that one's pages
# counted in its peak, so each measured process is started from this small launcher, not from
# the benchmark.
_LAUNCHER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[1:])\n"
    "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(usage.ru_maxrss, usage.ru_utime + usage.ru_stime, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def run_child(argv: list[str], cwd: Path, env: dict[str, str]) -> Run:
    """Run ``argv``, and read its wall time, CPU time and peak resident memory."""
    log = cwd / "child.log"
    with open(log, "wb") as out:
        start = now()
        done = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, *argv],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.PIPE,
            check=False,
        )
        wall = now() - start
    *said, last = done.stderr.decode(errors="replace").strip().splitlines() or ["0 0"]
    rss, cpu = last.split()
    peak = int(rss) if sys.platform == "darwin" else int(rss) * 1024
    output = log.read_text(errors="replace") + "\n".join(said)
    return Run(wall, float(cpu), peak, done.returncode, output[-3000:])


def _project(work: Path) -> Path:
    folder = work / "write-project"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "conftest.py").write_text(textwrap.dedent(_CONFTEST))
    (folder / "test_big.py").write_text(textwrap.dedent(_TEST))
    return folder


def _mb(value: float) -> str:
    return f"{value / 1e6:,.1f}"


def _plain_round_trip(path: Path) -> tuple[float, float]:
    """Wall and CPU seconds of ``msgpack.unpackb`` + ``packb`` of the file, in this process."""
    data = path.read_bytes()
    wall, cpu = now(), cpu_now()
    msgpack.packb(msgpack.unpackb(data, raw=False), use_bin_type=True)
    return now() - wall, cpu_now() - cpu


def run(
    work: Path, size_mb: int = SIZE_MB, rounds: int = ROUNDS
) -> tuple[list[Table], dict[str, float]]:
    master = work / "big.msgpack"
    started = now()
    size = write_cassette(master, size_mb)
    written_in = now() - started
    count = len(Cassette.from_bytes(master.read_bytes(), master).interactions)
    project = _project(work)
    target = project / "cassettes" / "test_big" / "test_one_more_answer.msgpack"
    target.parent.mkdir(parents=True)
    env = {**clean_env(), "BENCH_PORT": str(_free_port())}
    pytest_argv = [sys.executable, "-m", "pytest", *BASE_ARGS, "--rootdir", str(project)]
    small = work / "small.msgpack"
    Cassette(small, [_exchange(random.Random(1), 1)]).save()
    check = [sys.executable, "-m", "pytest_toolnexus", "check"]

    runs: dict[str, list[Run]] = {
        "record": [],
        "replay": [],
        "record empty": [],
        "check": [],
        "check small": [],
    }
    for _ in range(rounds):
        target.unlink(missing_ok=True)
        empty = run_child([*pytest_argv, "--cassette-record=new"], project, env)
        shutil.copyfile(master, target)
        record = run_child([*pytest_argv, "--cassette-record=new"], project, env)
        written = Cassette.from_bytes(target.read_bytes(), target).interactions
        if record.code != 0 or len(written) != count + 1:
            raise RuntimeError(
                f"the recording run wrote {len(written)} interactions, not {count + 1}:\n"
                f"{record.output}"
            )
        replay = run_child([*pytest_argv, "--cassette-record=none"], project, env)
        checked = run_child([*check, str(master)], work, env)
        for name, done in (("replay", replay), ("check", checked), ("empty", empty)):
            if done.code != 0:
                raise RuntimeError(f"the {name} run failed:\n{done.output}")
        runs["record empty"].append(empty)
        runs["record"].append(record)
        runs["replay"].append(replay)
        runs["check"].append(checked)
        runs["check small"].append(run_child([*check, str(small)], work, env))
    trips = [_plain_round_trip(master) for _ in range(rounds)]

    def figures(name: str) -> tuple[float, float, float]:
        chosen = runs[name]
        return (
            median([r.wall for r in chosen]),
            median([r.cpu for r in chosen]),
            median([r.peak for r in chosen]),
        )

    table = Table(
        f"9. Recording 'new' into a {_mb(size)} MB cassette of {count:,} interactions, and "
        f"check of it (median of {rounds} runs of each process)",
        ("process", "wall s", "CPU s", "peak MB", "over baseline", "/ file size", "goal", ""),
    )
    verdicts: dict[str, float] = {}
    for name, label, base, base_label in (
        (
            "record",
            "the test recording one more into it (record new)",
            "replay",
            "baseline: the same test replaying it (record none)",
        ),
        (
            "check",
            "pytest-toolnexus check of it",
            "check small",
            "baseline: check of a 1-interaction cassette",
        ),
    ):
        base_wall, base_cpu, base_peak = figures(base)
        wall, cpu, peak = figures(name)
        extra = (peak - base_peak) / size
        verdicts[name] = extra
        table.add(base_label, f"{base_wall:.2f}", f"{base_cpu:.2f}", _mb(base_peak), "", "", "", "")
        table.add(
            f"  {label}",
            f"{wall:.2f}",
            f"{cpu:.2f}",
            _mb(peak),
            f"+{_mb(peak - base_peak)} MB",
            ratio(extra),
            f"<= {MEMORY_GOAL:.0f}x",
            verdict(extra <= MEMORY_GOAL),
        )
        if name == "record":
            empty_peak = figures("record empty")[2]
            whole = (figures("record")[2] - empty_peak) / size
            table.add(
                "  for information: the record run over the same test recording into no file",
                f"{figures('record empty')[0]:.2f}",
                f"{figures('record empty')[1]:.2f}",
                _mb(empty_peak),
                f"+{_mb(figures('record')[2] - empty_peak)} MB",
                ratio(whole),
                "",
                "info",
            )
    trip_wall = median([w for w, _ in trips])
    trip_cpu = median([c for _, c in trips])
    record_cpu = figures("record")[1] - figures("replay")[1]
    check_cpu = figures("check")[1] - figures("check small")[1]
    table.add(
        "msgpack.unpackb + packb of the file",
        f"{trip_wall:.2f}",
        f"{trip_cpu:.2f}",
        "",
        "",
        "",
        "",
        "",
    )
    table.add(
        "  recording's CPU over replaying's",
        "",
        f"{record_cpu:.2f}",
        "",
        "",
        ratio(record_cpu / trip_cpu),
        "",
        "info",
    )
    table.add(
        "  check's CPU over the 1-interaction check's",
        "",
        f"{check_cpu:.2f}",
        "",
        "",
        ratio(check_cpu / trip_cpu),
        "",
        "info",
    )
    table.note(
        f"The file ({size:,} B: {count - STREAMS:,} chat answers of a few KB and {STREAMS} "
        f"streams of {STREAM_WORDS:,} events) was written through Cassette.save in "
        f"{written_in:.1f} s. Each figure is a whole process (python -m pytest, or "
        "python -m pytest_toolnexus check); its peak RSS and CPU time are read with "
        "getrusage(RUSAGE_CHILDREN) in a small launcher that started it. '/ file size' is the "
        "peak over the baseline's, over the file's size; in the last rows, the CPU the run "
        "spends over its baseline, over a plain msgpack decode and encode of the same file. "
        "The 'no file' row is the same test recording into no cassette: the recording run's "
        "peak over it is the whole file's share, which replaying it already takes (the session "
        "holds the decoded file, several times its size in Python objects)."
    )
    whole = (figures("record")[2] - figures("record empty")[2]) / size
    return [table], {
        "record_memory": verdicts["record"],
        "check_memory": verdicts["check"],
        "record_whole": whole,
        "record_cpu": record_cpu / trip_cpu,
        "check_cpu": check_cpu / trip_cpu,
    }


if __name__ == "__main__":
    from _common import run_alone

    run_alone(run)
