"""How ``serve`` finds the cassette a ``/c/<name>/...`` path names: the longest served name that
fits, kept right as cassettes are loaded while it runs."""

from __future__ import annotations

from pathlib import Path

from pytest_toolnexus import build
from pytest_toolnexus._serve.catalog import Catalog, ServeOptions


def _cassette(path: Path) -> Path:
    build.build_cassette(path, [build.openai_chat("Hi.", stream=False)])
    return path


def test_the_longest_name_wins_and_a_name_loaded_later_takes_its_paths(tmp_path: Path):
    catalog = Catalog(ServeOptions())
    catalog.load([_cassette(tmp_path / "one" / "a.msgpack")])

    before = catalog.route("/c/a/b/v1/chat/completions")
    again = catalog.route("/c/a/b/v1/chat/completions")
    catalog.load([_cassette(tmp_path / "two" / "a" / "b.msgpack").parent.parent])
    after = catalog.route("/c/a/b/v1/chat/completions")

    assert before is not None
    assert again is not None
    assert after is not None
    assert (before[0].name, before[1]) == ("a", "/b/v1/chat/completions")
    assert again == before
    assert (after[0].name, after[1]) == ("a/b", "/v1/chat/completions")
    assert catalog.route("/c/a%2Fb/v1/chat/completions") is not None  # an encoded slash
    assert catalog.route("/c/nothing/v1/chat/completions") is None


def test_a_reloaded_cassette_is_the_one_its_paths_reach(tmp_path: Path):
    path = _cassette(tmp_path / "chat.msgpack")
    catalog = Catalog(ServeOptions())
    catalog.load([path])
    first = catalog.route("/c/chat/v1/chat/completions")

    catalog.load([path])  # the same file again: served from the start, a new play state
    second = catalog.route("/c/chat/v1/chat/completions")

    assert first is not None
    assert second is not None
    assert second[0] is catalog.get("chat")
    assert second[0] is not first[0]
