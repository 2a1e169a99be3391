"""One test's timeline as inline SVG: a lane per request on one time axis, and a lane for the
sleeps the code made.

Each lane draws the request's recorded pieces (hollow marks above the line) against their
delivery to the client (filled marks below it), the time its headers came, its end and its
error. Every mark carries the class ``mark`` and one of ``rec``, ``del``, ``hdr``, ``end``,
``err``, ``sleep``, which docs/report.md names, so a reader (or a test) can count them.
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
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


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
    parts = []
    for step in range(5):
        at = span * step / 4
        anchor = "start" if step == 0 else "end" if step == 4 else "middle"
        parts.append(
            f'<line class="tick" x1="{_num(x(at))}" x2="{_num(x(at))}" y1="14" '
            f'y2="{_num(height)}"/><text x="{_num(x(at))}" y="10" '
            f'text-anchor="{anchor}">{_ms(at)}</text>'
        )
    return parts


def _lane(request: Mapping[str, Any], y: float, x: Any) -> list[str]:
    start = float(request.get("sent_at", 0.0))
    end = request.get("end_at")
    delivered = list(request.get("delivered", []))
    last = max([end or 0.0, *delivered, *(p["t"] for p in request["pieces"])])
    status = request.get("answered") or request.get("status") or "-"
    label = f"{request['method']} {request['url']} → {status}"
    parts = [
        f'<g class="lane" data-pieces="{len(request["pieces"])}" '
        f'data-delivered="{len(delivered)}"><title>{escape(label)}</title>',
        f'<line class="span" x1="{_num(x(start))}" x2="{_num(x(start + last))}" '
        f'y1="{_num(y)}" y2="{_num(y)}"/>',
        f'<circle class="sent" cx="{_num(x(start))}" cy="{_num(y)}" r="2.5"/>',
    ]
    if request.get("headers_at") is not None:
        hx = _num(x(start + request["headers_at"]))
        parts.append(
            f'<line class="mark hdr" x1="{hx}" x2="{hx}" y1="{_num(y - 9)}" y2="{_num(y + 9)}">'
            f"<title>headers {_ms(request['headers_at'])}</title></line>"
        )
    for piece in request["pieces"]:
        parts.append(
            f'<circle class="mark rec" cx="{_num(x(start + piece["t"]))}" cy="{_num(y - 5)}" '
            f'r="3"><title>{_ms(piece["t"])} {escape(piece["label"])}</title></circle>'
        )
    recorded = [p["t"] for p in request["pieces"]]
    for number, at in enumerate(delivered):
        was = f" (recorded {_ms(recorded[number])})" if number < len(recorded) else ""
        parts.append(
            f'<rect class="mark del" x="{_num(x(start + at) - 2.5)}" y="{_num(y + 2)}" '
            f'width="5" height="5"><title>delivered {_ms(at)}{was}</title></rect>'
        )
    if end is not None:
        ex = _num(x(start + end))
        parts.append(
            f'<line class="mark end" x1="{ex}" x2="{ex}" y1="{_num(y - 11)}" y2="{_num(y + 11)}">'
            f"<title>end {_ms(end)}</title></line>"
        )
    error = request.get("error")
    if error is not None:
        cx, cy = x(start + error["t"]), y
        parts.append(
            f'<path class="mark err" d="M{_num(cx - 5)} {_num(cy - 5)}l10 10m0 -10l-10 10">'
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
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{_num(_WIDTH)}" '
        f'height="{_num(height)}" viewBox="0 0 {_num(_WIDTH)} {_num(height)}" role="img">',
        *_axis(span, height, x),
    ]
    for number, request in enumerate(requests):
        parts.extend(_lane(request, _TOP + _LANE * number + _LANE / 2, x))
    if sleeps:
        y = _TOP + _LANE * len(requests) + _LANE / 2
        parts.append('<g class="lane sleeps"><title>sleeps</title>')
        for sleep in sleeps:
            left, right = x(sleep["at"]), x(sleep["at"] + sleep["duration"])
            parts.append(
                f'<rect class="mark sleep" x="{_num(left)}" y="{_num(y - 5)}" '
                f'width="{_num(max(right - left, 2.0))}" height="10"><title>'
                f"{escape(sleep['kind'])}({sleep['duration'] / 1000:g}) at {_ms(sleep['at'])}"
                "</title></rect>"
            )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)
