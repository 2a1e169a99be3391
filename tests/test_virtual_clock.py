"""The virtual clock (docs/timing.md, DESIGN §4): what ``install`` patches and restores, how
sleeps move time without taking any, how async sleepers wake in deadline order, what is left
on real time, and the sleep watch used by the real and instant modes.
"""

import asyncio
import datetime
import sys
import time
import types

import anyio
import pytest
import trio

from pytest_toolnexus import Cassette, Sleep, VirtualClock, use_cassette
from pytest_toolnexus._virtual import install, observe_sleeps

# The real functions, captured before any clock is installed. Kept in a dict (not as module
# globals) so that no module scan can ever swap them for virtual ones.
REAL = {
    "perf_counter": time.perf_counter,
    "monotonic": time.monotonic,
    "time": time.time,
    "sleep": time.sleep,
    "datetime": datetime.datetime,
    "date": datetime.date,
}
EPOCH = 1_700_000_000.0  # 2023-11-14T22:13:20Z
UTC = datetime.UTC
ORIGINAL_ANYIO_SLEEP = anyio.sleep


def wall():
    """Real seconds, whatever clock is installed."""
    return REAL["perf_counter"]()


def patch_points():
    """Every (owner, attribute) pair a virtual clock replaces, with its current value."""
    owners = [
        (time, "time"),
        (time, "time_ns"),
        (time, "monotonic"),
        (time, "monotonic_ns"),
        (time, "perf_counter"),
        (time, "perf_counter_ns"),
        (time, "sleep"),
        (datetime, "datetime"),
        (datetime, "date"),
        (asyncio, "sleep"),
        (sys.modules["asyncio.tasks"], "sleep"),
        (anyio, "sleep"),
        (trio, "sleep"),
    ]
    return {(owner.__name__, name): getattr(owner, name) for owner, name in owners}


def loop_time_module():
    return vars(sys.modules["asyncio.base_events"])["time"]


@pytest.fixture
def clock():
    """A virtual clock installed for the test, always removed afterwards."""
    virtual = VirtualClock(epoch=EPOCH)
    uninstall = install(virtual)
    try:
        yield virtual
    finally:
        uninstall()


@pytest.fixture
def empty_cassette(tmp_path):
    path = tmp_path / "empty.msgpack"
    Cassette(path, []).save()
    return path


# -- install and uninstall ----------------------------------------------------------------------


def test_install_patches_every_entry_point_and_uninstall_restores_each_exactly():
    before = patch_points()
    loop_time = loop_time_module()
    assert before[("time", "sleep")] is REAL["sleep"]

    uninstall = install(VirtualClock())
    try:
        during = patch_points()
        unchanged = [key for key in before if during[key] is before[key]]
        assert unchanged == []
        assert loop_time_module() is not loop_time
    finally:
        uninstall()

    after = patch_points()
    assert all(after[key] is before[key] for key in before), {
        key for key in before if after[key] is not before[key]
    }
    assert loop_time_module() is loop_time
    uninstall()  # a second call is harmless
    assert patch_points() == before


def test_use_cassette_restores_everything_when_the_block_raises(empty_cassette):
    before = patch_points()
    loop_time = loop_time_module()

    seen = {}

    def block():
        with use_cassette(empty_cassette) as cassette:
            seen["clock"] = cassette.clock
            seen["patched"] = time.sleep is not REAL["sleep"]
            time.sleep(3)
            raise ZeroDivisionError("the block failed")

    with pytest.raises(ZeroDivisionError, match="the block failed"):
        block()
    assert isinstance(seen["clock"], VirtualClock)
    assert seen["patched"]
    assert seen["clock"].elapsed == 3.0

    after = patch_points()
    assert all(after[key] is before[key] for key in before)
    assert loop_time_module() is loop_time
    # The clock is gone, and a new one can be installed.
    start = wall()
    time.sleep(0.01)
    assert wall() - start >= 0.009
    install(VirtualClock())()


def test_nested_install_raises_and_leaves_the_first_clock_in_place(clock):
    with pytest.raises(RuntimeError, match=r"already installed.*do not nest"):
        install(VirtualClock())
    with pytest.raises(RuntimeError, match="already installed"):
        observe_sleeps([], 0.0)
    time.sleep(2)
    assert clock.elapsed == 2.0


def test_nested_use_cassette_raises(empty_cassette):
    with use_cassette(empty_cassette) as outer:
        with pytest.raises(RuntimeError, match="do not nest"):
            use_cassette(empty_cassette).__enter__()
        time.sleep(1)  # the outer clock is still the one installed
        assert outer.clock.elapsed == 1.0


# -- time --------------------------------------------------------------------------------------


def test_time_sleep_returns_at_once_and_moves_every_clock_by_exactly_that(clock):
    mono, perf, unix = time.monotonic(), time.perf_counter(), time.time()
    started = wall()
    time.sleep(5)
    took = wall() - started

    assert took < 0.05
    assert time.monotonic() - mono == pytest.approx(5.0, abs=1e-9)
    assert time.perf_counter() - perf == pytest.approx(5.0, abs=1e-9)
    assert time.time() - unix == pytest.approx(5.0, abs=1e-9)
    assert clock.elapsed == 5.0
    assert clock.sleeps == [Sleep("time.sleep", 0.0, 5.0)]


