"""One test's timeline as inline SVG: a lane per request on one time axis, and a lane for the
sleeps the code made.

Each lane draws the request's recorded pieces (hollow marks above the line) against their
delivery to the client (filled marks below it), the time its headers came, its end and its
error. A report may hold a thousand tests, so a mark is one element with one coordinate: the
lane's ``transform`` places it vertically and the page's style gives its size (SVG 2 geometry
properties), and only a recorded piece carries a hover text (the request's list item under
the drawing gives its headers and end times). Every mark carries the class ``mark`` and one
of ``rec``, ``del``, ``hdr``, ``end``, ``err``, ``sleep``, which docs/report.md names, so a
reader (or a test) can count them. A WebSocket session draws both directions on its lane:
the server's frames as recorded pieces, the client's as ``rec out`` marks below the line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any, Final

__all__ = ["timeline_svg"]

_WIDTH: Final = 900.0
_LEFT: Final = 8.0
_RIGHT: Final = 8.0
_TOP: Final = 22.0
_LANE: Final = 30.0


def _num(value: float) -> str:
    """A coordinate to the pixel (a timeline is 900 px wide)."""
    return str(round(value))


def _ms(value: float) -> str:
    return f"{value:,.1f} ms"


def _span(requests: Sequence[Mapping[str, Any]], sleeps: Sequence[Mapping[str, Any]]) -> float:
    """The length of the axis: the end of the last thing drawn, at least 1 ms."""
    last = 1.0
    for request in requests:
        start = float(request.get("sent_at", 0.0))
        times = [p["t"] for p in request["pieces"]] + list(request.get("delivered", []))
        for key in ("headers_at", "end_at"):
            if request.get(key) is not None:
                times.append(request[key])
        if request.get("error") is not None:
            times.append(request["error"]["t"])
        last = max(last, start + max(times, default=0.0))
    for sleep in sleeps:
        last = max(last, float(sleep["at"]) + float(sleep["duration"]))
    return last


def _axis(span: float, height: float, x: Any) -> list[str]:
    at = [span * step / 2 for step in range(3)]
    lines = "".join(f"M{_num(x(t))} 14V{_num(height)}" for t in at)
    parts = [f'<path class="tick" d="{lines}"/>']
    for step, t in enumerate(at):
        anchor = ' text-anchor="end"' if step == 2 else ' text-anchor="middle"' if step else ""
        parts.append(f'<text x="{_num(x(t))}" y="10"{anchor}>{_ms(t)}</text>')
    return parts


def _piece_tip(piece: Mapping[str, Any], delivered: float | None) -> str:
    """A recorded piece's hover text: its time and label, and its delivery where that was
    not at the recorded time. An attribute the page's script shows, not a ``<title>``: a
    thousand tests' pieces as elements of their own would double what the browser parses."""
    late = (
        f" (delivered at {_ms(delivered)})"
        if delivered is not None and abs(delivered - piece["t"]) >= 0.05
        else ""
    )
    return escape(f"{_ms(piece['t'])}{late}: {piece['label']}")


def _lane(request: Mapping[str, Any], y: float, x: Any) -> list[str]:
    """One request's lane, drawn at height ``y``: marks take their vertical place and size
    from the page's style, so each is an element with one coordinate."""
    start = float(request.get("sent_at", 0.0))
    end = request.get("end_at")
    pieces = request["pieces"]
    delivered = list(request.get("delivered", []))
    last = max([end or 0.0, *delivered, *(p["t"] for p in pieces)])
    parts = [
        f'<g class="lane" transform="translate(0 {_num(y)})">',
        f'<path class="span" d="M{_num(x(start))} 0H{_num(x(start + last))}"/>',
        f'<circle class="sent" cx="{_num(x(start))}"/>',
    ]
    if request.get("headers_at") is not None:
        parts.append(f'<rect class="mark hdr" x="{_num(x(start + request["headers_at"]))}"/>')
    for number, piece in enumerate(pieces):
        at = delivered[number] if number < len(delivered) else None
        kind = "mark rec out" if piece.get("from") == "client" else "mark rec"
        parts.append(
            f'<circle class="{kind}" cx="{_num(x(start + piece["t"]))}" '
            f'data-tip="{_piece_tip(piece, at)}"/>'
        )
    parts.extend(f'<rect class="mark del" x="{_num(x(start + at))}"/>' for at in delivered)
    if end is not None:
        parts.append(f'<rect class="mark end" x="{_num(x(start + end))}"/>')
    error = request.get("error")
    if error is not None:
        cx = x(start + error["t"])
        parts.append(
            f'<path class="mark err" d="M{_num(cx - 5)} -5l10 10m0 -10l-10 10">'
            f"<title>{escape(error['kind'])} at {_ms(error['t'])}: "
            f"{escape(error['message'])}</title></path>"
        )
    parts.append("</g>")
    return parts


def timeline_svg(requests: Sequence[Mapping[str, Any]], sleeps: Sequence[Mapping[str, Any]]) -> str:
    """The SVG of one test's requests and sleeps (``test`` object fields of docs/report.md)."""
    span = _span(requests, sleeps)
    lanes = len(requests) + (1 if sleeps else 0)
    height = _TOP + _LANE * lanes

    def x(ms: float) -> float:
        return _LEFT + (_WIDTH - _LEFT - _RIGHT) * ms / span

    parts = [
        f'<svg class="timeline" viewBox="0 0 {_num(_WIDTH)} {_num(height)}">',
        *_axis(span, height, x),
    ]
    for number, request in enumerate(requests):
        parts.extend(_lane(request, _TOP + _LANE * number + _LANE / 2, x))
    if sleeps:
        y = _TOP + _LANE * len(requests) + _LANE / 2
        parts.append(f'<g class="lane sleeps" transform="translate(0 {_num(y)})">')
        for sleep in sleeps:
            left, right = x(sleep["at"]), x(sleep["at"] + sleep["duration"])
            parts.append(
                f'<rect class="mark sleep" x="{_num(left)}" y="-5" '
                f'width="{_num(max(right - left, 2.0))}" height="10"><title>'
                f"{escape(sleep['kind'])}({sleep['duration'] / 1000:g}) at {_ms(sleep['at'])}"
                "</title></rect>"
            )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)
