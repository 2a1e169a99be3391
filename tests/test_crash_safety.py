"""Crash safety (DESIGN §3): a recording process killed with SIGKILL never leaves a torn cassette.

A long-lived helper process (the "zygote") imports the library once, then for every trial forks
a recorder that records SSE streams from a loopback server in this process, round after round,
through ``use_cassette(record="new"/"all")`` and an httpx client, writing the cassette at the
end of every round. The zygote kills the recorder with SIGKILL after a random delay: a plain
random delay, a delay after the k-th stream started (mid-stream), or a delay after a write
began (mid-write). It kills its own unreaped child, so the pid cannot belong to anyone else.

After each kill the cassette on disk must be either byte-identical to the good file the trial
started from, or a complete new one that loads with ``load_cassette(validate=True)`` and holds
whole rounds of whole streams. A temp file left by a killed write must not look like a
cassette. The recorder logs progress markers to a file with unbuffered writes, which tell where
each kill landed.
"""

import json
import os
import random
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from pytest_toolnexus import (
    Cassette,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    load_cassette,
)
from pytest_toolnexus._store.cassette import JsonBody, SseBody
from tests.support.servers import LoopbackServer, write_chunk, write_chunked_head

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork") or sys.platform == "win32", reason="needs fork and SIGKILL"
)

ROOT = Path(__file__).resolve().parent.parent
TRIALS = 60
STREAMS_PER_ROUND = 3
EVENTS_PER_STREAM = 5
EVENT_GAP = 0.002
MAX_ROUNDS = 40

ZYGOTE = textwrap.dedent(
    r"""
    import json, os, random, signal, sys, time

    import httpx

    from pytest_toolnexus import LiveTransport, use_cassette
    from pytest_toolnexus._store import write as _write

    # Made once, before any fork: every recorder reuses its (empty) pool and TLS setup.
    LIVE = LiveTransport(httpx.Client(timeout=10))

    def record(job):
        fd = os.open(job["progress"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

        def mark(text):
            os.write(fd, text.encode())

        real_write, real_fsync, real_replace = _write.write_atomic, os.fsync, os.replace

        def write_atomic(path, data):
            mark("w")
            real_write(path, data)
            mark("d")

        # Widen the write's windows a little (a slow disk), so kills land inside them on a
        # fast machine too. The library's own code runs unchanged.
        def fsync(fd_):
            time.sleep(0.002)
            real_fsync(fd_)

        def replace(src, dst):
            time.sleep(0.002)
            real_replace(src, dst)

        _write.write_atomic = write_atomic
        os.fsync, os.replace = fsync, replace
        try:
            for round_ in range(job["rounds"]):
                mark(f"R{round_}:")
                with use_cassette(
                    job["path"], record=job["mode"], on_unused="ignore", live=LIVE
                ) as tape:
                    with httpx.Client(transport=tape.http_transport(), timeout=10) as client:
                        for i in range(job["streams"]):
                            mark("S")
                            body = {"trial": job["trial"], "round": round_, "i": i,
                                    "stream": True}
                            with client.stream("POST", job["url"], json=body) as response:
                                for _ in response.iter_bytes():
                                    pass
                            mark("E")
                            time.sleep(0.002)  # the client thinks between requests
                    mark("C")
                mark("D")
            mark("F")
        except BaseException as exc:
            mark("X" + repr(exc).replace("\n", " "))
        os._exit(0)

    def wait_for(progress, marker, count, limit):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            with open(progress) as handle:
                if handle.read().count(marker) >= count:
                    return True
            time.sleep(0.0002)
        return False

    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            record(job)
        strategy = job["strategy"]
        if strategy == "delay":
            time.sleep(job["delay"])
        else:
            wait_for(job["progress"], job["marker"], job["count"], 10.0)
            time.sleep(job["delay"])
        os.kill(pid, signal.SIGKILL)  # our own child, not yet reaped: the pid is still its
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        print(json.dumps({"killed": killed}), flush=True)
    """
)


class SseHandler:
    """Every request gets a stream of EVENTS_PER_STREAM events, EVENT_GAP apart, then [DONE]."""

    def __call__(self, request, conn):
        body = json.loads(request.body)
        try:
            write_chunked_head(conn, 200, [("Content-Type", "text/event-stream")])
            for n in range(EVENTS_PER_STREAM):
                event = {"round": body["round"], "i": body["i"], "n": n, "delta": "tok" * 20}
                write_chunk(conn, f"data: {json.dumps(event)}\n\n".encode())
                time.sleep(EVENT_GAP)
            write_chunk(conn, b"data: [DONE]\n\n")
            write_chunk(conn, b"")
        except OSError:
            pass  # the recorder was killed mid-stream


@pytest.fixture(scope="module")
def server():
    with LoopbackServer(SseHandler()) as running:
        yield running


