"""examples/serve_gates.py: ADR 0019's three gates served to another language's client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.node_packages import npm_package

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "serve_gates.py"
CLIENTS = Path(__file__).parent / "support" / "clients"

# A client of one gate only: the retry gate's 429, its wait, then its 200, with urllib.
RETRY_ONLY = """
import json, os, time, urllib.error, urllib.request

url = os.environ["TOOLNEXUS_GATE_RETRY"] + "/v1/chat/completions"
body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hello."}]})
def post():
    headers = {"content-type": "application/json"}
    request = urllib.request.Request(url, data=body.encode(), headers=headers)
    try:
        return urllib.request.urlopen(request).status, None
    except urllib.error.HTTPError as error:
        return error.code, error.headers["retry-after"]
status, wait = post()
assert status == 429, status
time.sleep(float(wait))
assert post()[0] == 200
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_reference_client_passes_the_three_gates():
    done = _run("--self-check")

    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[:3] for line in done.stdout.splitlines()] == [
        ["gate", "tools", "PASS"],
        ["gate", "stream", "PASS"],
        ["gate", "retry", "PASS"],
    ]


def test_a_client_is_given_the_gate_urls_and_judged_by_what_it_played(tmp_path: Path):
    client = tmp_path / "retry_only.py"
    client.write_text(RETRY_ONLY)

    done = _run("--", sys.executable, str(client))

    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        "gate tools  FAIL  never played: #0 POST http://127.0.0.1:18089/v1/messages"
    )
    assert lines[1].startswith("gate stream FAIL  never played: #0 POST")
    assert lines[2] == "gate retry  PASS  "


def test_a_client_that_fails_fails_every_gate():
    done = _run("--", sys.executable, "-c", "raise SystemExit(3)")

    assert done.returncode == 1
    assert all(
        "the client exited 3" in line
        for line in done.stdout.splitlines()
        if line.startswith("gate")
    )


def test_a_node_client_with_the_openai_package_passes_the_three_gates():
    folder = npm_package("openai", "7")

    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--", "node", str(CLIENTS / "gates.mjs")],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "NODE_OPENAI": str(folder)},
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[:3] for line in done.stdout.splitlines()] == [
        ["gate", "tools", "PASS"],
        ["gate", "stream", "PASS"],
        ["gate", "retry", "PASS"],
    ]
