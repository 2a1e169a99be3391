"""ADR 0019's three gates, served over loopback to a client in any language.

The gates every port of the library must pass: a socket-free tool-calling turn, streaming
proven incremental by timing, and a transport 429 retried as HTTP 429. Their cassettes are the
example suite's (``cassettes/examples/``); this script serves them with
``pytest-toolnexus serve`` and runs your client against them::

    python examples/serve_gates.py -- node gates.js     # your client, any language
    python examples/serve_gates.py --self-check         # the reference client (stdlib only)
    python examples/serve_gates.py --show               # the requests each gate expects

Your command gets the server in its environment: ``TOOLNEXUS_URL`` (the base) and, for each
gate, ``TOOLNEXUS_GATE_TOOLS``, ``TOOLNEXUS_GATE_STREAM`` and ``TOOLNEXUS_GATE_RETRY``: the
base URL to give the client (``.../c/<cassette>``; append ``/v1`` for an OpenAI or Anthropic
SDK). When it exits, the script reads the server's report: a gate passes when the command
exited 0, every recorded interaction of its cassette was played, and no request missed. The
exit status is 0 when all three pass, 1 otherwise. Requests match as in pytest, less the
fields one SDK's serialisation adds (:data:`SDK_FIELDS`). ``tests/support/clients/gates.mjs``
is a client of the three gates on Node, with the official ``openai`` package, as a port's CI
would write it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CASSETTES = ROOT / "cassettes" / "examples"
GATES = {
    "tools": "test_anthropic_tools/test_tool_call_round_trip",
    "stream": "test_openai_streaming/test_deltas_arrive_incrementally",
    "retry": "test_openai_retry/test_rate_limit_is_retried_after_the_advertised_wait",
}
# Fields the Python SDK that recorded the gates adds when it echoes the model's tool_use block
# back (``caller`` and ``toolset_name``, both null): a client in another language echoes the
# block as the API gave it, without them, and is not the worse for it.
SDK_FIELDS = ("messages.*.content.*.caller", "messages.*.content.*.toolset_name")


def _post(url: str, body: object) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def _recorded_bodies(gate: str) -> list[Any]:
    from pytest_toolnexus import load_cassette  # the gate's own requests are its spec

    cassette = load_cassette(CASSETTES / f"{GATES[gate]}.msgpack")
    return [interaction.request.body.value for interaction in cassette.interactions]


def _self_check(urls: dict[str, str]) -> int:
    """The reference client: urllib only, the requests each gate's cassette recorded."""
    failures = []
    first, second = _recorded_bodies("tools")
    status, _, body = _post(urls["tools"] + "/v1/messages", first)
    blocks = json.loads(body).get("content", []) if status == 200 else []
    if not any(block.get("type") == "tool_use" for block in blocks):
        failures.append(f"tools: the first answer asked for no tool ({status}: {body[:200]!r})")
    status, _, body = _post(urls["tools"] + "/v1/messages", second)
    if status != 200 or json.loads(body).get("stop_reason") != "end_turn":
        failures.append(f"tools: the turn with the tool's result did not end ({status})")

    [asked] = _recorded_bodies("stream")
    request = urllib.request.Request(
        urls["stream"] + "/v1/chat/completions",
        data=json.dumps(asked).encode(),
        headers={"content-type": "application/json"},
    )
    arrivals = []
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            for line in answer:
                if line.startswith(b"data: [DONE]"):
                    break  # the end, where SDKs stop reading
                if line.startswith(b"data: {") and b'"content":"' in line:
                    arrivals.append(time.monotonic())
    except urllib.error.HTTPError as error:
        failures.append(f"stream: answered {error.code}")
    spread = arrivals[-1] - arrivals[0] if arrivals else 0.0
    if len(arrivals) < 2 or spread < 0.5:
        failures.append(f"stream: {len(arrivals)} deltas over {spread:.3f} s, not incremental")

    asked = _recorded_bodies("retry")[0]
    status, headers, _ = _post(urls["retry"] + "/v1/chat/completions", asked)
    retry_after = {k.lower(): v for k, v in headers.items()}.get("retry-after")
    if status != 429 or retry_after is None:
        failures.append(f"retry: the first answer was {status}, not a 429 with Retry-After")
    else:
        time.sleep(float(retry_after))
        status, _, _ = _post(urls["retry"] + "/v1/chat/completions", asked)
        if status != 200:
            failures.append(f"retry: the retry was answered {status}, not 200")
    for failure in failures:
        print(f"self-check: {failure}", file=sys.stderr)
    return 1 if failures else 0


def _start_serve(extra: list[str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_toolnexus", "serve", str(CASSETTES), *extra],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise SystemExit("pytest-toolnexus serve did not start")
    return process, url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--self-check", action="store_true", help="run the reference client")
    parser.add_argument("--show", action="store_true", help="print the requests each gate expects")
    parser.add_argument("command", nargs="*", help="your client, after --")
    args = parser.parse_args(argv)
    if args.show:
        for gate, name in GATES.items():
            print(f"== gate {gate}: {name}", flush=True)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest_toolnexus",
                    "show",
                    str(CASSETTES / f"{name}.msgpack"),
                ],
                check=False,
            )
        return 0
    if not args.command and not args.self_check:
        parser.error("give your client's command after --, or --self-check")
    process, base = _start_serve([a for f in SDK_FIELDS for a in ("--ignore-body", f)])
    try:
        urls = {gate: f"{base}/c/{name}" for gate, name in GATES.items()}
        if args.self_check:
            code = _self_check(urls)
        else:
            env = {**os.environ, "TOOLNEXUS_URL": base}
            env.update({f"TOOLNEXUS_GATE_{gate.upper()}": url for gate, url in urls.items()})
            code = subprocess.run(args.command, env=env, check=False).returncode
        with urllib.request.urlopen(f"{base}/_toolnexus/report", timeout=30) as answer:
            report = json.load(answer)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
    served = {entry["name"]: entry for entry in report["cassettes"]}
    passed = 0
    for gate, name in GATES.items():
        entry = served[name]
        problems = [f"{len(entry['misses'])} miss(es)"] if entry["misses"] else []
        if entry["unused"]:
            problems.append(f"never played: {'; '.join(entry['unused'])}")
        if code != 0:
            problems.append(f"the client exited {code}")
        print(f"gate {gate:<6} {'PASS' if not problems else 'FAIL'}  {', '.join(problems)}")
        passed += not problems
        for miss in entry["misses"][:1]:
            print("  " + miss.replace("\n", "\n  "))
    return 0 if passed == len(GATES) else 1


if __name__ == "__main__":
    sys.exit(main())