@pytest.fixture(scope="module")
def zygote():
    process = subprocess.Popen(
        [sys.executable, "-c", ZYGOTE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        text=True,
        bufsize=1,
    )
    try:
        yield process
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def prior_cassette(path: Path) -> bytes:
    """The good cassette each trial starts from."""
    headers = Headers([("content-type", "application/json")])
    interactions = [
        Interaction(
            RecordedRequest("POST", "http://127.0.0.1:9/v1/old", headers, JsonBody({"old": n})),
            RecordedResponse(200, headers, JsonBody({"answer": n}), 1.0, 2.0),
        )
        for n in range(2)
    ]
    Cassette(path, interactions, {"version_of_the_test": "prior"}).save()
    return path.read_bytes()


def run_trial(zygote, job):
    result = {}

    def ask():
        zygote.stdin.write(json.dumps(job) + "\n")
        zygote.stdin.flush()
        result.update(json.loads(zygote.stdout.readline()))

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    asker.join(timeout=30)
    assert not asker.is_alive(), "the zygote did not answer"
    return result


def where_killed(progress: str) -> str:
    """Where the kill landed, from the recorder's last marker."""
    assert "X" not in progress, f"the recorder failed: {progress}"
    last = progress.rstrip(":0123456789R")[-1:] if progress else ""
    if "F" in progress:
        return "finished before the kill"
    return {
        "": "before the first request",
        "S": "mid-stream",
        "E": "between interactions",
        "C": "closing, before the write",
        "w": "mid-write",
        "d": "after a write, before the round ended",
        "D": "between rounds",
    }[last]


def possible_last_rounds(progress: str) -> set[int]:
    """Rounds whose write may be the one on disk: the last that finished its write, and a
    later one whose write began (the kill may land after ``os.replace``, before the marker)."""
    segments = [s for s in progress.split("R") if s]
    finished = [int(s.split(":", 1)[0]) for s in segments if "d" in s]
    begun = [int(s.split(":", 1)[0]) for s in segments if "w" in s and "d" not in s]
    return set(finished[-1:]) | set(begun)


def assert_complete_new(path: Path, prior: Cassette, job, progress: str) -> int:
    """The file is a whole cassette holding whole rounds of whole streams; returns its round."""
    cassette = load_cassette(path, validate=True)
    interactions = cassette.interactions
    if job["mode"] == "new":
        kept = [i.to_doc() for i in interactions[: len(prior.interactions)]]
        assert kept == [i.to_doc() for i in prior.interactions]
        recorded = interactions[len(prior.interactions) :]
    else:
        recorded = interactions
    assert recorded, "a new cassette holds what was recorded"
    assert len(recorded) % STREAMS_PER_ROUND == 0
    bodies = [i.request.body.value for i in recorded]
    last = bodies[-1]["round"]
    assert last in possible_last_rounds(progress), (last, progress)
    # 'new' keeps every earlier round (merged from disk); 'all' holds only the last one.
    rounds = range(last + 1) if job["mode"] == "new" else [last]
    assert bodies == [
        {"trial": job["trial"], "round": r, "i": i, "stream": True}
        for r in rounds
        for i in range(STREAMS_PER_ROUND)
    ]
    for interaction in recorded:
        response = interaction.response
        assert response.complete
        assert response.error is None
        assert isinstance(response.body, SseBody)
        data = [e.get("data") for e in response.body.events]
        assert [d["n"] for d in data[:-1]] == list(range(EVENTS_PER_STREAM))
        assert response.body.events[-1]["text"] == "[DONE]"
    return last


def test_sigkill_never_leaves_a_torn_cassette(tmp_path, server, zygote):
    rng = random.Random(20261129)
    outcomes = Counter()
    landed = Counter()
    crossed = Counter()
    temp_files = 0
    for trial in range(TRIALS):
        folder = tmp_path / f"trial{trial:03d}"
        folder.mkdir()
        path = folder / "chat.msgpack"
        before = prior_cassette(path)
        prior = load_cassette(path)
        progress_file = tmp_path / f"progress{trial:03d}.log"
        progress_file.touch()
        job = {
            "trial": trial,
            "path": str(path),
            "progress": str(progress_file),
            "url": server.url("/v1/chat/completions"),
            "mode": "new" if trial % 2 else "all",
            "rounds": MAX_ROUNDS,
            "streams": STREAMS_PER_ROUND,
        }
        kind = trial % 5
        if kind in (0, 1):  # a plain random delay
            job |= {"strategy": "delay", "delay": rng.uniform(0.0, 0.2)}
        else:  # a short random delay after the n-th write began, stream began or stream ended
            marker, most, longest = {2: ("w", 2, 0.008), 3: ("S", 6, 0.008), 4: ("E", 5, 0.002)}[
                kind
            ]
            job |= {
                "strategy": "marker",
                "marker": marker,
                "count": rng.randint(1, most),
                "delay": rng.uniform(0.0, longest),
            }

        result = run_trial(zygote, job)

        progress = progress_file.read_text()
        where = where_killed(progress)
        landed[where] += 1
        assert result["killed"] or where == "finished before the kill"
        after = path.read_bytes()
        if after == before:
            outcomes["previous version, byte for byte"] += 1
            crossed[(where, "previous")] += 1
            # Only a write that never finished may leave the previous version.
            assert "d" not in progress, f"trial {trial}: a finished write was lost"
        else:
            assert "w" in progress, f"trial {trial}: the file changed with no write"
            assert_complete_new(path, prior, job, progress)
            outcomes["complete new version"] += 1
            crossed[(where, "new")] += 1
        # A temp file a killed write left behind is never taken for a cassette.
        leftovers = [p for p in folder.iterdir() if p != path]
        assert all(p.name.startswith(".chat.msgpack.") for p in leftovers), leftovers
        assert all(p.suffix == ".tmp" for p in leftovers), leftovers
        assert sorted(folder.rglob("*.msgpack")) == [path]
        temp_files += len(leftovers)

    report = (
        f"{TRIALS} SIGKILL trials; cassette after the kill: {dict(outcomes)}; "
        f"kill landed: {dict(landed)}; temp files left behind: {temp_files}; "
        f"by landing and outcome: {dict(sorted(crossed.items()))}"
    )
    print(report)
    assert sum(outcomes.values()) == TRIALS
    assert outcomes["previous version, byte for byte"] > 0, report
    assert outcomes["complete new version"] > 0, report
    assert landed["mid-stream"] + landed["between interactions"] > 0, report
    assert landed["mid-write"] > 0, report
