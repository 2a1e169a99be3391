"""A built Gemini Live session (``BidiGenerateContent``, the field names of
ai.google.dev/api/live), as google-genai's ``client.aio.live.connect`` opens it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from pytest_toolnexus._providers import GEMINI_LIVE
from pytest_toolnexus._store.cassette import Interaction

from .build_base import DEFAULT_CADENCE, Cadence, split_text, usage_numbers
from .build_realtime import Frames, RealtimeTurn, pattern, spoken

__all__ = ["GEMINI_LIVE_URL", "gemini_live"]

GEMINI_LIVE_URL: Final = GEMINI_LIVE.url
"""The URL google-genai (3.x) opens for ``client.aio.live.connect`` on the Gemini API, its
doubled slash included."""
_AUDIO_MIME: Final = "audio/pcm;rate=24000"


def gemini_live(
    turns: Iterable[RealtimeTurn],
    *,
    model: str | None = None,
    usage: Mapping[str, int] | None = None,
    cadence: Cadence = DEFAULT_CADENCE,
    url: str = GEMINI_LIVE_URL,
) -> Interaction:
    """A Gemini Live session: the client's ``setup`` answered with ``setupComplete``, then
    each turn, asked for by default with a ``client_content`` (a ``tool_response`` after a
    turn of tool calls, as the SDK spells them), answered as ``serverContent.modelTurn.parts``
    (a text part per word, an ``inlineData`` audio part per chunk, ``outputTranscription``
    for the transcript) ending in ``generationComplete`` and ``turnComplete`` with
    ``usageMetadata``, or as one ``toolCall``. ``model`` pins the setup's model
    (``"gemini-live-2.5-flash"`` matches the SDK's ``models/...``); None lets any setup
    through."""
    frames = Frames(cadence)
    setup = {} if model is None else {"model": f"models/{model.removeprefix('models/')}"}
    frames.client({"setup": setup})
    frames.server({"setupComplete": {}})
    called = False
    for turn in turns:
        usual = ("tool_response",) if called else ("client_content",)
        for ask in usual if turn.asks is None else turn.asks:
            frames.client(pattern(ask, None))
        called = bool(turn.tool_calls)
        _answer(frames, turn, usage)
    return frames.session(url)


def _content(**fields: Any) -> dict[str, Any]:
    return {"serverContent": fields}


def _answer(frames: Frames, turn: RealtimeTurn, usage: Mapping[str, int] | None) -> None:
    """One model turn, its content on the cadence from the client's last frame."""
    deltas = split_text(turn.text)
    sound = spoken(turn)
    count = len(deltas) + len(sound) + (1 if turn.tool_calls else 0)
    times = frames.times(turn, count)
    for delta in deltas:
        said = {"role": "model", "parts": [{"text": delta}]}
        frames.server(_content(modelTurn=said), next(times))
    for kind, piece in sound:
        if kind == "audio":
            blob = {"inlineData": {"mimeType": _AUDIO_MIME, "data": piece}}
            frames.server(_content(modelTurn={"role": "model", "parts": [blob]}), next(times))
        else:
            frames.server(_content(outputTranscription={"text": piece}), next(times))
    if turn.tool_calls:
        calls = [
            {"id": call.call_id("call_", index), "name": call.name, "args": call.arguments_value}
            for index, call in enumerate(turn.tool_calls)
        ]
        frames.server({"toolCall": {"functionCalls": calls}}, next(times))
        return
    prompt, completion = usage_numbers(usage, max(count, 1))
    frames.server(_content(generationComplete=True))
    spent = {
        "promptTokenCount": prompt,
        "responseTokenCount": completion,
        "totalTokenCount": prompt + completion,
    }
    frames.server({**_content(turnComplete=True), "usageMetadata": spent})
