"""Data flows one way (DESIGN §1): each module imports only from the layers below its own.

The imports are read from the source with ``ast``, so an import inside a function or under
``if TYPE_CHECKING:`` counts as much as one at the top, and nothing is imported to check it.
A module that is not in ``LAYERS`` fails the suite until it is given a layer here.
"""

import ast
import fnmatch
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "pytest_toolnexus"
PACKAGE_DIR = Path(__file__).resolve().parent.parent / PACKAGE

# The cassette store, with the framing, redaction and secret scan it applies before a write
# (``_store_redact``, ``_store_safe``) and the locked, merging writer (``_store_write``).
STORE = (
    "_cassette",
    "_cassette_*",
    "_store*",
    "_format*",
    "_streams",
    "_json_array",
    "_eventstream",
    "_redact",
    "_secrets",
    "_sniff",
)

# What a session composes (``_observer``: what record and replay tell whoever sent a request).
REPLAY_CORE = (
    "_observer",
    "_record*",
    "_replay*",
    "_faults*",
    "_clock*",
    "_virtual*",
    "_timepatch",
    "_match*",
    "_tripwire",
)

# The pytest plugin, the modules only it uses, and the pytest conformance kit built on it.
PLUGIN = ("plugin", "_plugin*", "_hookspecs", "_settings", "_patch*", "conformance")

# Lowest first. A module belongs to the first pattern it matches.
LAYERS: list[tuple[str, ...]] = [
    # 0: leaves, and the provider layer (one module per wire dialect): it imports nothing of
    # the package, knowing nothing of transports or cassettes, so that the seam's body rules
    # (a URL that asks for a stream) may ask it, as the recorder, faults, views, builder and
    # check above do. _install is the one owner of every process-wide patch, which all of
    # them go on through.
    (
        "_version",
        "_errors",
        "_headers",
        "_cfunc",
        "_provenance",
        "_mask",
        "_served",
        "_install",
        "providers*",
    ),
    # 1: the seam
    ("_cancel", "_seam", "_bodies", "_codings", "_stream_kind"),
    # 2: httpx and httpx2 adapters, and the bridges for other HTTP libraries (aiohttp, ...)
    ("_compat", "_live", "_bridge", "_bridge_*"),
    # 3: the store
    STORE,
    # 4: record, replay and its faults, clocks, matching, the network tripwire, the sessions
    # that compose them, the builder of unrecorded cassettes and the in-process model on it
    # (and the text of a miss, which reads the match index). A session is its request path
    # (``_route``), the record of each request sent (``_sent``), and its lifecycle.
    (
        *REPLAY_CORE,
        "_views*",
        "_miss",
        "_sent",
        "_route",
        "_session*",
        "_expect*",
        "_build*",
        "_model*",
    ),
    # 5: the pytest plugin (with its hooks, settings and client patching), the command line
    # (with import-vcr and migrate),
    # the public package and its public submodules
    (
        *PLUGIN,
        "_cli",
        "_import_vcr*",
        "_migrate*",
        "_diff",
        "__main__",
        "__init__",
        "faults",
        "build",
        "views",
    ),
]

# Imports allowed inside one layer: importer pattern -> patterns it may import. Modules that
# match one wildcard pattern (``_record`` and ``_record_tee``) may always import each other.
SAME_LAYER: dict[str, tuple[str, ...]] = {
    "_headers": ("_mask",),
    "_install": ("_errors",),
    "_seam": ("_cancel",),
    "_bodies": ("_seam",),
    "_live": ("_compat",),
    "_bridge": ("_compat",),
    **dict.fromkeys(STORE, STORE),  # the store is one component
    "_record*": ("_clock*", "_virtual*", "_match*", "_observer"),
    "_replay*": ("_clock*", "_virtual*", "_match*", "_observer"),
    "_virtual*": ("_clock*",),
    "_timepatch": ("_clock*", "_virtual*"),
    "_faults*": ("_replay*",),
    "_miss": ("_match*",),
    "_sent": ("_replay*",),
    "_route": (*REPLAY_CORE, "_views*", "_miss", "_sent"),
    "_session*": (*REPLAY_CORE, "_views*", "_miss", "_sent", "_route"),
    "_expect*": ("_session*", "_clock*"),
    "_build*": ("_faults*",),
    "_model*": ("_build*",),
    **dict.fromkeys(PLUGIN, PLUGIN),  # so is the plugin
    "__main__": ("_cli",),
    "_cli": ("_import_vcr*", "_diff", "_migrate"),
    # migrate: its probe reads the plugin's settings, and it converts with the importer.
    "_migrate*": ("_settings", "_import_vcr*"),
    "__init__": ("faults", "build", "views"),  # public submodules the package may re-export
}

