"""A session and the cyclic garbage collector (``_session/collector.py``): the file is loaded
and indexed with the collector paused, what is tracked then is frozen (``gc.freeze``) when the
load made enough containers to be worth it, so that no collection traverses the cassette while
it is in use, and it is given back when the session closes. A session never unfreezes what it
did not freeze, leaves a disabled collector as it found it, and a small cassette's session
freezes nothing and asks the collector nothing.
"""

import gc

import httpx
import pytest

from pytest_toolnexus import (
    Cassette,
    CassetteSession,
    Headers,
    Interaction,
    RecordedRequest,
    RecordedResponse,
)
from pytest_toolnexus._session import collector
from pytest_toolnexus._store.cassette import JsonBody

URL = "https://api.example.com/v1/chat/completions"
LARGE = 2_000  # interactions: some 45,000 containers once loaded and indexed
SMALL = 50  # some 1,100
JSON = Headers([("content-type", "application/json")])


@pytest.fixture(autouse=True)
def collector_as_found():
    """Each test starts with the collector on and nothing frozen, and leaves it so."""
    was_enabled = gc.isenabled()
    gc.unfreeze()
    gc.enable()
    yield
    gc.unfreeze()
    if not was_enabled:
        gc.disable()


def write(path, count):
    interactions = [
        Interaction(
            RecordedRequest("POST", URL, JSON, JsonBody({"q": i, "words": ["a"] * 5})),
            RecordedResponse(200, JSON, JsonBody({"id": f"r{i}", "choices": [{"n": i}] * 3})),
        )
        for i in range(count)
    ]
    Cassette(path, interactions).save()
    return path


class Collections:
    """The collections the collector runs while it is installed."""

    def __init__(self):
        self.seen = []

    def __call__(self, phase, info):
        if phase == "stop":
            self.seen.append(info["generation"])

    def __enter__(self):
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc_info):
        gc.callbacks.remove(self)


def test_opening_a_large_cassette_runs_no_collection_and_freezes_it(tmp_path):
    path = write(tmp_path / "c.msgpack", LARGE)
    gc.collect()
    with Collections() as during_open:
        session = CassetteSession(path, record="none", timing="instant", on_unused="ignore")
    # The decode and the index made far more than a young collection's threshold of
    # containers, and no collection traversed them: they were made with the collector paused
    # and frozen before it came back on. (A young collection of what the opening made after
    # that may run, on 3.12 say; it sees none of the cassette.)
    assert 1 not in during_open.seen
    assert 2 not in during_open.seen
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    assert frozen > collector.WORTH_FREEZING
    with httpx.Client(transport=session.http_transport()) as client:
        answer = client.post(URL, json={"q": 7, "words": ["a"] * 5})
    assert answer.json()["id"] == "r7"
    session.close()
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()


def test_a_session_that_loads_nothing_freezes_nothing(tmp_path):
    with CassetteSession(tmp_path / "missing.msgpack", record="none"):
        assert gc.get_freeze_count() == 0
    with CassetteSession(tmp_path / "new.msgpack", record="all"):
        assert gc.get_freeze_count() == 0


def test_what_another_froze_stays_frozen(tmp_path):
    path = write(tmp_path / "c.msgpack", LARGE)
    gc.freeze()  # a program that froze its own start-up, or another session
    before = gc.get_freeze_count()
    session = CassetteSession(path, record="none", on_unused="ignore")
    # Not frozen with it: the cassette alone is more than WORTH_FREEZING containers. (The
    # count is of live objects: one frozen before may be freed meanwhile.)
    assert gc.get_freeze_count() <= before
    session.close()
    assert before - 1_000 < gc.get_freeze_count() <= before  # and the close left it frozen


