"""Benchmark 5: serving a long recorded stream (issue 16, item 4).

The 5 MB, ~17,000-event OpenAI stream of benchmark 2, read to its end through
``httpx.Client.stream`` and ``iter_bytes``, four ways in one run:

- the floor of DESIGN.md D2, the least any replay of a cassette that stores events parsed must
  do: the file read and decoded by ``msgpack.unpackb`` (collector paused, as ``load_cassette``
  does), then every event's data encoded back to JSON by CPython's C encoder (made once) and
  framed as the client pulls it, served by an httpx ``MockTransport``;
- toolnexus: a replay-only session (``timing="instant"``) opened on the cassette, the cassette
  load included, as a test pays it;
- vcrpy, which serves the joined body as one chunk;
- for information, the same events as a prebuilt list of byte chunks served by an httpx
  ``MockTransport``: serving with no storage at all.

The goal is at most 1 us per event over the floor (D2), and the first byte within 1 ms.
"""

from __future__ import annotations

import gc
import json
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgpack
from _common import Table, interleaved, ms, now, ratio, us, verdict
from _fixtures import (
    CHAT_URL,
    STREAM_REQUEST,
    big_stream,
    sse_response_headers,
    write_toolnexus_stream,
    write_vcrpy_stream,
)

from pytest_toolnexus import CassetteSession, load_cassette
from pytest_toolnexus._store.cassette import SseBody

GOAL_PER_EVENT = 1e-6  # DESIGN.md D2: about 1 us per event beyond the parsed-storage floor
GOAL_FIRST_BYTE = 1e-3
REPEATS = 5


def _read(client: httpx.Client, size: int) -> float:
    """Seconds to the first body byte of a streamed POST, read to its end."""
    start = now()
    first = 0.0
    got = 0
    with client.stream("POST", CHAT_URL, json=STREAM_REQUEST) as response:
        for chunk in response.iter_bytes():
            if not got:
                first = now() - start
            got += len(chunk)
    assert got == size, (got, size)
    return first


def run(work: Path) -> tuple[list[Table], dict[str, float]]:
    import vcr

    wire, times = big_stream()
    tn_path = work / "stream-serve.msgpack"
    vcr_path = work / "stream-serve.yaml"
    events = write_toolnexus_stream(tn_path, wire, times)
    write_vcrpy_stream(vcr_path, wire)
    response = load_cassette(tn_path).interactions[0].response
    assert response is not None
    stored = response.body
    assert isinstance(stored, SseBody)
    chunks = [piece for _, piece in stored.pieces()]  # the very pieces replay sends
    assert b"".join(chunks) == wire
    firsts: dict[str, list[float]] = {"floor": [], "toolnexus": [], "vcrpy": []}

    def floor() -> None:
        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, headers=sse_response_headers(), stream=_Chunks(chunks))

        with httpx.Client(transport=httpx.MockTransport(handler)) as client:
            firsts["floor"].append(_read(client, len(wire)))

    def toolnexus() -> None:
        session = CassetteSession(tn_path, record="none", timing="instant")
        with httpx.Client(transport=session.http_transport()) as client:
            firsts["toolnexus"].append(_read(client, len(wire)))
        session.close()

    encode = _c_encoder()

    def parsed_floor() -> None:
        enabled = gc.isenabled()
        gc.disable()
        try:
            doc = msgpack.unpackb(tn_path.read_bytes(), raw=False)
        finally:
            if enabled:
                gc.enable()
        stored_events = doc["interactions"][0]["response"]["body"]["events"]

        def pieces() -> Iterator[bytes]:
            for event in stored_events:
                if "data" in event:
                    yield b"data: " + "".join(encode(event["data"], 0)).encode() + b"\n\n"
                else:  # "[DONE]"
                    yield b"data: " + event["text"].encode() + b"\n\n"

        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, headers=sse_response_headers(), stream=_Pulled(pieces()))

        with httpx.Client(transport=httpx.MockTransport(handler)) as client:
            _read(client, len(wire))

    def vcrpy() -> None:
        recorder = vcr.VCR(record_mode="none", match_on=("method", "uri", "body"))
        with recorder.use_cassette(str(vcr_path)), httpx.Client() as client:
            firsts["vcrpy"].append(_read(client, len(wire)))

    (fl, _), (tn, tn_cpu), (vc, _), parsed = interleaved(
        [floor, toolnexus, vcrpy, parsed_floor], REPEATS
    )
    (pf, pf_cpu) = parsed
    per_event = (tn - pf) / events
    per_event_cpu = (tn_cpu - pf_cpu) / events
    first = statistics.median(firsts["toolnexus"][1:])
    table = Table(
        f"5. Serving a recorded {len(wire) / 1e6:.1f} MB stream of {events:,} events, "
        "opened and read to the end",
        ["what", "ms", "vs floor", "per event over floor", "goal", ""],
    )
    table.add(
        "floor: decode the file, encode each event as pulled, serve",
        ms(pf),
        "1.00x",
        "",
        "",
        "",
    )
    table.add(
        "toolnexus: open the cassette, replay",
        ms(tn),
        ratio(tn / pf),
        f"{us(per_event)} us (CPU {us(per_event_cpu)} us)",
        f"<= {us(GOAL_PER_EVENT)} us",
        verdict(per_event <= GOAL_PER_EVENT),
    )
    table.add(
        "  first byte",
        ms(first),
        "",
        "",
        f"<= {ms(GOAL_FIRST_BYTE)} ms",
        verdict(first <= GOAL_FIRST_BYTE),
    )
    table.add("vcrpy: one 5 MB chunk", ms(vc), ratio(vc / pf), "", "", "info")
    table.add(
        "prebuilt chunks via MockTransport (no decode, no encode)",
        ms(fl),
        ratio(fl / pf),
        "",
        "",
        "info",
    )
    table.note(
        f"toolnexus / vcrpy: {tn / vc:.2f}x. The floor is the parsed-storage floor of DESIGN.md "
        "D2, served: the least any replay of a cassette that keeps events parsed must do (read "
        "and decode the file, then encode each event's data to compact JSON with the C encoder "
        "and frame it as the client pulls it, through the same httpx client). toolnexus also "
        "matches the request, schedules each event on its clock and counts what was delivered. "
        f"The last row serves the {len(chunks):,} wire pieces prebuilt in a list: what serving "
        f"costs with no storage at all ({us((pf - fl) / events)} us per event less than the "
        "floor)."
    )
    return [table], {"stream_per_event_us": per_event * 1e6, "stream_first_byte_ms": first * 1e3}


def _c_encoder() -> Callable[[Any, int], list[str]]:
    """CPython's C JSON encoder, compact, UTF-8, no NaN: made once, as a fast replay would."""
    make = json.encoder.c_make_encoder  # type: ignore[attr-defined]
    assert make is not None, "this benchmark needs CPython's C JSON encoder"
    encoder: Callable[[Any, int], list[str]] = make(
        None, None, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    return encoder


class _Pulled(httpx.SyncByteStream):
    def __init__(self, pieces: Iterator[bytes]) -> None:
        self._pieces = pieces

    def __iter__(self) -> Iterator[bytes]:
        yield from self._pieces


class _Chunks(httpx.SyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks


if __name__ == "__main__":
    from _common import run_alone

    run_alone(run)