SEAM_MODULES = ("_seam", "_headers", "_cancel", "_errors", "_bodies")
HTTP_MODULES = ("_compat", "_live", "_bridge")
STORE_LAYER = 3
PLUGIN_LAYER = 5


@dataclass(frozen=True)
class Import:
    target: str  # "pytest_toolnexus._seam", "httpx", ...
    line: int

    @property
    def internal(self) -> str | None:
        """The module name inside the package (``"__init__"`` for the package), else None."""
        if self.target == PACKAGE:
            return "__init__"
        if self.target.startswith(PACKAGE + "."):
            return self.target[len(PACKAGE) + 1 :]
        return None

    @property
    def top_level(self) -> str:
        return self.target.split(".", 1)[0]


def find_modules(package_dir: Path = PACKAGE_DIR) -> list[str]:
    """Every module of the package, as ``"_seam"``, ``"__init__"``, ``"sub._x"``."""
    names = []
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir).with_suffix("").parts
        names.append(".".join(parts))
    return names


def _is_module(dotted: str) -> bool:
    relative = Path(*dotted.split(".")[1:]) if "." in dotted else Path()
    return (PACKAGE_DIR / relative).with_suffix(".py").is_file() or (
        PACKAGE_DIR / relative / "__init__.py"
    ).is_file()


