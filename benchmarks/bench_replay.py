"""Benchmark 1: the cost of one replayed request, and whether it stays flat along a cassette.

2,000 sequential POSTs, each with a distinct chat body, each answered from a cassette of the same
2,000 interactions, through an ``httpx.Client`` (and an ``httpx2.Client``):

* floor: ``MockTransport`` whose handler returns a prebuilt response found by a dict lookup;
* toolnexus: ``CassetteSession(record="none")`` with ``timing="instant"`` and with the default
  virtual timing (the clock is not installed: ``start()`` is never called);
* vcrpy: ``VCR(record_mode="none", match_on=("method", "uri", "body")).use_cassette``.

Every request is timed on its own. The variants run interleaved, round after round, so load
from other processes falls on all of them alike; each figure is the median over the rounds.
"""

from __future__ import annotations

import argparse
import gc
import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import vcr
from _common import Table, cpu_now, mean, median, now, ratio, us, verdict
from _fixtures import CHAT_URL, Pair, chat_pairs, http_response, write_toolnexus, write_vcrpy

from pytest_toolnexus import CassetteSession
from pytest_toolnexus._bridges.httpx import HTTPBridge
from pytest_toolnexus._seam.transport import call

COUNT = 2_000
WARMUP = 300
GOAL_RATIO = 1.3  # issue 15 item 1 (ahead of pytest-httpx and respx, which do less)
GOAL_FLAT = 1.2
DESIGN_RATIO = 2.0
VCRPY_STRIDE = 50  # vcrpy: time every 50th request (40 of the 2,000); see _vcrpy_sampled
VCRPY_SMALL = 100  # vcrpy: a cassette small enough to replay in full


@dataclass
class Series:
    """Per-request seconds of each timed round of one variant."""

    name: str
    rounds: list[list[float]]
    cpu: list[float] = field(default_factory=list)  # process CPU seconds per request, per round

    def add(self, result: tuple[list[float], float]) -> None:
        times, cpu = result
        self.rounds.append(times)
        self.cpu.append(cpu / len(times))

    def cpu_per_request(self) -> float:
        return median(self.cpu)

    def per_request(self) -> float:
        """Mean over the requests of each request's median over the rounds."""
        return mean(self.positionwise())

    def positionwise(self) -> list[float]:
        """Each request's median over the rounds: one slow round does not skew a window."""
        return [median(column) for column in zip(*self.rounds, strict=True)]

    def flatness(self) -> float:
        return flatness(self.positionwise())


