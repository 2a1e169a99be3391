"""The virtual clock (docs/timing.md, DESIGN §4): what ``install`` patches and restores, how
sleeps move time without taking any, how async sleepers wake in deadline order, what is left
on real time, and the sleep watch used by the real and instant modes.
"""

import asyncio
import datetime
import math
import queue
import sys
import threading
import time
import types

import anyio
import pytest
import trio

from pytest_toolnexus import Cassette, Sleep, use_cassette
from pytest_toolnexus._timing.timepatch import install, observe_sleeps
from pytest_toolnexus._timing.virtual import VirtualClock
from tests.support.realtime import moves_with_real_time

# The real objects, captured before any clock is installed. Kept in a dict (not as module
# globals) so that no module scan can ever swap them for virtual ones.
REAL = {
    "perf_counter": time.perf_counter,
    "monotonic": time.monotonic,
    "time": time.time,
    "sleep": time.sleep,
    "datetime": datetime.datetime,
    "date": datetime.date,
    "struct_time": time.struct_time,
}
EPOCH = 1_700_000_000.0  # 2023-11-14T22:13:20Z
UTC = datetime.UTC
ORIGINAL_ANYIO_SLEEP = anyio.sleep
# The oracle for real time: the kernel's monotonic clock, read through a function the virtual
# clock does not touch (it rebinds time.monotonic and time.perf_counter, not clock_gettime).
REAL_CLOCK_ID = time.CLOCK_MONOTONIC


def wall():
    """Real seconds, whatever clock is installed."""
    return time.clock_gettime(REAL_CLOCK_ID)


# Swapped by name while a clock is installed: the sleeps.
SLEEP_POINTS = [
    ("time", "sleep"),
    ("asyncio", "sleep"),
    ("asyncio.tasks", "sleep"),
    ("anyio", "sleep"),
    ("trio", "sleep"),
]
# Never replaced: these objects keep their identity, and only what they return changes.
KEPT_POINTS = [
    ("time", "time"),
    ("time", "time_ns"),
    ("time", "monotonic"),
    ("time", "monotonic_ns"),
    ("time", "perf_counter"),
    ("time", "perf_counter_ns"),
    ("time", "struct_time"),
    ("datetime", "datetime"),
    ("datetime", "date"),
]


def patch_points():
    """Every (module, attribute) pair above, with its current value."""
    return {
        (module, name): getattr(sys.modules[module], name)
        for module, name in SLEEP_POINTS + KEPT_POINTS
    }


def loop_time_module():
    return vars(sys.modules["asyncio.base_events"])["time"]


READERS = ("monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns")


def readings():
    """Each monotonic reader's value now."""
    return {name: getattr(time, name)() for name in READERS}


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


def test_install_swaps_only_the_sleeps_and_uninstall_restores_each_exactly():
    before = patch_points()
    loop_time = loop_time_module()
    assert before[("time", "sleep")] is REAL["sleep"]

    uninstall = install(VirtualClock(epoch=EPOCH))
    try:
        during = patch_points()
        swapped = {key for key in before if during[key] is not before[key]}
        assert swapped == set(SLEEP_POINTS)
        # The clocks and classes are the same objects, reading virtual time.
        assert time.monotonic is REAL["monotonic"]
        assert datetime.datetime is REAL["datetime"]
        assert time.time() == EPOCH
        # The event loop's clock is a time module on real time, not the time module.
        assert loop_time_module() is not time
        assert abs(loop_time_module().monotonic() - wall()) < 0.5
    finally:
        uninstall()

    after = patch_points()
    assert all(after[key] is before[key] for key in before), {
        key for key in before if after[key] is not before[key]
    }
    assert loop_time is time or loop_time_module() is loop_time
    assert moves_with_real_time(time.monotonic)
    assert abs(time.time() - EPOCH) > 1e7
    uninstall()  # a second call is harmless
    assert patch_points() == before


