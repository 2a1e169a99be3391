"""The Node proofs of serve install their npm package where npm can, and are skipped, saying
why, where it cannot (no registry to reach): a machine without network is not a failure."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.support.node_packages import npm_package


def _tool(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def bin_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    _tool(folder, "node", "exit 0\n")
    monkeypatch.setenv("PATH", f"{folder}")
    monkeypatch.setenv("TOOLNEXUS_NODE_CACHE", str(tmp_path / "cache"))
    return folder


def test_an_npm_that_cannot_reach_its_registry_skips_with_npm_s_words(bin_folder: Path):
    _tool(bin_folder, "npm", "echo 'npm ERR! code ENOTFOUND registry.npmjs.org' >&2\nexit 1\n")

    with pytest.raises(pytest.skip.Exception) as skipped:
        npm_package("openai", "7")

    reason = str(skipped.value)
    assert "npm install openai@7 into " in reason
    assert "failed (exit 1; no network to npm's registry?)" in reason
    assert "npm ERR! code ENOTFOUND registry.npmjs.org" in reason


def test_an_npm_that_installs_gives_the_folder(bin_folder: Path, tmp_path: Path):
    _tool(
        bin_folder,
        "npm",
        'into="$3/node_modules/openai"\n/bin/mkdir -p "$into" && echo {} > "$into/package.json"\n',
    )

    folder = npm_package("openai", "7")

    assert folder == tmp_path / "cache" / "openai-7"
    assert (folder / "node_modules" / "openai" / "package.json").is_file()