def test_time_does_not_move_without_a_wait(clock):
    first = time.monotonic()
    sum(range(200_000))  # real work, real time passes
    assert time.monotonic() == first
    assert time.time() == EPOCH


def test_negative_sleep_is_refused_like_the_real_one(clock):
    with pytest.raises(ValueError, match="non-negative"):
        time.sleep(-1)
    assert clock.sleeps == []


def test_ns_forms_agree_with_the_float_forms(clock):
    time.sleep(1.5)
    assert time.time_ns() == pytest.approx(time.time() * 1e9, abs=1_000)
    assert time.monotonic_ns() == pytest.approx(time.monotonic() * 1e9, abs=1_000)
    assert time.perf_counter_ns() == pytest.approx(time.perf_counter() * 1e9, abs=1_000)
    before = time.monotonic_ns(), time.perf_counter_ns(), time.time_ns()
    time.sleep(0.25)
    after = time.monotonic_ns(), time.perf_counter_ns(), time.time_ns()
    for earlier, later in zip(before, after, strict=True):
        assert later - earlier == pytest.approx(250_000_000, abs=1_000)
    assert all(isinstance(value, int) for value in after)


def test_wall_time_starts_at_the_epoch(clock):
    assert time.time() == EPOCH
    assert time.time_ns() == pytest.approx(EPOCH * 1e9, abs=1_000)


# -- datetime ----------------------------------------------------------------------------------


def test_datetime_follows_the_virtual_wall_clock(clock):
    real_datetime = REAL["datetime"]
    assert datetime.datetime.now() == real_datetime.fromtimestamp(EPOCH)
    assert datetime.datetime.now(UTC) == real_datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert datetime.datetime.utcnow() == real_datetime(2023, 11, 14, 22, 13, 20)
    assert datetime.datetime.today() == real_datetime.fromtimestamp(EPOCH)
    assert datetime.date.today() == REAL["date"].fromtimestamp(EPOCH)

    time.sleep(86_400 + 90)
    assert datetime.datetime.now(UTC) == real_datetime(2023, 11, 15, 22, 14, 50, tzinfo=UTC)
    assert datetime.date.today() == REAL["date"].fromtimestamp(EPOCH + 86_490)
    assert datetime.date.today() - REAL["date"].fromtimestamp(EPOCH) == datetime.timedelta(1)


def test_isinstance_checks_hold_both_ways_while_installed(clock):
    real_datetime, real_date = REAL["datetime"], REAL["date"]
    made_before = real_datetime(2020, 1, 2, 3, 4, 5)
    assert isinstance(made_before, datetime.datetime)
    assert isinstance(made_before, datetime.date)
    assert isinstance(real_date(2020, 1, 2), datetime.date)
    assert not isinstance(real_date(2020, 1, 2), datetime.datetime)
    assert issubclass(real_datetime, datetime.datetime)

    now = datetime.datetime.now()
    assert isinstance(now, real_datetime)
    assert now - made_before > datetime.timedelta(days=1000)
    assert datetime.datetime(2024, 5, 6) == real_datetime(2024, 5, 6)
    assert datetime.datetime.__name__ == "datetime"


# -- module scans: the documented limit ---------------------------------------------------------


def make_module(name, source):
    module = types.ModuleType(name)
    exec(source, module.__dict__)
    return module


FROM_IMPORTS = (
    "import time\n"
    "from time import monotonic, perf_counter, sleep\n"
    "from datetime import datetime\n"
    "def via_module():\n"
    "    return time.monotonic()\n"
)


def test_from_imports_are_patched_only_in_the_modules_passed():
    scanned = make_module("scanned_lib", FROM_IMPORTS)
    other = make_module("other_lib", FROM_IMPORTS)
    clock = VirtualClock(epoch=EPOCH)
    uninstall = install(clock, [scanned])
    try:
        scanned.sleep(10)
        assert clock.elapsed == 10.0
        assert scanned.monotonic() == clock.now()
        assert scanned.perf_counter() == clock.now()
        assert scanned.datetime.now(UTC).timestamp() == EPOCH + 10

        # The limit: a module not passed keeps the functions it captured at import ...
        assert other.monotonic is REAL["monotonic"]
        assert other.sleep is REAL["sleep"]
        assert other.datetime is REAL["datetime"]
        assert abs(other.perf_counter() - wall()) < 1.0
        assert other.datetime.now(UTC).timestamp() > EPOCH + 1e7
        # ... but a call through the module attribute (``time.monotonic()``) is virtual.
        assert other.via_module() == clock.now()
    finally:
        uninstall()

    assert scanned.monotonic is REAL["monotonic"]
    assert scanned.sleep is REAL["sleep"]
    assert scanned.datetime is REAL["datetime"]
    assert scanned.perf_counter is REAL["perf_counter"]


