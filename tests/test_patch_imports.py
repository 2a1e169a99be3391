"""Bridges install when their library is imported, never before, and come off with the test."""

import subprocess
import sys

import pytest

from pytest_toolnexus._patching.imports import when_imported

HTTP_LIBRARIES = ("aiohttp", "requests", "urllib3", "botocore", "boto3")


def test_importing_the_package_and_the_plugin_imports_no_other_http_library():
    code = (
        "import sys, pytest_toolnexus, pytest_toolnexus.plugin\n"
        f"print(sorted(m for m in {HTTP_LIBRARIES!r} if m in sys.modules))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()

    assert found == "[]"


@pytest.fixture
def library(tmp_path, monkeypatch):
    """A module nobody has imported yet, on the path."""
    (tmp_path / "late_library.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "late_library", raising=False)
    yield "late_library"
    sys.modules.pop("late_library", None)


def watches():
    return [f for f in sys.meta_path if type(f).__module__ == "pytest_toolnexus._patching.imports"]


def test_a_library_imported_later_is_patched_when_it_is_imported(library):
    events = []

    def install():
        events.append(("installed", sys.modules[library].VALUE))
        return lambda: events.append("undone")

    undo = when_imported(library, install)
    assert events == []  # nothing imported, nothing installed
    assert len(watches()) == 1

    __import__(library)
    assert events == [("installed", 1)]  # right after the module ran

    undo()
    assert events == [("installed", 1), "undone"]
    assert watches() == []
    undo()  # a second undo does nothing
    assert events == [("installed", 1), "undone"]


def test_a_library_already_imported_is_patched_at_once(library):
    __import__(library)
    events = []
    undo = when_imported(library, lambda: (events.append("installed"), lambda: None)[1])

    assert events == ["installed"]
    assert watches() == []
    undo()


def test_a_library_never_imported_leaves_nothing_behind(library):
    events = []
    undo = when_imported(library, lambda: (events.append("installed"), lambda: None)[1])
    undo()

    assert events == []
    assert watches() == []
    __import__(library)  # after the undo, importing installs nothing
    assert events == []


def test_a_probe_for_the_library_installs_nothing_and_keeps_the_watch(library):
    import importlib.util

    events = []
    undo = when_imported(library, lambda: (events.append("installed"), lambda: None)[1])

    assert importlib.util.find_spec(library) is not None  # a check, as SDKs make, not an import
    assert events == []
    __import__(library)
    assert events == ["installed"]
    undo()


def test_watches_share_one_finder_that_leaves_with_the_last(library, tmp_path):
    (tmp_path / "other_late_library.py").write_text("VALUE = 2\n")
    sys.modules.pop("other_late_library", None)
    events = []

    def noting(text):
        return lambda: (
            events.append(f"{text} installed"),
            lambda: events.append(f"{text} undone"),
        )[1]

    first = when_imported(library, noting("first"))
    second = when_imported("other_late_library", noting("second"))
    third = when_imported(library, noting("third"))
    assert len(watches()) == 1

    __import__(library)
    assert events == ["first installed", "third installed"]  # not the other library's

    first()
    third()
    assert events == ["first installed", "third installed", "first undone", "third undone"]
    assert len(watches()) == 1  # the second still waits
    try:
        __import__("other_late_library")
        assert events[-1] == "second installed"
    finally:
        second()
        sys.modules.pop("other_late_library", None)
    assert events[-1] == "second undone"
    assert watches() == []


def test_an_undo_never_waits_for_an_install_running_in_another_thread(library):
    """The clock's undo holds the clock's lock while it undoes its watches, and a watch's
    install takes that lock: an undo that waited for a running install would hang both."""
    import threading

    held = threading.Lock()  # stands for the clock's lock
    started = threading.Event()
    events = []

    def install():
        started.set()
        with held:  # waits for the undoing thread to let go
            events.append("installed")
        return lambda: events.append("undone")

    undo = when_imported(library, install)
    importer = threading.Thread(target=__import__, args=(library,), daemon=True)
    with held:
        importer.start()
        assert started.wait(10)
        finished = threading.Thread(target=undo, daemon=True)
        finished.start()
        finished.join(10)
        assert not finished.is_alive(), "the undo waited for the install"
    importer.join(10)
    assert not importer.is_alive()
    assert events == ["installed", "undone"]  # the install ended, then took itself off
    assert watches() == []


def test_an_install_may_undo_its_own_watch(library):
    events = []
    undo = []

    def install():
        undo[0]()
        events.append("installed")
        return lambda: events.append("undone")

    undo.append(when_imported(library, install))
    __import__(library)

    assert events == ["installed", "undone"]
    assert watches() == []
