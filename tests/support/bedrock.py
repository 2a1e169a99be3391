"""Amazon Bedrock's Converse API for the loopback emulator (``POST /model/{modelId}/converse``
and ``/converse-stream``), enough for boto3's ``bedrock-runtime`` client, unmodified.

``converse`` answers one JSON body. ``converse-stream`` answers ``application/vnd.amazon.
eventstream`` frames, one HTTP chunk each: ``messageStart``, a ``contentBlockDelta`` per delta
(with the emulator's cadence between them), ``contentBlockStop``, ``messageStop`` and
``metadata``. Each payload carries a ``p`` padding field, as Bedrock's do. The frames are
encoded here, independently of the plugin's codec, so that a test reading them through the
plugin checks one against the other.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping
from typing import Any, Final

from tests.support.emulator import EmulatorConfig, EventKind, _Plan, _plan_turn

__all__ = ["EVENTSTREAM", "converse", "frame"]

EVENTSTREAM: Final = "application/vnd.amazon.eventstream"
_PADDING: Final = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def frame(event_type: str, payload: Mapping[str, Any]) -> bytes:
    """One event frame: three string headers and a compact JSON payload, CRCs included."""
    headers = b""
    for name, value in (
        (":event-type", event_type),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ):
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw
    body = json.dumps(payload, separators=(",", ":")).encode()
    prelude = struct.pack(">II", 16 + len(headers) + len(body), len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
    return message + struct.pack(">I", zlib.crc32(message))


def _padded(payload: dict[str, Any], seed: int) -> dict[str, Any]:
    return {**payload, "p": _PADDING[: 8 + seed % 24]}


def converse(body: Mapping[str, Any], config: EmulatorConfig, stream: bool) -> _Plan:
    """The Converse answer (one JSON body) or ConverseStream answer (event frames)."""
    turn = _plan_turn({"messages": body.get("messages")}, None, None, config.events)
    usage = {
        "inputTokens": turn.prompt_tokens,
        "outputTokens": turn.completion_tokens,
        "totalTokens": turn.prompt_tokens + turn.completion_tokens,
    }
    metrics = {"latencyMs": 100 + len(turn.deltas)}
    if not stream:
        reply = {
            "output": {"message": {"role": "assistant", "content": [{"text": turn.text}]}},
            "stopReason": "end_turn",
            "usage": usage,
            "metrics": metrics,
        }
        return _Plan(body=json.dumps(reply).encode(), deltas=len(turn.deltas))

    def event(
        name: str, kind: EventKind, payload: dict[str, Any], n: int
    ) -> tuple[str, EventKind, bytes]:
        return name, kind, frame(name, _padded(payload, n))

    events = [event("messageStart", "frame", {"role": "assistant"}, 0)]
    events += [
        event("contentBlockDelta", "delta", {"contentBlockIndex": 0, "delta": {"text": t}}, i)
        for i, t in enumerate(turn.deltas, 1)
    ]
    events += [
        event("contentBlockStop", "frame", {"contentBlockIndex": 0}, 1),
        event("messageStop", "frame", {"stopReason": "end_turn"}, 2),
        event("metadata", "frame", {"usage": usage, "metrics": metrics}, 3),
    ]
    return _Plan(content_type=EVENTSTREAM, events=events)