def test_use_cassette_restores_everything_when_the_block_raises(empty_cassette):
    before = patch_points()

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
    assert abs(loop_time_module().monotonic() - wall()) < 0.5
    assert moves_with_real_time(time.monotonic)
    # The clock is gone, and a new one can be installed.
    start = wall()
    time.sleep(0.01)
    assert wall() - start >= 0.009
    install(VirtualClock())()


def test_nested_install_raises_and_leaves_the_first_clock_in_place(clock):
    with pytest.raises(RuntimeError, match=r"installed in this process already.*do not nest"):
        install(VirtualClock())
    with pytest.raises(RuntimeError, match=r"a sleep watch: the virtual clock .* already"):
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

    assert took < 2.5  # a real sleep would take 5 s
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


def test_no_class_is_replaced_so_identity_and_isinstance_hold(clock):
    real_datetime, real_date = REAL["datetime"], REAL["date"]
    assert datetime.datetime is real_datetime
    assert datetime.date is real_date
    assert time.struct_time is REAL["struct_time"]
    made_before = real_datetime(2020, 1, 2, 3, 4, 5)
    assert isinstance(made_before, datetime.datetime)
    assert not isinstance(real_date(2020, 1, 2), datetime.datetime)

    now = datetime.datetime.now()
    assert type(now) is real_datetime
    assert type(datetime.date.today()) is real_date
    assert type(time.gmtime()) is REAL["struct_time"]
    assert now - made_before > datetime.timedelta(days=1000)


def test_the_struct_time_readers_follow_the_virtual_wall_clock(clock):
    assert time.gmtime()[:6] == (2023, 11, 14, 22, 13, 20)
    assert time.strftime("%Y-%m-%d") == datetime.date.today().isoformat()
    time.sleep(3_600)
    assert time.gmtime().tm_hour == 23


def test_a_pydantic_datetime_field_behind_a_forward_reference_validates(clock):
    pydantic = pytest.importorskip("pydantic")

    class Event(pydantic.BaseModel):
        payload: "Payload"

    class Payload(pydantic.BaseModel):
        at: datetime.datetime
        day: datetime.date

    Event.model_rebuild()
    event = Event.model_validate({"payload": {"at": "2024-05-06T07:08:09Z", "day": "2024-05-06"}})
    assert event.payload.at == real_datetime_utc(2024, 5, 6, 7, 8, 9)
    assert type(event.payload.day) is REAL["date"]


def real_datetime_utc(*parts):
    return REAL["datetime"](*parts, tzinfo=UTC)


# -- names bound elsewhere ----------------------------------------------------------------------


def make_module(name, source, register):
    module = types.ModuleType(name)
    exec(source, module.__dict__)
    if register:
        sys.modules[name] = module
    return module


FROM_IMPORTS = (
    "import time\n"
    "from time import monotonic, perf_counter, perf_counter_ns, sleep, time as unix\n"
    "from datetime import datetime\n"
    "READ_LATER = {'clock': monotonic}\n"
    "def via_default(clock=perf_counter):\n"
    "    return clock()\n"
)


@pytest.fixture
def loaded_module():
    """A module imported before the clock started, with ``from time import ...`` names."""
    module = make_module("toolnexus_loaded_lib", FROM_IMPORTS, register=True)
    yield module
    del sys.modules["toolnexus_loaded_lib"]


def test_names_bound_anywhere_before_the_clock_started_read_virtual_time(loaded_module):
    clock = VirtualClock(epoch=EPOCH)
    uninstall = install(clock)
    try:
        start = readings()
        loaded_module.sleep(10)
        assert clock.elapsed == 10.0
        assert loaded_module.monotonic() == start["monotonic"] + 10
        assert loaded_module.perf_counter() == start["perf_counter"] + 10
        assert loaded_module.perf_counter_ns() == start["perf_counter_ns"] + 10_000_000_000
        assert loaded_module.unix() == EPOCH + 10
        assert loaded_module.datetime.now(UTC).timestamp() == EPOCH + 10
        # Not only module globals: a default argument and a dict entry too.
        assert loaded_module.via_default() == start["perf_counter"] + 10
        assert loaded_module.READ_LATER["clock"]() == start["monotonic"] + 10
        assert loaded_module.monotonic is REAL["monotonic"]
    finally:
        uninstall()

    assert loaded_module.sleep is REAL["sleep"]
    assert moves_with_real_time(loaded_module.monotonic)
    assert abs(loaded_module.unix() - EPOCH) > 1e7


