"""docs/serve.md's client snippets, each run as written against ``pytest-toolnexus serve``
where its language is installed (skipped, saying which, where it is not)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_toolnexus import build
from tests.support.node_packages import npm_package
from tests.support.serve_cli import serving

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "serve.md").read_text()
TEXT = "one two three"


def _snippet(language: str) -> str:
    [found] = re.findall(rf"```{language}\n(.*?)```", DOC, flags=re.DOTALL)
    return found


def _needs(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not on PATH: the docs/serve.md snippet for it cannot run here")


def _run(command: list[str], cwd: Path, folder: Path) -> str:
    with serving([folder]) as served:
        env = {**os.environ, "TOOLNEXUS_BASE": f"{served.url}/c/chat"}
        done = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        report = subprocess.run(
            ["curl", "-s", f"{served.url}/_toolnexus/report?cassette=chat"],
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    if report.stdout:
        assert json.loads(report.stdout)["misses"] == []
    return done.stdout


def _texts(output: str) -> str:
    """The text deltas of chat chunks printed one JSON object a line."""
    chunks = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "cassettes"
    build.build_cassette(
        root / "chat.msgpack", [build.openai_chat(TEXT, cadence=build.Cadence(ttft=0.05, gap=0.02))]
    )
    return root


def test_the_curl_snippet(folder: Path, tmp_path: Path):
    _needs("curl")
    output = _run(["sh", "-c", _snippet("sh")], tmp_path, folder)

    assert (
        _texts("\n".join(line[6:] for line in output.splitlines() if line.startswith("data: {")))
        == TEXT
    )


def test_the_node_snippet(folder: Path, tmp_path: Path):
    installed = npm_package("openai", "7")
    (tmp_path / "node_modules").symlink_to(installed / "node_modules")
    (tmp_path / "chat.mjs").write_text(_snippet("js"))

    assert _run(["node", "chat.mjs"], tmp_path, folder) == TEXT


def test_the_java_snippet(folder: Path, tmp_path: Path):
    _needs("java")
    (tmp_path / "Chat.java").write_text(_snippet("java"))

    assert _texts(_run(["java", "Chat.java"], tmp_path, folder)) == TEXT


def test_the_go_snippet(folder: Path, tmp_path: Path):
    _needs("go")
    (tmp_path / "chat.go").write_text(_snippet("go"))

    assert _texts(_run(["go", "run", "chat.go"], tmp_path, folder)) == TEXT
