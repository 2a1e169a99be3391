"""``pytest-toolnexus show``: a cassette as text, its secrets masked, with a timeline of
each stream's arrivals."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, TextIO

from pytest_toolnexus._report.timeline import distinct_leaves, frame_name
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._seam.errors import CassetteError
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._store.cassette import (
    Body,
    BytesBody,
    ChunksBody,
    EmptyBody,
    EventStreamBody,
    JsonBody,
    NdjsonBody,
    SseBody,
    TextBody,
    WebSocketBody,
    load_cassette,
)
from pytest_toolnexus._store.place import link_message, link_out, project_root

__all__ = ["show"]

_BAR: Final = 40


def _short(value: Any, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: max(width - 3, 1)] + "..."


def _distinct(payloads: list[Any], width: int) -> list[str]:
    """One row of text per stream piece. JSON pieces show only the leaves that are not the
    same in every piece (an OpenAI chunk's ``id``, ``model`` and ``created`` repeat; its
    delta does not), so the rows tell the pieces apart."""
    rows = []
    for payload, leaves in zip(payloads, distinct_leaves(payloads), strict=True):
        if leaves is None:
            rows.append(_short(payload, width))
            continue
        shown = ", ".join(
            f"{path}={json.dumps(value, ensure_ascii=False)}" for path, value in leaves.items()
        )
        rows.append(_short(shown or "(the same as every other piece)", width))
    return rows


def _body_lines(body: Body, t_end: float, headers: Headers | None, width: int) -> Iterator[str]:
    if isinstance(body, EmptyBody):
        length = None if headers is None else headers.get("content-length")
        if length is None or length.strip() == "0":
            yield "  (no body)"
        else:
            yield f"  (none sent: a bodiless answer; content-length {length} is as recorded)"
    elif isinstance(body, JsonBody):
        text = json.dumps(body.value, indent=2, ensure_ascii=False)
        yield from ("  " + line for line in text.splitlines())
    elif isinstance(body, TextBody):
        yield from ("  " + line for line in body.text.splitlines())
    elif isinstance(body, BytesBody):
        yield f"  ({len(body.data)} bytes of binary)"
    elif isinstance(body, WebSocketBody):
        yield from _frame_lines(body, t_end, width)
    elif isinstance(body, SseBody | NdjsonBody | ChunksBody | EventStreamBody):
        rows: list[tuple[float, str]] = []
        if isinstance(body, SseBody):
            labels = [f"{e['event']}: " if e.get("event") else "" for e in body.events]
            texts = _distinct([e.get("data", e.get("text", "")) for e in body.events], width)
            for event, label, text in zip(body.events, labels, texts, strict=True):
                rows.append((float(event.get("t", 0.0)), label + text))
        elif isinstance(body, NdjsonBody):
            texts = _distinct([line.get("value", line.get("text")) for line in body.lines], width)
            for line, text in zip(body.lines, texts, strict=True):
                rows.append((float(line.get("t", 0.0)), text))
        elif isinstance(body, EventStreamBody):
            labels = [f"{frame_name(frame)}: " for frame in body.frames]
            payloads = [
                f.get("payload", f.get("text", f"{len(f.get('data', b''))} bytes"))
                for f in body.frames
            ]
            for frame, label, text in zip(
                body.frames, labels, _distinct(payloads, width), strict=True
            ):
                rows.append((float(frame.get("t", 0.0)), label + text))
        else:
            for chunk in body.chunks:
                rows.append((float(chunk.get("t", 0.0)), f"{len(chunk.get('data', b''))} bytes"))
        span = max(t_end, max((t for t, _ in rows), default=0.0), 1.0)
        yield f"  {len(rows)} {body.kind} piece(s) over {span:.1f} ms"
        for t, text in rows:
            at = int(t / span * _BAR)
            bar = "." * at + "|" + " " * (_BAR - at)
            yield f"  {t:9.1f} ms {bar} {text}"


_ARROWS: Final = {"client": "client >", "server": "< server"}


def _frame_lines(body: WebSocketBody, t_end: float, width: int) -> Iterator[str]:
    """A WebSocket session's frames, both directions on one timeline: the client's marked
    ``client >``, the server's ``< server``; a built client frame that is a pattern says
    ``matches``."""
    frames = [f for f in body.frames if hasattr(f, "get")]
    contents = [
        f"close {f.get('code', '')} {f.get('reason', '')}".rstrip()
        if f.get("kind") == "close"
        else f"{len(f['data'])} bytes"
        if isinstance(f.get("data"), bytes)
        else f.get("data", "")
        for f in frames
    ]
    times = [float(f.get("t", 0.0)) for f in frames]
    span = max(t_end, max(times, default=0.0), 1.0)
    yield f"  {len(frames)} websocket frame(s) over {span:.1f} ms"
    for frame, t, text in zip(frames, times, _distinct(contents, width), strict=True):
        at = int(t / span * _BAR)
        bar = "." * at + "|" + " " * (_BAR - at)
        arrow = _ARROWS.get(str(frame.get("from")), "?")
        if frame.get("pattern") is True:
            text = f"matches {text}"  # a built client frame: any frame holding this matches
        yield f"  {t:9.1f} ms {bar} {arrow} {text}"


class _Masked:
    """A text stream that masks every secret in what is written through it: ``show`` prints
    a cassette that may hold one (an old file, or one written before a hook redacted it)."""

    def __init__(self, out: TextIO, scanner: SecretScanner) -> None:
        self._out = out
        self._scanner = scanner

    def write(self, text: str) -> int:
        return self._out.write(self._scanner.mask(text))

    def flush(self) -> None:
        self._out.flush()


def show(
    path: Path,
    stream: TextIO,
    *,
    with_path: bool = True,
    width: int,
    err: TextIO | None = None,
) -> int:
    """Print the cassette at ``path`` as text on ``stream`` (a warning on ``err`` when it
    leads out of the project through a symlink); returns the exit code."""
    found = link_out(path, project_root())
    if found is not None:
        said = link_message(found, records=False, shown=str(path))
        print(f"warning: {said}", file=sys.stderr if err is None else err)
    out: Any = _Masked(stream, SecretScanner())
    try:
        return _render(path, out, with_path=with_path, width=width)
    except RecursionError:
        # A body the loader accepts may be nested up to msgpack's limit, deeper than printing
        # can go; replay refuses such a body too.
        print(
            f"\nerror: cassette {path} holds a value nested deeper than Python's recursion "
            "limit, which cannot be shown (or replayed); restore the file from version control "
            "or record it again",
            file=out,
        )
        return 1


def _render(path: Path, out: TextIO, *, with_path: bool, width: int) -> int:
    try:
        cassette = load_cassette(path)
        cassette.decode()
    except CassetteError as exc:
        print(f"error: {exc}", file=out)
        return 1
    print(
        f"cassette {path} (format version 1)" if with_path else "cassette (format version 1)",
        file=out,
    )
    for key, value in sorted(cassette.meta.items()):
        if key == "versions" and isinstance(value, dict):
            listed = ", ".join(f"{name} {version}" for name, version in sorted(value.items()))
            print(f"  recorded by: {listed or '(no client library recorded)'}", file=out)
            continue
        print(f"  {key}: {value}", file=out)
    for number, interaction in enumerate(cassette.interactions):
        request = interaction.request
        print(f"\n#{number} {request.method} {request.url}", file=out)
        for name, value in request.headers.multi_items():
            print(f"  {name}: {value}", file=out)
        for line in _body_lines(request.body, 0.0, None, width):
            print(line, file=out)
        if interaction.error is not None:
            error = interaction.error
            print(f"-> {error.kind} at {error.t:.1f} ms: {error.message}", file=out)
            continue
        response = interaction.response
        assert response is not None
        state = "" if response.complete else ", closed early by the client"
        print(
            f"-> {response.status} (headers at {response.t_headers:.1f} ms, "
            f"end at {response.t_end:.1f} ms{state})",
            file=out,
        )
        for name, value in response.headers.multi_items():
            print(f"  {name}: {value}", file=out)
        try:
            for line in _body_lines(response.body, response.t_end, response.headers, width):
                print(line, file=out)
        except (TypeError, ValueError, AttributeError) as exc:
            print(f"  (body cannot be shown: {exc})", file=out)
        if response.error is not None:
            error = response.error
            print(f"  !! {error.kind} at {error.t:.1f} ms: {error.message}", file=out)
    return 0