def test_two_sessions_open_at_once_give_back_only_what_each_froze(tmp_path):
    first = CassetteSession(write(tmp_path / "a.msgpack", LARGE), record="none", on_unused="ignore")
    frozen = gc.get_freeze_count()
    second = CassetteSession(
        write(tmp_path / "b.msgpack", LARGE), record="none", on_unused="ignore"
    )
    # The second saw something frozen, and left it so: it neither froze its own cassette (more
    # than WORTH_FREEZING containers) nor gave back the first one's at its close. (The count
    # is of live objects: one frozen may be freed meanwhile.)
    assert frozen - 1_000 < gc.get_freeze_count() <= frozen
    second.close()
    assert frozen - 1_000 < gc.get_freeze_count() <= frozen
    first.close()
    assert gc.get_freeze_count() == 0
    first.close()  # closing twice gives back nothing twice
    assert gc.get_freeze_count() == 0


def test_a_disabled_collector_stays_disabled_and_nothing_is_frozen(tmp_path):
    path = write(tmp_path / "c.msgpack", LARGE)
    gc.disable()
    session = CassetteSession(path, record="none", on_unused="ignore")
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0
    session.close()
    assert not gc.isenabled()


def test_a_session_that_fails_to_open_after_loading_gives_back_what_it_froze(tmp_path):
    path = write(tmp_path / "c.msgpack", LARGE)
    with pytest.raises(ValueError, match="timing mode"):
        CassetteSession(path, record="none", timing="sometimes")  # type: ignore[arg-type]
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()


def test_a_damaged_cassette_refused_at_opening_leaves_the_collector_on(tmp_path):
    path = tmp_path / "c.msgpack"
    path.write_bytes(b"\x81\xa6format\xa3bad")
    with pytest.raises(Exception, match=str(path.name)):
        CassetteSession(path, record="none", on_unused="ignore")
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_small_cassettes_session_freezes_nothing(tmp_path):
    path = write(tmp_path / "c.msgpack", SMALL)
    with CassetteSession(path, record="none", on_unused="ignore") as session:
        assert gc.get_freeze_count() == 0
        with httpx.Client(transport=session.http_transport()) as client:
            assert client.post(URL, json={"q": 3, "words": ["a"] * 5}).json()["id"] == "r3"
    assert gc.get_freeze_count() == 0


def test_a_session_left_open_makes_no_later_opening_count_what_it_froze(tmp_path, monkeypatch):
    left_open = CassetteSession(
        write(tmp_path / "a.msgpack", LARGE), record="none", on_unused="ignore"
    )
    assert gc.get_freeze_count() > collector.WORTH_FREEZING

    def counted_one_by_one():
        raise AssertionError("gc.get_freeze_count() walks every frozen object")

    # Counting the frozen objects walks them all: a suite whose sessions are left open would
    # pay for its whole heap at every later opening, large cassettes and small ones alike.
    monkeypatch.setattr(gc, "get_freeze_count", counted_one_by_one)
    for name, size in (("b", SMALL), ("c", LARGE)):
        later = CassetteSession(
            write(tmp_path / f"{name}.msgpack", size), record="none", on_unused="ignore"
        )
        later.close()
    monkeypatch.undo()
    assert gc.get_freeze_count() > collector.WORTH_FREEZING  # still the first one's
    left_open.close()
    assert gc.get_freeze_count() == 0


def test_a_session_dropped_without_close_gives_the_freeze_back_when_freed(tmp_path):
    session = CassetteSession(
        write(tmp_path / "c.msgpack", LARGE), record="none", on_unused="ignore"
    )
    assert gc.get_freeze_count() > collector.WORTH_FREEZING
    del session  # a helper that forgot close(): the session is freed
    assert gc.get_freeze_count() == 0
    # and the next large cassette's session freezes again, and gives it back at its close
    with CassetteSession(write(tmp_path / "d.msgpack", LARGE), record="none", on_unused="ignore"):
        assert gc.get_freeze_count() > collector.WORTH_FREEZING
    assert gc.get_freeze_count() == 0