def test_a_sleep_bound_in_a_module_python_never_loaded_is_patched_when_passed():
    # The one limit left: sleeps are swapped by name, so a module outside sys.modules (made by
    # exec, say) is reached only when it is passed in. Its clocks are virtual either way.
    passed = make_module("passed_lib", FROM_IMPORTS, register=False)
    other = make_module("other_lib", FROM_IMPORTS, register=False)
    clock = VirtualClock(epoch=EPOCH)
    uninstall = install(clock, [passed])
    try:
        start = readings()
        passed.sleep(2)
        assert clock.elapsed == 2.0
        assert other.sleep is REAL["sleep"]
        assert other.monotonic() == start["monotonic"] + 2
    finally:
        uninstall()
    assert passed.sleep is REAL["sleep"]


def test_a_module_imported_after_one_install_is_found_by_the_next(loaded_module):
    install(VirtualClock())()  # scans and remembers what is loaded now
    late = make_module("toolnexus_late_lib", "from time import sleep\n", register=True)
    try:
        clock = VirtualClock()
        uninstall = install(clock)
        try:
            late.sleep(4)
            loaded_module.sleep(1)
        finally:
            uninstall()
        assert clock.elapsed == 5.0
        assert late.sleep is REAL["sleep"]
    finally:
        del sys.modules["toolnexus_late_lib"]


# -- what keeps real time -----------------------------------------------------------------------


def test_queue_and_threading_timeouts_keep_real_time(clock):
    started = wall()
    with pytest.raises(queue.Empty):
        queue.Queue().get(timeout=0.05)
    assert wall() - started >= 0.045

    condition = threading.Condition()
    started = wall()
    with condition:
        assert condition.wait_for(lambda: False, timeout=0.05) is False
    assert wall() - started >= 0.045
    assert clock.elapsed == 0.0


def test_pytests_own_timing_keeps_real_time(clock):
    from _pytest import timing

    before = timing.Instant()
    time.sleep(60)
    assert before.elapsed().seconds < 5.0
    assert clock.elapsed == 60.0


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
    assert wall() - started < 1.0  # a real sleep of the longer would take 2 s

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
    assert wall() - started < 1.5  # far less than the 3 s a real sleep of the longest takes

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


# Bases where a deadline read as `now() + d` and taken back to elapsed time comes out a few
# units in the last place off d: a sum that crosses a power of two (2**15 s of uptime) and a
# machine up for days. The CI run that found it had an uptime of about 32,700 s.
AWKWARD_BASES = [32767.5 + 3 * 2**-38, 1_000_000.123456789, 4_000_000 + 1 / 3]


@pytest.mark.parametrize("base", AWKWARD_BASES)
def test_a_sleep_and_an_async_sleep_add_up_exactly_whatever_the_clock_reads(base):
    virtual = VirtualClock(epoch=EPOCH)
    virtual._base = base  # what real_monotonic() read when the clock was made
    uninstall = install(virtual)
    try:
        time.sleep(100)
        asyncio.run(asyncio.sleep(200))
    finally:
        uninstall()
    assert virtual.elapsed == 300


@pytest.mark.parametrize("base", AWKWARD_BASES)
def test_a_deadline_read_from_the_clock_moves_it_by_exactly_the_gap(base):
    # How a replayed piece waits: its recorded offset added to a reading of the clock.
    virtual = VirtualClock(epoch=EPOCH)
    virtual._base = base
    virtual.wait_until(virtual.now() + 0.35)
    virtual.wait_until(virtual.now() + 0.05)
    assert virtual.elapsed == 0.4  # to the nanosecond the readings are kept in
    assert virtual.now() == pytest.approx(base + 0.4, abs=4 * math.ulp(base))


