"""Benchmark 8: the secret scan of a long stream stays linear (issue 23, row 2).

The scan reads every string of every piece, and then each stream's pieces joined (the raw data,
and each string place of the payloads: where a streamed key spells itself). This times
``SecretScanner.scan`` over one OpenAI-style chat stream of 1,700 and of 17,000 content events,
and the per-piece part alone (the scan as it was before the joined reading), as ratios:

- linear: the time per event at 17,000 events over the time per event at 1,700 (goal: at most
  ``LINEAR_SLACK``);
- joined cost: the whole scan over the per-piece part alone, at 17,000 events (goal: at most
  ``JOINED_GOAL``).

Run alone: ``python benchmarks/bench_scan.py``.
"""

from __future__ import annotations

from pathlib import Path

from _common import Table, median, ms, now, ratio, verdict

from pytest_toolnexus import Headers, Interaction, RecordedRequest, RecordedResponse
from pytest_toolnexus._safety.leaves import leaves
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._store.cassette import JsonBody, SseBody

SIZES = (1_700, 17_000)
REPEATS = 7
LINEAR_SLACK = 1.5
JOINED_GOAL = 2.5
CHAT = "https://api.openai.com/v1/chat/completions"


def _stream(events: int) -> Interaction:
    words = [
        "The",
        "answer,",
        "as",
        "the",
        "model",
        "streamed",
        "it,",
        "one",
        "small",
        "piece",
        "after",
        "another.",
    ]
    stored = [
        {
            "t": float(i),
            "data": {
                "id": "chatcmpl-" + "Ab12Cd34" * 3,
                "object": "chat.completion.chunk",
                "model": "gpt-4o-mini",
                "choices": [{"index": 0, "delta": {"content": words[i % len(words)] + " "}}],
            },
        }
        for i in range(events)
    ]
    return Interaction(
        RecordedRequest("POST", CHAT, Headers(), JsonBody({"stream": True})),
        RecordedResponse(200, Headers([("content-type", "text/event-stream")]), SseBody(stored)),
    )


def _best(run: object, repeats: int = REPEATS) -> float:
    assert callable(run)
    times = []
    for _ in range(repeats):
        started = now()
        run()
        times.append(now() - started)
    return median(times)


def run(work: Path) -> tuple[list[Table], dict[str, float]]:
    del work
    scanner = SecretScanner(environ={})
    table = Table(
        "Secret scan of one chat stream (median of 7)",
        ("events", "whole scan ms", "per-piece part ms", "joined cost", "goal", "verdict"),
    )
    per_event: dict[int, float] = {}
    joined = 0.0
    for size in SIZES:
        interaction = _stream(size)

        def whole(interaction: Interaction = interaction) -> None:
            assert scanner.scan([interaction]) == []

        def per_piece(interaction: Interaction = interaction) -> None:
            for _, text, name in leaves(interaction):
                scanner.kind_of(text, name)

        whole_s, piece_s = _best(whole), _best(per_piece)
        per_event[size] = whole_s / size
        joined = whole_s / piece_s
        table.add(
            f"{size:,}",
            ms(whole_s),
            ms(piece_s),
            ratio(joined),
            f"<= {JOINED_GOAL}x",
            verdict(joined <= JOINED_GOAL),
        )
    linear = per_event[SIZES[-1]] / per_event[SIZES[0]]
    table.add(
        "per event, 17,000 / 1,700",
        "",
        "",
        ratio(linear),
        f"<= {LINEAR_SLACK}x",
        verdict(linear <= LINEAR_SLACK),
    )
    table.note(
        "whole scan = SecretScanner.scan (every string, then the pieces joined); per-piece "
        "part = kind_of over every string alone, the scan before issue 23's joined reading."
    )
    return [table], {"joined_cost": joined, "linear": linear}


if __name__ == "__main__":
    from _common import run_alone

    run_alone(run)
