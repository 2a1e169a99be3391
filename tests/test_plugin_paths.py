"""How reports name a cassette (``shown``) and where the cassettes live (``base_dir``): both
are asked for every test, so ``shown`` takes the rootdir off by its text where it can, and must
give what ``Path.relative_to`` gives; ``base_dir`` is worked out once per run."""

import os
from pathlib import Path

import pytest

from pytest_toolnexus._plugin.shared import base_dir, shown


def by_relative_to(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


@pytest.mark.parametrize(
    "given",
    [
        "cassettes/test_x/test_one.msgpack",
        "cassettes/deep/er/test_two.msgpack",
        "a.msgpack",
        ".",  # the rootdir itself
        "../elsewhere/test_three.msgpack",  # beside the rootdir
        "../{root}2/test_four.msgpack",  # a sibling whose name starts like the rootdir's
    ],
)
def test_shown_is_what_relative_to_gives(pytester, given):
    config = pytester.parseconfig("-p", "no:randomly")
    root = config.rootpath
    path = Path(os.path.normpath(root / given.format(root=root.name)))

    assert shown(config, path) == by_relative_to(root, path)
    assert shown(config, path) == by_relative_to(root, path)  # and again, from the stash


def test_base_dir_follows_the_option_and_is_worked_out_once(pytester):
    pytester.makeini("[pytest]\ncassette_dir = recorded\n")
    config = pytester.parseconfig("-p", "no:randomly")

    first = base_dir(config)

    assert first == config.rootpath / "recorded"
    assert base_dir(config) is first
    other = pytester.parseconfig("-p", "no:randomly", f"--cassette-dir={pytester.path / 'x'}")
    assert base_dir(other) == pytester.path / "x"  # each run its own