@pytest.mark.anyio
async def test_the_event_loop_keeps_real_time(clock):
    loop = asyncio.get_running_loop()
    gap = time.monotonic() - loop.time()
    time.sleep(100)
    assert time.monotonic() - loop.time() - gap == pytest.approx(100, abs=1.0)
    assert abs(loop.time() - wall()) < 0.5

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


# -- a user's own time-machine travel ------------------------------------------------------------


def test_a_travel_started_before_the_clock_is_nested_under_and_survives_it():
    time_machine = pytest.importorskip("time_machine")
    with time_machine.travel(datetime.datetime(2001, 2, 3, tzinfo=UTC), tick=False):
        uninstall = install(VirtualClock(epoch=EPOCH))
        try:
            assert time.time() == EPOCH
            time.sleep(1)
            assert time.time() == EPOCH + 1
        finally:
            uninstall()
        assert datetime.datetime.now(UTC) == datetime.datetime(2001, 2, 3, tzinfo=UTC)
    assert abs(time.time() - EPOCH) > 1e7


def test_a_travel_left_running_inside_the_clock_does_not_keep_the_clock_alive():
    time_machine = pytest.importorskip("time_machine")
    clock = VirtualClock(epoch=EPOCH)
    uninstall = install(clock)
    leaked = time_machine.travel(datetime.datetime(2001, 2, 3, tzinfo=UTC), tick=False)
    leaked.start()
    try:
        uninstall()
        # The leaked travel still rules the wall clock; ours is gone from under it.
        assert datetime.datetime.now(UTC) == datetime.datetime(2001, 2, 3, tzinfo=UTC)
        assert moves_with_real_time(time.monotonic)
        install(VirtualClock())()  # and a new clock can be installed
    finally:
        leaked.stop()
    assert not time_machine.escape_hatch.is_travelling()
    assert abs(time.time() - EPOCH) > 1e7


@pytest.mark.parametrize("base", [0.0, 1.0, 12345.678901, 987654.321, 2.0**40 + 0.5])
@pytest.mark.parametrize("waits", [[5], [0.1, 0.2], [2.5, 30, 1e-3], [0.3] * 10])
def test_a_sessions_elapsed_is_the_exact_sum_of_its_virtual_waits(tmp_path, base, waits):
    # A difference of two large monotonic readings is not exact in floating point
    # ((b + 5) - b != 5 for many b); the session's elapsed must be.
    from pytest_toolnexus import CassetteSession, build

    path = tmp_path / "c.msgpack"
    build.build_cassette(path, [], meta={"clock_epoch": 1.7e9})
    session = CassetteSession(path)
    clock = session.clock
    assert isinstance(clock, VirtualClock)
    clock._base = base  # where the real monotonic clock happened to be
    session._t0 = clock.now()  # as if the session had started there
    total = 0.0
    for seconds in waits:
        clock.sleep(seconds)
        total += seconds
    assert session.elapsed == total
    session.close()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_time_moves_on_only_once_the_other_tasks_have_nothing_left_to_run(backend):
    """A replayed piece waits on the clock; another task with many steps of work before it
    waits (a request it was about to send) finishes them first, at the old time: the clock
    does not stop after a fixed number of checkpoints."""
    clock = VirtualClock()
    seen = []

    async def main():
        start = clock.now()

        async def piece():
            await clock.await_until(start + 1.0)
            seen.append(("piece", clock.now() - start))

        async def busy():
            for _ in range(50):
                await anyio.lowlevel.checkpoint()
            seen.append(("busy", clock.now() - start))

        async with anyio.create_task_group() as group:
            group.start_soon(piece)
            group.start_soon(busy)

    anyio.run(main, backend=backend)

    assert seen == [("busy", 0.0), ("piece", 1.0)]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_long_sleep_in_one_task_does_not_jump_past_a_piece_due_earlier_in_another(backend):
    """Waits wake in deadline order whoever made them: a replayed piece due at 80 ms is handed
    over at 80 ms though another task sleeps 2 s meanwhile, and the sleeper wakes at 2 s."""
    clock = VirtualClock()
    seen = []

    async def main():
        start = clock.now()

        async def piece():
            await clock.await_until(start + 0.08)
            seen.append(("piece", round(clock.now() - start, 6)))

        async def sleeper():
            await clock.async_sleep(2.0, "anyio.sleep")
            seen.append(("sleeper", round(clock.now() - start, 6)))

        async with anyio.create_task_group() as group:
            group.start_soon(sleeper)  # first, so that it would win a race
            group.start_soon(piece)

    anyio.run(main, backend=backend)

    assert seen == [("piece", 0.08), ("sleeper", 2.0)]


