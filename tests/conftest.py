# Imported once, before any in-process pytester run. pytester puts sys.modules back after each
# run, so a library first imported inside one would be imported afresh afterwards, and httpx2
# (imported earlier) would no longer recognise the new httpcore2's exceptions.
import faulthandler
import os
from pathlib import Path

import anthropic  # noqa: F401
import httpcore  # noqa: F401
import httpcore2  # noqa: F401
import httpx  # noqa: F401
import httpx2  # noqa: F401
import ollama  # noqa: F401
import openai  # noqa: F401
import pytest
from hypothesis import HealthCheck, settings

from pytest_toolnexus._patching import install as install_state
from pytest_toolnexus._patching.install import installed

# The suite runs on busy machines (two xdist workers on two cores beside other work): a
# property test judges what the code does, never how fast hypothesis draws its inputs or how
# long one example takes. A test's own @settings still chooses its examples.
settings.register_profile(
    "busy", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("busy")

# pytester, and the emulator fixture the plugin's pytester tests share.
pytest_plugins = ["pytester", "tests.support.plugin_projects"]

_FAULT_LOG: list[object] = []  # the open file, kept for as long as the process runs


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """Where ``.ci/dev.py test`` asks for it (``TOOLNEXUS_FAULT_LOG_DIR``), a test process that
    dies of a signal writes its Python traceback to a file there, which the job prints at the
    end: a crashed xdist worker otherwise leaves only "worker crashed" in the report."""
    folder = os.environ.get("TOOLNEXUS_FAULT_LOG_DIR")
    if not folder or _FAULT_LOG:
        return
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    log = open(Path(folder) / f"{name}-{os.getpid()}.log", "w")  # noqa: SIM115
    _FAULT_LOG.append(log)
    faulthandler.enable(log, all_threads=True)


@pytest.fixture(autouse=True)
def _no_installation_outlives_its_test():
    """After every test (and all its fixtures) nothing the plugin patches process-wide may be
    left installed: the test that leaks fails here, named, and the installation is closed, so
    the tests after it in this worker run clean instead of failing far from the cause."""
    yield
    owner = installed()
    if owner is not None:
        holder = install_state._holder[0]
        if holder is not None:
            holder.close()
        pytest.fail(f"an installation was still open after the test: {owner}", pytrace=False)


@pytest.fixture(autouse=True)
def _tests_start_outside_ci():
    """Each test starts as if on a developer's machine: CI unset.

    The plugin turns recording off where CI is set, and CI runners set it. Tests that record
    through a pytester project would otherwise pass on a laptop and fail in CI. Tests of the CI
    rule set the variable themselves.

    A patcher of its own, not the ``monkeypatch`` fixture: requesting that here would set it up
    before every test's own fixtures, and so undo the test's patches after their teardown.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("CI", raising=False)
        yield


@pytest.fixture(autouse=True)
def _pytester_projects_set_the_asyncio_loop_scope(request):
    """pytest-asyncio warns in every pytester project that leaves this option unset.

    Set after the pytester fixture exists, since it clears PYTEST_ADDOPTS when it starts.
    """
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")
        request.getfixturevalue("monkeypatch").setenv(
            "PYTEST_ADDOPTS", "-o asyncio_default_fixture_loop_scope=function"
        )
