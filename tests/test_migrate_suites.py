"""The proof that migrate works on whole suites: three suites written for pytest-recording
(tests/support/migrate_suites.py) are recorded against the loopback emulator, which is then
stopped; each passes under pytest-recording, is migrated with ``migrate --write``, and passes
again with pytest-recording disabled, with no manual edit. A second migrate changes nothing.
"""

import pytest

from tests.support.migrate_run import INNER, migrate
from tests.support.migrate_suites import SUITES


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_a_recorded_suite_passes_after_migrate_without_pytest_recording(
    pytester, emulator, monkeypatch, suite
):
    # Given a pytest-recording suite, recorded against the emulator (suite 3 by an "older
    # SDK" whose request bodies carry another max_tokens)
    files = SUITES[suite]
    for name, text in files.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip())
    if suite == "httpx":
        emulator.configure(gzip=True)
        monkeypatch.setenv("SDK_MAX_TOKENS", "64")
    recorded = pytester.runpytest_subprocess(*INNER, "--record-mode=once")
    recorded.assert_outcomes(passed=recorded.parseoutcomes()["passed"])
    emulator.stop()
    monkeypatch.delenv("SDK_MAX_TOKENS", raising=False)
    yaml = sorted(p.relative_to(pytester.path) for p in pytester.path.rglob("*.yaml"))
    assert yaml

    # When it replays under pytest-recording, then is migrated, then replays without it
    before = pytester.runpytest_subprocess(*INNER, "--record-mode=none")
    dry = migrate(pytester.path)
    wrote = migrate(pytester.path, "--write")
    after = pytester.runpytest_subprocess(*INNER, "-p", "no:recording")
    again = migrate(pytester.path)

    print(dry.stdout, dry.stderr)
    # Then every test passes before and after, with the emulator gone
    passed = before.parseoutcomes()["passed"]
    before.assert_outcomes(passed=passed)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    assert after.parseoutcomes() == before.parseoutcomes(), after.stdout.str()
    after.assert_outcomes(passed=passed)
    # and the second migrate finds nothing to do
    assert again.returncode == 0
    assert "nothing to change" in again.stdout
    print(f"{suite}: {passed} passed before, {after.parseoutcomes()['passed']} after")
