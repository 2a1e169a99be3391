"""The public API is exactly ``pytest_toolnexus.__all__``, and this file pins it.

Adding or removing a public name is a decision: update ``EXPORTED`` in the same change.
"""

import importlib
import importlib.metadata
import inspect
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import pytest_toolnexus
from pytest_toolnexus import __all__ as exported_members

# For pytest users: the cassette handle and what it holds, the assertions, the in-process model,
# and the errors and warnings a test may meet. For seam authors: the seam's types, the bridge,
# the live transport and the transport errors. README.md ("Public API") says which is which.
EXPORTED = [
    "AlreadyInstalledError",
    "AsyncByteStream",
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
    "CassetteSymlinkWarning",
    "CassetteVersionError",
    "CassetteWriteError",
    "ConnectError",
    "ConnectTimeout",
    "ContractError",
    "DualTransport",
    "HTTPBridge",
    "Headers",
    "Interaction",
    "LiveTransport",
    "ModelTransport",
    "ModelTurn",
    "NetworkBlockedError",
    "PoolTimeout",
    "ReadError",
    "ReadTimeout",
    "RecordedError",
    "RecordedRequest",
    "RecordedResponse",
    "RecorderWarning",
    "RemoteProtocolError",
    "ReplayError",
    "SecretFoundError",
    "SentRequest",
    "SessionClosedError",
    "Sleep",
    "SwallowedMissWarning",
    "ToolnexusError",
    "Transport",
    "TransportCancelled",
    "TransportError",
    "TransportRequest",
    "TransportResponse",
    "UnusedInteractionsWarning",
    "VcrpyMissError",
    "VirtualClockWarning",
    "WebSocketFrame",
    "WebSocketLog",
    "WireCheckError",
    "WriteError",
    "WriteTimeout",
    "__version__",
    "assert_attempts",
    "assert_incremental",
    "assert_time_to_first_event",
    "assert_waits",
    "load_cassette",
    "use_cassette",
]

# Names that were public in 0.1.0 and are not now: CHANGELOG.md says what to use instead.
REMOVED = {
    "PUSHED": "TransportResponse.pushed",
    "Pushed": "TransportResponse.is_pushed",
    "JSONValue": None,
    "MatchRules": None,
    "call": None,
    "acall": None,
    "check_response": None,
    "AsyncLiveTransport": "LiveTransport",
    "AsyncModelTransport": "ModelTransport",
    "RecordingTransport": "use_cassette",
    "AsyncRecordingTransport": "use_cassette",
    "ReplayTransport": "use_cassette",
    "AsyncReplayTransport": "use_cassette",
    "Clock": None,
    "InstantClock": "use_cassette",
    "RealClock": "use_cassette",
    "VirtualClock": "use_cassette",
}

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
    # dir(), not vars(): the package imports its names on first use (PEP 562).
    public = [
        name
        for name in dir(pytest_toolnexus)
        if (not name.startswith("_") or name in PUBLIC_DUNDERS)
        and not isinstance(getattr(pytest_toolnexus, name), ModuleType)
    ]

    assert sorted(public, key=isort_style) == exported_members


@pytest.mark.parametrize("name", sorted(REMOVED))
def test_a_removed_name_is_gone_from_the_top_package(name):
    assert name not in exported_members
    assert not hasattr(pytest_toolnexus, name)
    with pytest.raises(ImportError):
        exec(f"from pytest_toolnexus import {name}", {})


def _unreleased_entries():
    """The bullet entries of the changelog's Unreleased section, each joined into one line."""
    changelog = (Path(__file__).parents[1] / "CHANGELOG.md").read_text(encoding="utf-8")
    unreleased = changelog.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]
    entries, current = [], None
    for line in unreleased.splitlines():
        if line.startswith("- "):
            current = [line[2:]]
            entries.append(current)
        elif line.startswith("  ") and current is not None:
            current.append(line.strip())
        else:
            current = None
    return [" ".join(entry) for entry in entries]


@pytest.mark.parametrize("name", sorted(REMOVED))
def test_the_changelog_says_what_to_use_instead_of_each_removed_name(name):
    entries = [entry for entry in _unreleased_entries() if f"`{name}`" in entry]

    assert entries, f"CHANGELOG.md has no Unreleased entry for {name}"
    instead = REMOVED[name]
    if instead is not None:
        assert any(instead in entry for entry in entries), entries


def _signatures():
    """Each exported callable's signature, and each public method's, with its name."""
    for name in EXPORTED:
        value = getattr(pytest_toolnexus, name)
        targets = [(name, value)]
        if inspect.isclass(value):
            targets += [
                (f"{name}.{attr}", member)
                for attr, member in vars(value).items()
                if not attr.startswith("_") and callable(member)
            ]
        for where, target in targets:
            try:
                yield where, inspect.signature(target)
            except (TypeError, ValueError):  # exception classes implemented in C
                continue


def test_no_public_signature_takes_a_private_parameter():
    private = {
        where: [p for p in signature.parameters if p.startswith("_")]
        for where, signature in _signatures()
    }

    assert {where: names for where, names in private.items() if names} == {}
    assert "_origin" not in inspect.signature(pytest_toolnexus.SentRequest).parameters


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
    """Every module of the package, in its folders too (``_store.cassette``)."""
    names = [
        info.name.removeprefix("pytest_toolnexus.")
        for info in pkgutil.walk_packages(pytest_toolnexus.__path__, "pytest_toolnexus.")
    ]
    return sorted(name for name in names if name not in WITHOUT_ALL)


@pytest.mark.parametrize("module_name", _private_modules())
def test_each_module_declares_only_names_it_has(module_name):
    module = importlib.import_module(f"pytest_toolnexus.{module_name}")
    declared = getattr(module, "__all__", None)

    assert declared is not None, f"pytest_toolnexus.{module_name} has no __all__"
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
