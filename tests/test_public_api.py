"""The public API is exactly ``pytest_toolnexus.__all__``, and this file pins it.

Adding or removing a public name is a decision: update ``EXPORTED`` in the same change.
"""

import importlib
import importlib.metadata
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import pytest_toolnexus
from pytest_toolnexus import __all__ as exported_members

EXPORTED = [
    "PUSHED",
    "AsyncByteStream",
    "AsyncLiveTransport",
    "AsyncModelTransport",
    "AsyncRecordingTransport",
    "AsyncReplayTransport",
    "AsyncTransport",
    "ByteStream",
    "CancelToken",
    "Cassette",
    "CassetteError",
    "CassetteExpiredWarning",
    "CassetteFormatError",
    "CassetteMissError",
    "CassetteNotFoundError",
    "CassetteSession",
    "CassetteSetAsideWarning",
    "CassetteVersionError",
    "CassetteWriteError",
    "Clock",
    "ConnectError",
    "ConnectTimeout",
    "ContractError",
    "HTTPBridge",
    "Headers",
    "InstantClock",
    "Interaction",
    "JSONValue",
    "LiveTransport",
    "MatchRules",
    "ModelTransport",
    "ModelTurn",
    "NetworkBlockedError",
    "PoolTimeout",
    "Pushed",
    "ReadError",
    "ReadTimeout",
    "RealClock",
    "RecordedError",
    "RecordedRequest",
    "RecordedResponse",
    "RecorderWarning",
    "RecordingTransport",
    "RemoteProtocolError",
    "ReplayError",
    "ReplayTransport",
    "SecretFoundError",
    "SentRequest",
    "Sleep",
    "ToolnexusError",
    "Transport",
    "TransportCancelled",
    "TransportError",
    "TransportRequest",
    "TransportResponse",
    "UnusedInteractionsWarning",
    "VirtualClock",
    "WireCheckError",
    "WriteError",
    "WriteTimeout",
    "__version__",
    "acall",
    "assert_attempts",
    "assert_incremental",
    "assert_time_to_first_event",
    "assert_waits",
    "call",
    "check_response",
    "load_cassette",
    "use_cassette",
]

PUBLIC_DUNDERS = {"__version__"}


def isort_style(name):
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then everything else."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def test_the_public_api_is_pinned():
    assert exported_members == EXPORTED


def test_the_exports_are_sorted():
    assert exported_members == sorted(exported_members, key=isort_style)
    assert len(set(exported_members)) == len(exported_members)


def test_every_public_name_in_the_package_is_exported():
    public = [
        name
        for name, value in vars(pytest_toolnexus).items()
        if (not name.startswith("_") or name in PUBLIC_DUNDERS)
        and not isinstance(value, ModuleType)
    ]

    assert sorted(public, key=isort_style) == exported_members


def test_every_exported_name_is_importable():
    namespace = {}
    exec("from pytest_toolnexus import *", namespace)

    missing = [name for name in EXPORTED if name not in namespace]
    assert not missing
    for name in EXPORTED:
        assert getattr(pytest_toolnexus, name) is namespace[name]


# __main__ runs the CLI when imported; _version holds one string and is read by the build.
WITHOUT_ALL = {"__main__", "_version"}


def _private_modules():
    names = [info.name for info in pkgutil.iter_modules(pytest_toolnexus.__path__)]
    return sorted(name for name in names if name not in WITHOUT_ALL)


@pytest.mark.parametrize("module_name", _private_modules())
def test_each_module_declares_only_names_it_has(module_name):
    module = importlib.import_module(f"pytest_toolnexus.{module_name}")
    declared = getattr(module, "__all__", None)

    assert declared is not None, f"pytest_toolnexus/{module_name}.py has no __all__"
    assert [name for name in declared if not hasattr(module, name)] == []


def test_the_version_is_the_installed_distributions():
    assert pytest_toolnexus.__version__ == importlib.metadata.version("pytest-toolnexus")


def _run(*argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_python_dash_m_prints_the_version():
    result = _run(sys.executable, "-m", "pytest_toolnexus", "--version")

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"pytest-toolnexus {pytest_toolnexus.__version__}\n"


def test_the_console_script_prints_the_version():
    script = shutil.which("pytest-toolnexus", path=str(Path(sys.executable).parent))
    assert script is not None, "the pytest-toolnexus console script is not installed"

    result = _run(script, "--version")

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"pytest-toolnexus {pytest_toolnexus.__version__}\n"