def flatness(times: Sequence[float]) -> float:
    tenth = max(1, len(times) // 10)
    return mean(times[-tenth:]) / mean(times[:tenth])


def _never(request: Any) -> Any:
    raise AssertionError(f"vcrpy let {request.method} {request.url} through to the transport")


def _drive(
    client: Any, pairs: list[Pair], positions: Sequence[int] | None = None
) -> tuple[list[float], float]:
    """Send the requests in order, timing each; then check every answer (untimed).

    Returns each request's wall seconds, and the process CPU seconds of the whole loop.
    """
    chosen = range(len(pairs)) if positions is None else positions
    times: list[float] = []
    # Only each answer's status and bytes are kept: 2,000 response objects held to the end
    # would set off full collections of themselves inside the timed requests.
    answers: list[tuple[int, bytes]] = []
    post = client.post
    gc.collect()
    cpu = cpu_now()
    for i in chosen:
        body = pairs[i].request
        start = now()
        answer = post(CHAT_URL, json=body)
        times.append(now() - start)
        answers.append((answer.status_code, answer.content))
    cpu = cpu_now() - cpu
    for i, (status, content) in zip(chosen, answers, strict=True):
        if status != 200 or json.loads(content)["id"] != pairs[i].response["id"]:
            raise AssertionError(f"request {i} got the wrong answer: {content[:200]!r}")
    return times, cpu


def _floor_client(lib: Any, pairs: list[Pair], build: bool = False) -> Any:
    """A client over MockTransport; the handler finds the answer by the request's bytes.

    The floor returns a prebuilt response object. With ``build``, the handler makes the
    response object from prebuilt headers and bytes, as any transport that answers must.
    """
    prebuilt: dict[bytes, Any] = {}
    with lib.Client() as builder:
        for i, pair in enumerate(pairs):
            sent = builder.build_request("POST", CHAT_URL, json=pair.request)
            model = http_response(i, pair)
            headers, content = model.headers.multi_items(), model.content
            prebuilt[sent.read()] = (
                (headers, content) if build else lib.Response(200, headers=headers, content=content)
            )

    def handler(request: Any) -> Any:
        return prebuilt[request.content]

    def building_handler(request: Any) -> Any:
        headers, content = prebuilt[request.content]
        return lib.Response(200, headers=headers, content=content)

    return lib.Client(transport=lib.MockTransport(building_handler if build else handler))


def _toolnexus_client(
    lib: Any, path: Path, timing: str, partial: bool
) -> tuple[Any, CassetteSession]:
    on_unused = "ignore" if partial else "warn"
    session = CassetteSession(path, record="none", timing=timing, on_unused=on_unused)
    return lib.Client(transport=session.http_transport()), session


def _run_floor(
    lib: Any, pairs: list[Pair], build: bool = False, count: int = COUNT
) -> tuple[list[float], float]:
    client = _floor_client(lib, pairs, build)
    with client:
        return _drive(client, pairs[:count])


def _run_toolnexus(
    lib: Any, path: Path, pairs: list[Pair], timing: str, count: int = COUNT
) -> tuple[list[float], float]:
    client, session = _toolnexus_client(lib, path, timing, partial=count < COUNT)
    with client:
        result = _drive(client, pairs[:count])
    session.close()
    return result


def _run_toolnexus_repeat(lib: Any, path: Path, pair: Pair) -> tuple[list[float], float]:
    """One recorded request sent COUNT times, served again and again (``allow_repeats``)."""
    session = CassetteSession(path, record="none", timing="instant", allow_repeats=True)
    with lib.Client(transport=session.http_transport()) as client:
        result = _drive(client, [pair] * COUNT)
    session.close()
    return result


def _run_floor_repeat(lib: Any, pair: Pair, build: bool = False) -> tuple[list[float], float]:
    with _floor_client(lib, [pair], build) as client:
        return _drive(client, [pair] * COUNT)


def _repeat_shape(work: Path, pairs: list[Pair], rounds: int) -> tuple[Table, dict[str, float]]:
    """The same request replayed COUNT times from a 1-interaction cassette, against the floor
    answering that request COUNT times, interleaved round after round."""
    path = work / "replay-1.msgpack"
    write_toolnexus(path, pairs[:1])
    pair = pairs[0]
    variants: dict[str, Callable[[], tuple[list[float], float]]] = {
        "floor: httpx MockTransport": lambda: _run_floor_repeat(httpx, pair),
        "MockTransport, Response built per request": lambda: _run_floor_repeat(
            httpx, pair, build=True
        ),
        "toolnexus, timing=instant": lambda: _run_toolnexus_repeat(httpx, path, pair),
        "floor: httpx2 MockTransport": lambda: _run_floor_repeat(httpx2, pair),
        "httpx2 MockTransport, Response built per request": lambda: _run_floor_repeat(
            httpx2, pair, build=True
        ),
        "toolnexus (httpx2), instant": lambda: _run_toolnexus_repeat(httpx2, path, pair),
    }
    series = {name: Series(name, []) for name in variants}
    for fn in variants.values():
        fn()  # warm-up, untimed
    for _ in range(rounds):
        for name, fn in variants.items():
            series[name].add(fn())
    table = Table(
        f"1b. The repeat shape: one request sent {COUNT:,} times, a 1-interaction cassette "
        f"(allow_repeats=True; median of {rounds} interleaved rounds)",
        ["variant", "us/request", "vs floor", "goal", "", "vs floor by CPU", "vs built"],
    )
    figures: dict[str, float] = {}
    for name, s in series.items():
        two = "httpx2" in name
        floor_name = "floor: httpx2 MockTransport" if two else "floor: httpx MockTransport"
        built_name = (
            "httpx2 MockTransport, Response built per request"
            if two
            else "MockTransport, Response built per request"
        )
        base, base_cpu = series[floor_name].per_request(), series[floor_name].cpu_per_request()
        per = s.per_request()
        if name.startswith("floor"):
            table.add(name, us(per), "1.00x", "", "", "1.00x", "")
            continue
        r = per / base
        if name == built_name:
            table.add(name, us(per), ratio(r), "", "info", "", "1.00x")
            continue
        figures[f"repeat {name}"] = r
        table.add(
            name,
            us(per),
            ratio(r),
            f"<= {GOAL_RATIO}x",
            verdict(r <= GOAL_RATIO),
            ratio(s.cpu_per_request() / base_cpu),
            ratio(per / series[built_name].per_request()),
        )
    table.note(
        "The floor hands httpx one response object, made and read before the run, again and "
        "again; the 'built per request' rows make a new one from the same headers and bytes "
        "each time, as any transport that answers a request must. 'vs built' is each replay "
        "against that (information)."
    )
    return table, figures


def _vcrpy_run(
    path: Path, pairs: list[Pair], positions: Sequence[int] | None
) -> tuple[list[float], float]:
    recorder = vcr.VCR(record_mode="none", match_on=("method", "uri", "body"))
    with recorder.use_cassette(str(path)), httpx.Client(transport=httpx.MockTransport(_never)) as c:
        return _drive(c, pairs, positions)


def run(work: Path, rounds: int, full_vcrpy: bool) -> tuple[list[Table], dict[str, float]]:
    pairs = chat_pairs(COUNT)
    tn_path = work / "replay-2000.msgpack"
    vcr_path = work / "replay-2000.yaml"
    write_toolnexus(tn_path, pairs)
    write_vcrpy(vcr_path, pairs)
    small = pairs[:VCRPY_SMALL]
    small_path = work / f"replay-{VCRPY_SMALL}.yaml"
    write_vcrpy(small_path, small)

    variants: dict[str, Callable[[int], tuple[list[float], float]]] = {
        "floor: httpx MockTransport": lambda n: _run_floor(httpx, pairs, False, n),
        "MockTransport, Response built per request": lambda n: _run_floor(httpx, pairs, True, n),
        "toolnexus, timing=instant": lambda n: _run_toolnexus(httpx, tn_path, pairs, "instant", n),
        "toolnexus, timing=virtual": lambda n: _run_toolnexus(httpx, tn_path, pairs, "virtual", n),
        "floor: httpx2 MockTransport": lambda n: _run_floor(httpx2, pairs, False, n),
        "toolnexus (httpx2), instant": lambda n: _run_toolnexus(
            httpx2, tn_path, pairs, "instant", n
        ),
    }
    series = {name: Series(name, []) for name in variants}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unused-interaction warning would mean a bad run
        for fn in variants.values():  # warm-up round on the first requests, untimed
            fn(WARMUP)
        for _ in range(rounds):
            for name, fn in variants.items():
                series[name].add(fn(COUNT))

    # vcrpy: the small cassette in full (it doubles as the warm-up), then the 2,000.
    small_series = Series(f"vcrpy, {VCRPY_SMALL} in full", [])
    small_series.add(_vcrpy_run(small_path, small, None))
    if full_vcrpy:
        positions = list(range(COUNT))
    else:
        positions = list(range(VCRPY_STRIDE // 2, COUNT, VCRPY_STRIDE))
    vcr_times, _ = _vcrpy_run(vcr_path, pairs, positions)
    tenth = COUNT // 10
    first = [t for p, t in zip(positions, vcr_times, strict=True) if p < tenth]
    last = [t for p, t in zip(positions, vcr_times, strict=True) if p >= COUNT - tenth]
    vcr_mean = mean(vcr_times)
    vcr_flat = mean(last) / mean(first)

    floor = series["floor: httpx MockTransport"].per_request()
    floor2 = series["floor: httpx2 MockTransport"].per_request()
    table = Table(
        f"1. Per-request replay cost: {COUNT:,} sequential requests, one {COUNT:,}-interaction "
        f"cassette (median of {rounds} interleaved rounds)",
        ["variant", "us/request", "vs floor", "goal", "", "last10/first10", "goal", ""],
    )
    figures: dict[str, float] = {"floor_us": floor * 1e6}
    cpu_floor = {
        "httpx": series["floor: httpx MockTransport"].cpu_per_request(),
        "httpx2": series["floor: httpx2 MockTransport"].cpu_per_request(),
    }
    short = {
        "toolnexus, timing=instant": ("instant", "httpx"),
        "toolnexus, timing=virtual": ("virtual", "httpx"),
        "toolnexus (httpx2), instant": ("httpx2 instant", "httpx2"),
    }
    cpu_ratios = [
        f"{label} {series[name].cpu_per_request() / cpu_floor[lib]:.2f}x"
        for name, (label, lib) in short.items()
    ]
    for name, s in series.items():
        per = s.per_request()
        base = floor2 if "httpx2" in name else floor
        flat = s.flatness()
        if name.startswith("floor"):
            table.add(name, us(per), "1.00x", "", "", f"{flat:.2f}", "", "")
            continue
        if name.startswith("MockTransport"):
            table.add(name, us(per), ratio(per / base), "", "info", f"{flat:.2f}", "", "info")
            continue
        r = per / base
        figures[name] = r
        table.add(
            name,
            us(per),
            ratio(r),
            f"<= {GOAL_RATIO}x",
            verdict(r <= GOAL_RATIO),
            f"{flat:.2f}",
            f"<= {GOAL_FLAT}",
            verdict(flat <= GOAL_FLAT),
        )
    label = "vcrpy, all 2,000" if full_vcrpy else f"vcrpy, every {VCRPY_STRIDE}th of 2,000 (*)"
    table.add(
        label,
        us(vcr_mean),
        ratio(vcr_mean / floor),
        "(86x elsewhere)",
        "",
        f"{vcr_flat:.2f}",
        "(11x elsewhere)",
        "",
    )
    small_per = small_series.per_request()
    table.add(
        f"vcrpy, {VCRPY_SMALL}-interaction cassette, all {VCRPY_SMALL}",
        us(small_per),
        ratio(small_per / floor),
        "",
        "info",
        f"{small_series.flatness():.2f}",
        "",
        "info",
    )
    figures["vcrpy"] = vcr_mean / floor
    figures["vcrpy_flat"] = vcr_flat
    table.note(
        f"Design bar (DESIGN.md section 8): replay within {DESIGN_RATIO}x of the floor. "
        "last10/first10 = mean cost of the last 10% of requests / the first 10%."
    )
    table.note(
        "toolnexus vs floor by process CPU time per request (less sensitive to other processes' "
        "load): " + ", ".join(cpu_ratios) + "."
    )
    table.note(
        "Each request is its interaction's first play, which decodes the recorded response "
        "from the file (loading leaves that to the first read: table 2d); the repeat shape, "
        "table 1b, plays one decoded response again and again. Table 1c splits the cost."
    )
    if not full_vcrpy:
        table.note(
            f"(*) vcrpy scans every earlier interaction for each request, running its body "
            f"matcher (JSON parse + difflib diff) on each, so request i costs ~2i matcher calls "
            f"and a full run takes ~{vcr_mean * COUNT / 60:.0f} min here. Only every "
            f"{VCRPY_STRIDE}th request is sent (positions {positions[0]}, {positions[1]}, ..., "
            f"{positions[-1]}); a request's cost depends on its position, not on which earlier "
            f"ones were sent, so the sample mean estimates the full run "
            f"({len(first)} samples per 10% window). `run.py --full-vcrpy` sends all {COUNT:,}."
        )
    repeat_table, repeat_figures = _repeat_shape(work, pairs, rounds)
    figures.update(repeat_figures)
    return [table, repeat_table, _split(tn_path, pairs, rounds, floor)], figures


class _TimedBridge(HTTPBridge):
    """The session's httpx bridge doing what ``HTTPBridge.handle_request`` does, step by step,
    with each step timed: the request read into the seam's form, the session's answer, and
    the httpx response made from it."""

    def __init__(self, bridge: HTTPBridge) -> None:
        super().__init__(bridge._transport)
        self.steps: list[tuple[float, float, float]] = []

    def handle_request(self, request: Any) -> Any:
        assert self._transport is not None
        start = now()
        seam_request = self._translation.seam_request(request, request.read())
        parsed = now()
        answer = call(self._transport, seam_request)
        answered = now()
        response = self._translation.library_response(httpx, request, answer)
        made = now()
        self.steps.append((parsed - start, answered - parsed, made - answered))
        return response


def _split(path: Path, pairs: list[Pair], rounds: int, floor: float) -> Table:
    """Where a replayed request's time goes (httpx, timing=instant), read as table 1 reads its
    figures: each request's median over the rounds, then the mean over the requests."""
    totals: list[list[float]] = []
    steps: list[list[tuple[float, float, float]]] = []
    for _ in range(rounds + 1):  # the first round warms up
        session = CassetteSession(path, record="none", timing="instant")
        timed = _TimedBridge(session.http_transport())
        times: list[float] = []
        with httpx.Client(transport=timed) as client:
            for pair in pairs:
                start = now()
                client.post(CHAT_URL, json=pair.request)
                times.append(now() - start)
        session.close()
        totals.append(times)
        steps.append(timed.steps)

    def per_request(rows: list[list[float]]) -> float:
        return mean([median(column) for column in zip(*rows[1:], strict=True)])

    total = per_request(totals)
    parts = [per_request([[step[i] for step in run] for run in steps]) for i in range(3)]
    table = Table(
        f"1c. Where a replayed request's time goes (httpx, timing=instant, {len(pairs):,} "
        f"distinct requests, median of {rounds} rounds; information)",
        ["step", "us/request", "of the floor"],
    )
    names = [
        "the request read into the seam's form (headers, JSON body parsed)",
        "the session: match, note what was sent, decode and plan the answer",
        "the httpx Response made from the answer (headers, body read)",
    ]
    for name, part in zip(names, parts, strict=True):
        table.add(name, us(part), f"{part / floor:.0%}")
    client = total - sum(parts)
    table.add("the client itself (build, send, cookies, read): the rest", us(client), "")
    table.add("all", us(total), f"{total / floor:.2f}x")
    table.note(
        f"The floor of table 1 spends {us(floor)} us per request, nearly all in the client. "
        "A goal of 1.3x leaves 30% of the floor for the three steps above together; reading "
        "the request into the seam's form (ADR 0019: headers and a parsed body) and making "
        "the httpx response cost about half of it before the session does anything. A "
        "response is decoded from the file when first played, so this table, like table 1, "
        "counts that decode; table 1b, a response played again and again, does not."
    )
    return table


def main(argv: list[str] | None = None) -> None:
    from _common import run_alone

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--full-vcrpy", action="store_true")
    args = parser.parse_args(argv)
    run_alone(lambda work: run(work, args.rounds, args.full_vcrpy))


if __name__ == "__main__":
    main()
