"""Benchmark 14: a session's opening as a test pays for it, and the garbage collector around it
(issue 26, the load row and the full collections).

a. A session opened on a cassette of 1,000 and of 10,000 chat exchanges, and its first request
   sent through an ``httpx.Client`` over ``session.http_transport()``, against the floor of any
   loader: ``msgpack.unpackb`` of the same file (read included), as it runs in a program (the
   collector on), and with the collector paused for a like-for-like reading. Interleaved, call
   after call; each session is closed before the next call.
b. The collector while a 10,000-interaction session is open: the collections that ran during
   its opening, and the cost of one full collection (``gc.collect()``) with the session open
   against the same with no cassette loaded, which is what every full collection the test's own
   allocations trigger pays.
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import msgpack
from _common import Table, cpu_now, interleaved, ms, now, ratio, verdict
from _fixtures import CHAT_URL, chat_pairs, write_toolnexus

from pytest_toolnexus import CassetteSession

SIZES = (1_000, 10_000)
REPEATS = {1_000: 9, 10_000: 5}
GOAL = 1.3  # issue 26: the session opened within 1.3x of the plain decode, as a test pays it
FULL_REPEATS = 7
FULL_GOAL = 1.3  # a full collection with a large cassette open, over one with none


def _decode(path: Path) -> object:
    return msgpack.unpackb(path.read_bytes(), raw=False)


def _decode_paused(path: Path) -> object:
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _decode(path)
    finally:
        if enabled:
            gc.enable()


def _open_and_first(path: Path, first: dict[str, object]) -> Callable[[], None]:
    def run() -> None:
        session = CassetteSession(path, record="none", timing="instant", on_unused="ignore")
        with httpx.Client(transport=session.http_transport()) as client:
            answer = client.post(CHAT_URL, json=first)
        session.close()
        assert answer.status_code == 200, answer.text[:200]

    return run


class _Collections:
    """The collections the collector runs while this is installed: (generation, seconds)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, float]] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = now()
        else:
            self.seen.append((info["generation"], now() - self._start))

    @contextmanager
    def installed(self) -> Iterator[_Collections]:
        gc.callbacks.append(self)
        try:
            yield self
        finally:
            gc.callbacks.remove(self)


def _opening(work: Path, figures: dict[str, float]) -> Table:
    table = Table(
        "14a. A session opened and its first request, against the plain decode of the file "
        "(msgpack.unpackb, read included; median of interleaved calls)",
        [
            *("interactions", "open + 1st request ms", "unpackb ms", "ratio", "goal", ""),
            *("ratio by CPU", "unpackb, gc paused, ms", "ratio to it"),
        ],
    )
    pairs = chat_pairs(max(SIZES))
    for n in SIZES:
        path = work / f"open-{n}.msgpack"
        write_toolnexus(path, pairs[:n])
        (opened, opened_cpu), (raw, raw_cpu), (paused, _) = interleaved(
            [
                _open_and_first(path, pairs[0].request),
                lambda p=path: _decode(p),
                lambda p=path: _decode_paused(p),
            ],
            REPEATS[n],
        )
        path.unlink()
        figures[f"open_vs_decode_{n}"] = opened / raw
        table.add(
            f"{n:,}",
            ms(opened),
            ms(raw),
            ratio(opened / raw),
            f"<= {GOAL}x",
            verdict(opened / raw <= GOAL),
            ratio(opened_cpu / raw_cpu),
            ms(paused),
            ratio(opened / paused),
        )
    table.note(
        "A test pays for the session's opening as a whole: the file read and decoded, each "
        "interaction's outline checked, every request decoded and filed in the match index, "
        "then the first request matched and its answer decoded and played. The decode builds "
        "only msgpack's dicts and lists, and runs with the collector on as a program's would; "
        "the session pauses the collector while it loads and indexes, hence the gc-paused "
        "column."
    )
    return table


def _full_collection() -> float:
    start = now()
    gc.collect()
    return now() - start


def _collector(work: Path, figures: dict[str, float]) -> Table:
    n = max(SIZES)
    path = work / f"collector-{n}.msgpack"
    write_toolnexus(path, chat_pairs(n))
    gc.collect()
    with _Collections().installed() as during:
        started, cpu = now(), cpu_now()
        session = CassetteSession(path, record="none", timing="instant", on_unused="ignore")
        opened = now() - started
        cpu = cpu_now() - cpu
    with_open = statistics.median(_full_collection() for _ in range(FULL_REPEATS))
    session.close()
    del session
    gc.collect()
    without = statistics.median(_full_collection() for _ in range(FULL_REPEATS))
    path.unlink()
    table = Table(
        f"14b. The garbage collector and a session open on {n:,} interactions",
        ["figure", "value", "goal", ""],
    )
    full = [t for generation, t in during.seen if generation == 2]
    young = [t for generation, t in during.seen if generation < 2]
    figures["full_collections_in_open"] = len(full)
    table.add(
        "opening: full collections (generation 2), their ms",
        f"{len(full)}, {ms(sum(full))}",
        "0",
        verdict(not full),
    )
    table.add(
        "opening: younger collections, their ms",
        f"{len(young)}, {ms(sum(young))}",
        "",
        "info",
    )
    table.add("opening: wall ms (CPU ms)", f"{ms(opened)} ({ms(cpu)})", "", "info")
    over = with_open / without
    figures["full_collection_open_over_none"] = over
    table.add(
        f"one full collection with the session open, ms (median of {FULL_REPEATS})",
        ms(with_open),
        "",
        "",
    )
    table.add("  the same with no cassette loaded, ms", ms(without), "", "")
    table.add("  ratio", ratio(over), f"<= {FULL_GOAL}x", verdict(over <= FULL_GOAL))
    table.note(
        "A full collection traverses every container the collector tracks. The session moves "
        "what it loaded to the permanent generation (gc.freeze) once it has indexed it, and "
        "gives it back when it closes, so a full collection that the test's own allocations "
        "set off while the cassette is in use (inside a request, as often as not) costs what it "
        "would cost with no cassette at all. The opening runs with the collector paused."
    )
    return table


def run(work: Path) -> tuple[list[Table], dict[str, float]]:
    figures: dict[str, float] = {}
    return [_opening(work, figures), _collector(work, figures)], figures


if __name__ == "__main__":
    from _common import run_alone

    run_alone(run)