# -- async sleeps -------------------------------------------------------------------------------


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_asyncio_gather_overlaps_sleeps_and_wakes_in_deadline_order(clock):
    woke = []

    async def sleeper(name, seconds):
        await asyncio.sleep(seconds)
        woke.append((name, clock.elapsed))
        return name

    started = wall()
    # The longer sleep is started first: the order of waking follows the deadlines.
    results = await asyncio.gather(sleeper("two", 2), sleeper("one", 1))
    assert wall() - started < 0.05

    assert results == ["two", "one"]
    assert woke == [("one", 1.0), ("two", 2.0)]
    assert clock.elapsed == 2.0
    assert sorted((s.kind, s.at, s.duration) for s in clock.sleeps) == [
        ("asyncio.sleep", 0.0, 1.0),
        ("asyncio.sleep", 0.0, 2.0),
    ]


@pytest.mark.anyio
async def test_asyncio_sleep_returns_its_result(clock):
    assert await asyncio.sleep(3, result="done") == "done"
    assert clock.elapsed == 3.0


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_anyio_sleepers_overlap_on_both_backends(clock, anyio_backend):
    woke = []

    async def sleeper(name, seconds):
        await anyio.sleep(seconds)
        woke.append((name, clock.elapsed))

    started = wall()
    async with anyio.create_task_group() as group:
        group.start_soon(sleeper, "three", 3)
        group.start_soon(sleeper, "one", 1)
        group.start_soon(sleeper, "two", 2)
    assert wall() - started < 0.05

    assert woke == [("one", 1.0), ("two", 2.0), ("three", 3.0)]
    assert clock.elapsed == 3.0
    assert {s.kind for s in clock.sleeps} == {"anyio.sleep"}
    assert sorted(s.duration for s in clock.sleeps) == [1.0, 2.0, 3.0]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_trio_sleep_is_virtual(clock, anyio_backend):
    woke = []

    async def sleeper(name, seconds):
        await trio.sleep(seconds)
        woke.append((name, clock.elapsed))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sleeper, "late", 1.5)
        nursery.start_soon(sleeper, "early", 0.5)
    assert woke == [("early", 0.5), ("late", 1.5)]
    assert [s.kind for s in clock.sleeps] == ["trio.sleep", "trio.sleep"]


@pytest.mark.anyio
async def test_sequential_async_sleeps_add_up(clock):
    await asyncio.sleep(1)
    await anyio.sleep(0.5)
    assert clock.elapsed == 1.5
    assert clock.sleeps == [
        Sleep("asyncio.sleep", 0.0, 1.0),
        Sleep("anyio.sleep", 1.0, 0.5),
    ]


@pytest.mark.anyio
async def test_the_event_loop_keeps_real_time(clock):
    loop = asyncio.get_running_loop()
    time.sleep(100)
    assert time.monotonic() - loop.time() == pytest.approx(100, abs=1.0)
    assert abs(loop.time() - REAL["monotonic"]()) < 0.5

    fired = loop.create_future()
    started = wall()
    loop.call_later(0.01, fired.set_result, "fired")
    assert await asyncio.wait_for(fired, timeout=2) == "fired"
    took = wall() - started
    assert 0.009 <= took < 1.0
    assert clock.elapsed == 100.0  # the loop's timer did not move the virtual clock


def test_clock_sleeps_record_kind_start_and_duration(clock):
    time.sleep(1)
    time.sleep(0.25)

    async def main():
        await asyncio.sleep(2)

    asyncio.run(main())
    assert clock.sleeps == [
        Sleep("time.sleep", 0.0, 1.0),
        Sleep("time.sleep", 1.0, 0.25),
        Sleep("asyncio.sleep", 1.25, 2.0),
    ]
    assert clock.elapsed == 3.25


# -- the sleep watch of the real and instant modes ---------------------------------------------


def test_observe_sleeps_really_sleeps_and_records():
    log = []
    origin = wall()
    before = patch_points()
    undo = observe_sleeps(log, origin)
    try:
        assert time.monotonic is REAL["monotonic"]  # clocks stay real
        started = wall()
        time.sleep(0.02)
        slept = wall() - started

        async def main():
            await asyncio.sleep(0.02)

        asyncio.run(main())
    finally:
        undo()
    assert slept >= 0.019
    assert [(s.kind, s.duration) for s in log] == [("time.sleep", 0.02), ("asyncio.sleep", 0.02)]
    assert 0.0 <= log[0].at < log[1].at
    assert log[1].at - log[0].at >= 0.019
    after = patch_points()
    assert all(after[key] is before[key] for key in before)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_observe_sleeps_notes_anyio_sleeps(anyio_backend):
    log = []
    undo = observe_sleeps(log, wall())
    try:
        started = wall()
        await anyio.sleep(0.02)
        took = wall() - started
    finally:
        undo()
    assert took >= 0.019
    assert [(s.kind, s.duration) for s in log] == [("anyio.sleep", 0.02)]
    assert anyio.sleep is ORIGINAL_ANYIO_SLEEP