def _literal_import(node: ast.Call) -> str | None:
    """The module named by ``importlib.import_module("x")`` or ``__import__("x")``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in {"import_module", "__import__"} or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imports_of(module: str, source: str) -> list[Import]:
    """Every import in ``source`` (of package module ``module``), at any depth."""
    parts = module.split(".")
    package_parts = [PACKAGE, *parts[:-1]]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package_parts[: len(package_parts) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                is_submodule = candidate.startswith(PACKAGE + ".") and _is_module(candidate)
                found.append(Import(candidate if is_submodule else base, node.lineno))
        elif isinstance(node, ast.Call):
            target = _literal_import(node)
            if target is not None:
                found.append(Import(target, node.lineno))
    return found


def _read(module: str) -> str:
    return (PACKAGE_DIR / Path(*module.split("."))).with_suffix(".py").read_text("utf-8")


def pattern_of(module: str) -> tuple[int, str] | None:
    for layer, patterns in enumerate(LAYERS):
        for pattern in patterns:
            if fnmatch.fnmatchcase(module, pattern):
                return layer, pattern
    return None


def upward_imports(module: str, source: str) -> list[str]:
    """A sentence for each import in ``source`` that breaks the layering."""
    own = pattern_of(module)
    assert own is not None
    layer, pattern = own
    allowed_same = SAME_LAYER.get(pattern, ())
    problems = []
    for imported in imports_of(module, source):
        target = imported.internal
        if target is None or target == module:
            continue
        theirs = pattern_of(target)
        if theirs is None:
            continue  # reported by test_every_module_has_a_layer
        their_layer, their_pattern = theirs
        if their_layer < layer:
            continue
        same_family = their_pattern == pattern and "*" in pattern
        excepted = any(fnmatch.fnmatchcase(target, p) for p in allowed_same)
        if their_layer == layer and (same_family or excepted):
            continue
        problems.append(
            f"{PACKAGE}/{module}.py:{imported.line} imports {target} "
            f"(layer {their_layer}) from layer {layer}"
        )
    return problems


MODULES = find_modules()


def layer_of(module: str) -> int:
    found = pattern_of(module)
    assert found is not None, f"{module} has no layer"
    return found[0]


def test_the_package_is_where_the_test_expects_it():
    assert "_seam" in MODULES
    assert "__init__" in MODULES


def test_every_module_has_a_layer():
    missing = [module for module in MODULES if pattern_of(module) is None]

    assert not missing, (
        f"{', '.join(f'{PACKAGE}/{m}.py' for m in missing)} "
        f"{'is' if len(missing) == 1 else 'are'} not in the layer table. Add "
        f"{'it' if len(missing) == 1 else 'each'} to LAYERS in tests/test_layering.py at the "
        "lowest layer it can live in (DESIGN §1), and to SAME_LAYER if it must import a "
        "module of its own layer."
    )


@pytest.mark.parametrize("module", MODULES)
def test_imports_point_down(module):
    if pattern_of(module) is None:
        pytest.fail(
            f"{PACKAGE}/{module}.py is not in the layer table; add it to LAYERS in "
            "tests/test_layering.py"
        )

    problems = upward_imports(module, _read(module))

    assert not problems, "\n".join(problems)


def _external_importers(names: set[str]) -> dict[str, list[str]]:
    importers: dict[str, list[str]] = {}
    for module in MODULES:
        for imported in imports_of(module, _read(module)):
            if imported.internal is None and imported.top_level in names:
                importers.setdefault(module, []).append(f"{imported.target}:{imported.line}")
    return importers


def test_only_the_plugin_layer_imports_pytest():
    importers = _external_importers({"pytest", "_pytest", "pluggy"})
    below = {
        m: where
        for m, where in importers.items()
        if pattern_of(m) is None or layer_of(m) != PLUGIN_LAYER
    }

    assert not below, f"only the plugin layer may import pytest: {below}"


def test_the_seam_modules_import_neither_httpx_nor_httpx2():
    importers = _external_importers({"httpx", "httpx2", "httpcore"})

    assert not {m: where for m, where in importers.items() if m in SEAM_MODULES}


def test_only_compat_live_and_bridge_import_httpx():
    importers = _external_importers({"httpx", "httpx2", "httpcore"})

    assert set(importers) <= set(HTTP_MODULES), (
        f"httpx/httpx2 imported outside {', '.join(HTTP_MODULES)}: "
        f"{ {m: w for m, w in importers.items() if m not in HTTP_MODULES} }"
    )
    assert "_compat" in importers  # the check sees the imports it is meant to police


# The other HTTP libraries: only their bridges and the patches that install them import one.
OTHER_HTTP = {"aiohttp", "multidict", "yarl", "requests", "urllib3", "botocore", "boto3"}


def test_only_bridges_and_their_patches_import_other_http_libraries():
    importers = _external_importers(OTHER_HTTP)
    outside = {
        m: where
        for m, where in importers.items()
        if not (fnmatch.fnmatchcase(m, "_bridge_*") or fnmatch.fnmatchcase(m, "_patch_*"))
    }

    assert not outside, f"an HTTP library other than httpx imported outside a bridge: {outside}"
    assert "_bridge_aiohttp" in importers  # the check sees the imports it is meant to police


def test_the_store_never_imports_the_recorder_or_the_replayer():
    store = [m for m in MODULES if pattern_of(m) is not None and layer_of(m) == STORE_LAYER]
    bad = {}
    for module in store:
        for imported in imports_of(module, _read(module)):
            target = imported.internal or ""
            if fnmatch.fnmatchcase(target, "_record*") or fnmatch.fnmatchcase(target, "_replay*"):
                bad.setdefault(module, []).append(target)

    assert not bad


# The checker itself: it must see every spelling of an import.


def test_the_checker_finds_imports_at_every_depth_and_spelling():
    source = """
