"""Benchmark 7: one generated 1,000-test suite run whole, under pytest-recording (vcrpy YAML
cassettes) and under pytest-toolnexus (msgpack cassettes), serially and with ``-n 2``
(issue 15, point 5).

The two suites are the same tests (one to five requests each, about a fifth of them answered
with a stream read through ``client.stream(...)``), with ``@pytest.mark.vcr`` or
``@pytest.mark.cassette``, each test's cassette where its plugin looks by default. Each run is a
whole ``python -m pytest`` process with the other plugin disabled; the two plugins' runs of
one setting go back to back, in alternating order, round after round.
"""

from __future__ import annotations

from pathlib import Path

from _common import Table, median, now, ratio, verdict
from _projects import Outcome, cassette_bytes, mixed_cases, run_pytest, write_project

TESTS = 1_000
ROUNDS = 5
PER_FILE = 100

_PLUGINS = {
    # name: (label, the option that disables the other plugin)
    "recording": ("pytest-recording, @pytest.mark.vcr, YAML", ("-p", "no:toolnexus")),
    "toolnexus": ("pytest-toolnexus, @pytest.mark.cassette, msgpack", ("-p", "no:recording")),
}
_SETTINGS = {"serial": (), "-n 2": ("-n", "2")}


def _thousands(value: int) -> str:
    return f"{value:,}"


def run(work: Path) -> tuple[list[Table], dict[str, float]]:
    cases = mixed_cases(TESTS)
    requests = sum(len(case.exchanges) for case in cases)
    streams = sum(exchange.stream for case in cases for exchange in case.exchanges)
    started = now()
    projects = {
        name: write_project(work / f"suite-{name}", cases, name, PER_FILE, shared_client=True)
        for name in _PLUGINS
    }
    written = now() - started
    for name, folder in projects.items():  # warm-up: compiles the test files
        run_pytest(folder, *_PLUGINS[name][1], "--collect-only")

    outcomes: dict[tuple[str, str], list[Outcome]] = {
        (name, setting): [] for setting in _SETTINGS for name in _PLUGINS
    }
    for round_ in range(ROUNDS):
        for setting, workers in _SETTINGS.items():
            order = list(_PLUGINS) if round_ % 2 == 0 else list(reversed(_PLUGINS))
            for name in order:
                outcome = run_pytest(projects[name], *_PLUGINS[name][1], *workers)
                outcomes[name, setting].append(outcome)

    table = Table(
        f"7. Whole suite: {TESTS:,} tests, {requests:,} requests ({streams:,} of them streams), "
        f"one cassette per test (median of {ROUNDS} interleaved runs)",
        [
            "plugin",
            "workers",
            "tests passed",
            "wall s",
            "range s",
            "CPU s",
            "ours/theirs",
            "goal",
            "",
        ],
    )
    figures: dict[str, float] = {}
    failures: list[str] = []
    for setting in _SETTINGS:
        walls: dict[str, float] = {}
        cpus: dict[str, float] = {}
        ok = True
        for name, (label, _) in _PLUGINS.items():
            runs = outcomes[name, setting]
            bad = [o for o in runs if not o.all_passed(TESTS)]
            ok = ok and not bad
            failures += [f"{label}, {setting}: exit {o.code}, {o.counts}\n{o.tail}" for o in bad]
            walls[name] = median([o.wall for o in runs])
            cpus[name] = median([o.cpu for o in runs])
            passed = min(o.passed for o in runs)
            shown = f"{passed:,} of {TESTS:,}" if bad else f"all {TESTS:,}"
            low, high = min(o.wall for o in runs), max(o.wall for o in runs)
            cells = [label, setting, shown, f"{walls[name]:.2f}", f"{low:.2f}-{high:.2f}"]
            cells.append(f"{cpus[name]:.2f}")
            if name == "toolnexus":
                share = walls["toolnexus"] / walls["recording"]
                figures[f"ratio {setting}"] = share
                cells += [ratio(share), "< 1.00x", verdict(share < 1.0 and ok)]
            else:
                cells += ["", "", ""]
            table.add(*cells)
        figures[f"cpu ratio {setting}"] = cpus["toolnexus"] / cpus["recording"]

    sizes = {name: cassette_bytes(folder) for name, folder in projects.items()}
    table.note(
        f"ours/theirs = pytest-toolnexus wall / pytest-recording wall, whole `python -m pytest "
        f"-q -p no:randomly -p no:cacheprovider` processes. By CPU time (the process and its "
        f"workers): serial {ratio(figures['cpu ratio serial'])}, -n 2 "
        f"{ratio(figures['cpu ratio -n 2'])}."
    )
    table.note(
        f"Cassettes on disk: YAML {_thousands(sizes['recording'])} B, msgpack "
        f"{_thousands(sizes['toolnexus'])} B, in {TESTS // PER_FILE} test modules of {PER_FILE}; "
        f"both suites written in {written:.1f} s. vcrpy matches on its default "
        "(method, scheme, host, port, path, query); pytest-toolnexus on its default (the same "
        "and the body, JSON compared parsed)."
    )
    table.note(
        "The tests of a module share one httpx.Client (a module-scoped fixture): a client per "
        "test would add httpx's own TLS set-up (~20 ms here) to every test under both plugins."
    )
    if failures:
        table.note(f"SUITE FAILURES, so the ratios above count as MISS ({len(failures)} runs):")
        table.notes += [f"  {line}" for failure in failures[:2] for line in failure.splitlines()]
    return [table], figures


if __name__ == "__main__":
    from _common import run_alone

    run_alone(run)