# -- advance_alone: a wait that nothing else could come before --------------------------------


def test_advance_alone_moves_at_once_when_no_other_task_could_run():
    """Alone in its loop, a wait moves the clock to its deadline at once (a plain call: the
    loop does not turn), and a deadline already passed moves nothing."""
    clock = VirtualClock()

    async def main():
        start = clock.now()
        moved = clock.advance_alone(start + 0.25), clock.now() - start
        return moved, (clock.advance_alone(start + 0.1), clock.now() - start)

    assert asyncio.run(main()) == ((True, 0.25), (True, 0.25))
    assert clock.sleeps == []


def test_advance_alone_leaves_time_alone_while_another_task_is_ready():
    clock = VirtualClock()

    async def main():
        start = clock.now()
        other = asyncio.get_running_loop().create_task(asyncio.sleep(0))
        refused = clock.advance_alone(start + 1.0)
        await other
        return refused, clock.now() - start, clock.advance_alone(start + 1.0)

    assert asyncio.run(main()) == (False, 0.0, True)


def test_advance_alone_leaves_time_alone_when_a_loop_timer_is_due():
    """A callback the loop will run on its next turn (call_soon or a timer already due) could
    send what a later piece answers: the caller must let the loop turn first."""
    clock = VirtualClock()

    async def main():
        start = clock.now()
        loop = asyncio.get_running_loop()
        fired = []
        loop.call_at(loop.time() - 1.0, fired.append, 1)  # already due
        refused = clock.advance_alone(start + 1.0)
        while not fired:  # the loop turns (the real sleep: no clock is installed)
            await asyncio.sleep(0)
        return refused, fired, clock.advance_alone(start + 1.0)

    assert asyncio.run(main()) == (False, [1], True)


def test_advance_alone_lets_a_wait_due_no_later_go_first():
    """An async wait made elsewhere (another thread's loop, or one blocked behind an earlier
    wait) due at 0.5 s keeps a piece due at 0.5 s or later from moving the clock alone; a
    piece due before it moves it, and once the wait has left, so does a later one."""
    clock = VirtualClock()
    seen = []

    async def main():
        start = clock.now()
        ticket = clock._enter(start + 0.5)  # what async_sleep and await_until register
        seen.append(("early", clock.advance_alone(start + 0.2), round(clock.now() - start, 6)))
        seen.append(("tie", clock.advance_alone(start + 0.5), round(clock.now() - start, 6)))
        clock._leave(ticket)
        seen.append(("after", clock.advance_alone(start + 0.7), round(clock.now() - start, 6)))

    asyncio.run(main())
    assert seen == [("early", True, 0.2), ("tie", False, 0.2), ("after", True, 0.7)]


def test_advance_alone_refuses_outside_an_asyncio_loop():
    """Sync code, and trio (whose run queue it cannot read), await await_until instead."""
    clock = VirtualClock()
    start = clock.now()
    assert not clock.advance_alone(start + 1.0)

    async def main():
        return clock.advance_alone(start + 1.0)

    assert trio.run(main) is False
    assert clock.now() == start
