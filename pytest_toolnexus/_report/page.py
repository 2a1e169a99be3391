"""The run report as one self-contained HTML file: the table of tests, each test's timelines
(:mod:`.svg`), its misses with the nearest recording's diff, filters and a search box.

Styles and the script are inline and nothing is loaded from the network, so the file opens
from a CI artifact as it is. The input is the run document of docs/report.md, already masked
(:func:`~pytest_toolnexus._report.timeline.dumps`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any, Final

from pytest_toolnexus._version import __version__

from .anchor import anchor_of
from .svg import timeline_svg

__all__ = ["FAILED_OUTCOMES", "cassette_page", "run_page"]

FAILED_OUTCOMES: Final = ("failed", "error")

_STYLE: Final = """
:root{--ok:#1a7f37;--bad:#cf222e;--dim:#6e7781;--rec:#0969da;--del:#8250df;--out:#bc4c00;
font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2328;background:#fff}
body{margin:1.5em auto;max-width:1200px;padding:0 1em}
h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.1em;margin:1.5em 0 .4em}
.sub{color:var(--dim)}
.bar{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #d0d7de;
display:flex;gap:1em;align-items:center;flex-wrap:wrap;z-index:1}
.bar input[type=search]{flex:1;min-width:14em;padding:.3em .5em}
table{border-collapse:collapse;width:100%;margin-top:.6em}
th,td{border-bottom:1px solid #d0d7de;padding:.25em .45em;text-align:left;vertical-align:top}
th{background:#f6f8fa;position:sticky;top:2.6em;font-weight:600}
tr.test td:nth-child(n+5){text-align:right}
td.p{word-break:break-all}
.o-passed,.o-xfailed{color:var(--ok)}.o-failed,.o-error,.o-xpassed{color:var(--bad);font-weight:600}
.o-skipped{color:var(--dim)}
section.test{border-top:1px solid #d0d7de;padding:.4em 0;content-visibility:auto;
contain-intrinsic-size:auto 220px}
section.test h3{font-size:1em;margin:.3em 0;word-break:break-all}
pre{background:#f6f8fa;padding:.6em;overflow:auto;max-height:24em;white-space:pre-wrap}
.miss{border-left:3px solid var(--bad);padding-left:.6em}
svg.timeline{display:block;width:900px;max-width:100%;height:auto;font:10px sans-serif}
svg .tick{stroke:#eaeef2}svg text{fill:var(--dim)}svg .span{stroke:#8c959f}
svg .sent{fill:#1f2328;r:2.5px}svg .rec{fill:#fff;stroke:var(--rec);stroke-width:1.5;r:3px;cy:-5px}
svg .del{fill:var(--del);y:2px;width:5px;height:5px;transform:translateX(-2.5px)}
svg .out{stroke:var(--out);cy:5px}
svg .hdr{fill:var(--ok);y:-9px;width:2px;height:18px;transform:translateX(-1px)}
svg .end{fill:#1f2328;y:-11px;width:2px;height:22px;transform:translateX(-1px)}
svg .err{stroke:var(--bad);stroke-width:2.5}
svg .sleep{fill:#fff8c5;stroke:#9a6700}
.legend span{margin-right:1em}.legend i{display:inline-block;width:.8em;height:.8em;
margin-right:.3em;vertical-align:middle}
ul.reqs{margin:.2em 0;padding-left:1.2em;word-break:break-all}
[hidden]{display:none!important}
#tip{position:fixed;pointer-events:none;background:#1f2328;color:#fff;padding:.2em .5em;
border-radius:4px;font-size:12px;max-width:40em;z-index:2}
"""

_SCRIPT: Final = """
(function () {
  "use strict";
  var search = document.getElementById("search");
  var boxes = ["failed", "missed", "recorded"].map(function (name) {
    return document.getElementById("only-" + name);
  });
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.test"));
  var shown = document.getElementById("shown");
  var texts = null;
  function searchable() {
    // What a search matches: the row (test id, cassette) and its requests, read once.
    texts = rows.map(function (row) {
      var section = document.getElementById(row.getAttribute("data-for"));
      var requests = section ? section.querySelector("ol.reqs") : null;
      var text = row.textContent + " " + (requests ? requests.textContent : "");
      return text.toLowerCase();
    });
  }
  function apply() {
    var words = search.value.toLowerCase().split(/\\s+/).filter(Boolean);
    if (words.length && texts === null) { searchable(); }
    var count = 0;
    rows.forEach(function (row, number) {
      var keep = boxes.every(function (box) {
        return !box.checked || row.getAttribute("data-" + box.id.slice(5)) === "1";
      }) && words.every(function (word) {
        return texts[number].indexOf(word) !== -1;
      });
      row.hidden = !keep;
      var section = document.getElementById(row.getAttribute("data-for"));
      if (section) { section.hidden = !keep; }
      if (keep) { count += 1; }
    });
    shown.textContent = String(count);
  }
  var tip = document.getElementById("tip");
  document.addEventListener("mouseover", function (event) {
    var text = event.target.getAttribute && event.target.getAttribute("data-tip");
    tip.hidden = !text;
    if (text) {
      tip.textContent = text;
      tip.style.left = event.clientX + 12 + "px";
      tip.style.top = event.clientY + 12 + "px";
    }
  });
  var pending = Array.prototype.slice.call(document.querySelectorAll("script.draw"));
  function draw(script) {
    if (script.parentNode) {
      script.insertAdjacentHTML("afterend", script.textContent);
      script.parentNode.removeChild(script);
    }
  }
  function drawAll() {
    pending.forEach(draw);
    pending = [];
    document.documentElement.setAttribute("data-drawn", "all");
  }
  if (pending.length && "IntersectionObserver" in window) {
    var near = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (entry.isIntersecting) {
          near.unobserve(entry.target);
          // Drawn already while the browser was idle: its script is gone.
          var script = entry.target.querySelector("script.draw");
          if (script) { draw(script); }
        }
      });
    }, { rootMargin: "1500px 0px" });
    pending.forEach(function (script) { near.observe(script.parentNode); });
    var idle = function () {
      // The rest, a few at a time, so the page answers while they are drawn.
      pending = pending.filter(function (script) { return script.parentNode; });
      pending.splice(0, 25).forEach(draw);
      if (pending.length) { setTimeout(idle, 0); } else { drawAll(); }
    };
    window.addEventListener("load", function () { setTimeout(idle, 50); });
    window.addEventListener("beforeprint", drawAll);
  } else {
    drawAll();
  }
  if (!search) { return; }
  search.addEventListener("input", apply);
  boxes.forEach(function (box) { box.addEventListener("change", apply); });
  if (boxes.some(function (box) { return box.checked; }) || search.value) { apply(); }
})();
"""

_LEGEND: Final = (
    '<p class="legend">'
    '<span><i style="border:1.5px solid var(--rec);border-radius:50%"></i>recorded arrival'
    '</span><span><i style="background:var(--del)"></i>delivered to the client</span>'
    '<span><i style="border:1.5px solid var(--out);border-radius:50%"></i>sent by the client '
    "(WebSocket)</span>"
    '<span><i style="background:var(--ok);width:.2em"></i>headers</span>'
    '<span><i style="background:#1f2328;width:.2em"></i>end</span>'
    '<span><i style="color:var(--bad)">✕</i>error</span>'
    '<span><i style="background:#fff8c5;border:1px solid #9a6700"></i>sleep</span></p>'
)


def _ms(value: float) -> str:
    return f"{value / 1000:.3f} s" if value >= 1000 else f"{value:.1f} ms"


def _flags(test: Mapping[str, Any]) -> dict[str, bool]:
    return {
        "failed": test.get("outcome") in FAILED_OUTCOMES,
        "missed": bool(test["misses"]),
        "recorded": test["recorded"] > 0 or test["written"],
    }


def _row(test: Mapping[str, Any]) -> str:
    anchor = anchor_of(test["nodeid"])
    flags = _flags(test)
    data = "".join(f' data-{name}="{int(value)}"' for name, value in flags.items())
    outcome = test.get("outcome", "?")
    saved = _ms(test["saved_ms"]) if test["clock"] == "virtual" else f"({test['clock']} clock)"
    cells = [
        f'<td class="o-{escape(outcome)}">{escape(outcome)}</td>',
        f'<td class="p"><a href="#{anchor}">{escape(test["nodeid"])}</a></td>',
        f'<td class="p">{escape(test["cassette"])}</td>',
        f"<td>{escape(test['record_mode'])}</td>",
        f"<td>{test['replayed']}</td>",
        f"<td>{test['recorded']}</td>",
        f"<td>{'yes' if test['written'] else ''}</td>",
        f"<td>{len(test['misses'])}</td>",
        f"<td>{len(test['unused'])}</td>",
        f"<td>{test['faults']}</td>",
        f"<td>{len(test['sleeps'])}</td>",
        f"<td>{saved}</td>",
    ]
    return f'<tr class="test" data-for="{anchor}"{data}>{"".join(cells)}</tr>'


def _headers(request: Mapping[str, Any]) -> str:
    if not request.get("headers"):
        return ""
    lines = "\n".join(f"{name}: {value}" for name, value in request["headers"])
    return f"<details><summary>headers</summary><pre>{escape(lines)}</pre></details>"


def _request_item(request: Mapping[str, Any]) -> str:
    """One request under its timeline: method, URL, the status the client got, the faults
    applied, and the response headers (folded)."""
    status = request.get("answered") or request.get("status") or "-"
    faults = " · " + "; ".join(request["faults"]) if request.get("faults") else ""
    pieces = f" · {len(request['pieces'])} piece(s)"
    for key, name in (("headers_at", "headers"), ("end_at", "end")):
        if request.get(key) is not None:
            pieces += f" · {name} {_ms(request[key])}"
    return (
        f"<li>{escape(request['method'])} {escape(request['url'])} → {escape(str(status))}"
        f"{pieces}{escape(faults)}{_headers(request)}</li>"
    )


def _section(test: Mapping[str, Any]) -> str:
    anchor = anchor_of(test["nodeid"])
    outcome = test.get("outcome", "?")
    parts = [
        f'<section class="test" id="{anchor}">',
        f'<h3><span class="o-{escape(outcome)}">{escape(outcome)}</span> '
        f"{escape(test['nodeid'])}</h3>",
        f'<p class="sub">{escape(test["cassette"])} · record mode {escape(test["record_mode"])}'
        f" · timing {escape(test['timing'])} · {escape(test['clock'])} clock read "
        f"{_ms(test['clock_ms'])} in "
        f"{_ms(test['wall_ms'])} of wall time</p>",
    ]
    for miss in test["misses"]:
        parts.append(f'<div class="miss"><b>miss</b><pre>{escape(miss)}</pre></div>')
    for damage in test.get("damaged", []):
        parts.append(f'<div class="miss"><b>damaged</b><pre>{escape(damage)}</pre></div>')
    left = [*test["unused"], *test.get("unread", [])]
    if left:
        listed = "".join(f"<li>{escape(entry)}</li>" for entry in left)
        parts.append(f'<p>left over:</p><ul class="reqs">{listed}</ul>')
    if test["requests"] or test["sleeps"]:
        # The drawing is kept as text until its section comes near the screen (the script
        # draws it then, and every other one while the browser is idle): a thousand tests'
        # marks parsed as elements up front would keep the page from opening for seconds.
        drawing = timeline_svg(test["requests"], test["sleeps"])
        parts.append(f'<script type="text/x-svg" class="draw">{drawing}</script>')
        listed = "".join(_request_item(r) for r in test["requests"])
        parts.append(f'<ol class="reqs">{listed}</ol>')
    else:
        parts.append('<p class="sub">no request was sent</p>')
    parts.append("</section>")
    return "".join(parts)


def _document(title: str, body: Sequence[str]) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
        + "".join(body)
        + f'<div id="tip" hidden></div><script>{_SCRIPT}</script></body></html>\n'
    )


def run_page(run: Mapping[str, Any]) -> str:
    """The HTML report of a run document (``schema: pytest-toolnexus/run``)."""
    tests = list(run["tests"])
    failed = sum(1 for t in tests if t.get("outcome") in FAILED_OUTCOMES)
    missed = sum(1 for t in tests if t["misses"])
    head = (
        "<tr><th>outcome</th><th>test</th><th>cassette</th><th>mode</th>"
        '<th title="responses replayed">replayed</th><th title="interactions recorded">'
        'recorded</th><th title="the cassette was written">written</th><th>misses</th>'
        '<th title="interactions no request played">unused</th><th title="faults applied">'
        'faults</th><th>sleeps</th><th title="clock time less wall time">saved</th></tr>'
    )
    body = [
        "<h1>pytest-toolnexus run report</h1>",
        f'<p class="sub">{len(tests)} test(s) with a cassette, {failed} failed, {missed} with '
        f"a miss · {escape(str(run.get('created', '')))} · pytest-toolnexus "
        f"{escape(__version__)}</p>",
        '<div class="bar"><input type="search" id="search" placeholder="search tests, '
        'cassettes, URLs" aria-label="search">'
        '<label><input type="checkbox" id="only-failed"> failed</label>'
        '<label><input type="checkbox" id="only-missed"> missed</label>'
        '<label><input type="checkbox" id="only-recorded"> recorded</label>'
        f'<span class="sub"><span id="shown">{len(tests)}</span> shown</span></div>',
        f"<table><thead>{head}</thead><tbody>",
        *(_row(test) for test in tests),
        "</tbody></table>",
        "<h2>Timelines</h2>",
        _LEGEND,
        "<noscript><p>The timelines are drawn by the page's script: allow it to see them (the "
        "data is in --cassette-report=run.json too).</p></noscript>",
        *(_section(test) for test in tests),
    ]
    return _document("pytest-toolnexus run report", body)


def cassette_page(timeline: Mapping[str, Any]) -> str:
    """The HTML page of one cassette's timeline (``schema: pytest-toolnexus/cassette-timeline``):
    its recorded interactions, each on its own lane from the moment it was sent."""
    interactions = list(timeline["interactions"])
    requests = [{**i, "sent_at": 0.0} for i in interactions]
    body = [
        f"<h1>cassette {escape(timeline['cassette'])}</h1>",
        "".join(
            f'<p class="sub">{escape(str(key))}: {escape(str(value))}</p>'
            for key, value in timeline["meta"].items()
        ),
        _LEGEND,
        '<section class="test" id="t0">',
        f"<h3>{len(interactions)} interaction(s), each from when its request was sent</h3>",
        timeline_svg(requests, []) if requests else '<p class="sub">no interaction</p>',
        '<ol class="reqs" start="0">',
        *(_request_item(i) for i in interactions),
        "</ol></section>",
    ]
    return _document(f"cassette {timeline['cassette']}", body)