from __future__ import annotations
import json
from typing import TYPE_CHECKING
from . import _compat
from ._headers import Headers
from pytest_toolnexus._cancel import CancelToken
import pytest_toolnexus._errors
if TYPE_CHECKING:
    from ._live import LiveTransport

def later():
    from ._cassette import Cassette
    import importlib
    return importlib.import_module("httpx2")

class Lazy:
    def method(self):
        import pytest_toolnexus
        return __import__("msgpack")
"""
    targets = {imported.target for imported in imports_of("_seam", source)}

    assert {
        "json",
        "pytest_toolnexus._compat",
        "pytest_toolnexus._headers",
        "pytest_toolnexus._cancel",
        "pytest_toolnexus._errors",
        "pytest_toolnexus._live",
        "pytest_toolnexus._cassette",
        "httpx2",
        "pytest_toolnexus",
        "msgpack",
    } <= targets


def test_the_checker_flags_an_upward_import_hidden_in_a_function():
    source = "def f():\n    from ._live import LiveTransport\n    from . import plugin\n"

    problems = upward_imports("_seam", source)

    assert problems == [
        f"{PACKAGE}/_seam.py:2 imports _live (layer 2) from layer 1",
        f"{PACKAGE}/_seam.py:3 imports plugin (layer 5) from layer 1",
    ]


def test_the_checker_allows_listed_same_layer_imports_only():
    assert upward_imports("_seam", "from ._cancel import CancelToken") == []
    assert upward_imports("_cancel", "from ._seam import call") == [
        f"{PACKAGE}/_cancel.py:1 imports _seam (layer 1) from layer 1"
    ]
    assert upward_imports("_record_tee", "from ._record import x") == []
    assert upward_imports("_cassette", "from ._record import x") == [
        f"{PACKAGE}/_cassette.py:1 imports _record (layer 4) from layer 3"
    ]


def test_importing_the_package_from_inside_counts_as_importing_the_top_layer():
    assert upward_imports("_replay", "from pytest_toolnexus import Headers") == [
        f"{PACKAGE}/_replay.py:1 imports __init__ (layer 5) from layer 4"
    ]


def test_modules_that_do_not_exist_yet_still_have_a_layer():
    assert pattern_of("_store_sqlite") == (3, "_store*")
    assert pattern_of("_format_v2") == (3, "_format*")
    assert pattern_of("_replay_faults") == (4, "_replay*")
    assert pattern_of("_plugin_hooks") == (5, "_plugin*")
    assert pattern_of("_brand_new") is None


def private_names_reached(module: str, source: str) -> list[str]:
    """A sentence for each private name (one leading underscore) ``source`` takes from another
    module of the package: imported by name, or read as an attribute of an imported module."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # local name -> package module it is bound to
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        for found, alias in zip(imports_of(module, ast.unparse(node)), node.names, strict=True):
            target = found.internal
            if target is None or target == module:
                continue
            is_module = found.target.endswith("." + alias.name)
            if is_module:
                modules[alias.asname or alias.name] = target
            elif alias.name.startswith("_") and not alias.name.startswith("__"):
                problems.append(
                    f"{PACKAGE}/{module}.py:{node.lineno} imports the private name "
                    f"{alias.name} from {target}"
                )
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            problems.append(
                f"{PACKAGE}/{module}.py:{node.lineno} reads the private name "
                f"{node.attr} of {modules[node.value.id]}"
            )
    return problems


@pytest.mark.parametrize("module", MODULES)
def test_no_module_reaches_into_another_modules_private_names(module):
    problems = private_names_reached(module, _read(module))

    assert not problems, "\n".join(problems)


def test_the_private_name_check_sees_both_spellings():
    source = (
        "from ._session import _redacted, CassetteSession\n"
        "from . import _cassette\n"
        "_cassette._ms(1)\n"
        "_cassette.write_atomic\n"
    )

    assert private_names_reached("_import_vcr", source) == [
        f"{PACKAGE}/_import_vcr.py:1 imports the private name _redacted from _session",
        f"{PACKAGE}/_import_vcr.py:3 reads the private name _ms of _cassette",
    ]
