"""Data flows one way (DESIGN §1): each module imports only from the layers below its own,
and no chain of imports ever leads back to where it started.

The imports are read from the source with ``ast``, so an import inside a function or under
``if TYPE_CHECKING:`` counts as much as one at the top, and nothing is imported to check it.
A module that is not in ``LAYERS`` fails the suite until it is given a layer here.
"""

import ast
import fnmatch
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "pytest_toolnexus"
PACKAGE_DIR = Path(__file__).resolve().parent.parent / PACKAGE

# The package's folders are the parts of DESIGN §1 (docs/architecture.md); a folder is not a
# layer. Each layer below is one step of the picture, and a module sits in the lowest layer it
# can live in. A module belongs to the pattern that names it exactly, else to the first
# wildcard it matches, lowest layer first.

LAYERS: list[tuple[str, ...]] = [
    # 0: leaves: the error vocabulary, what a secret looks like, which traffic a cassette
    # accounts for, the time-function rebinder, the one owner of process-wide patches (it
    # knows only the errors), and each folder's docstring-only __init__
    (
        "_version",
        "_seam.errors",
        "_seam.served",
        "_safety.mask",
        "_safety.rules",
        "_safety.probes",
        "_timing.cfunc",
        "_patching.install",
        "_patching.imports",
        "_seam.__init__",
        "_bridges.__init__",
        "_store.__init__",
        "_safety.__init__",
        "_timing.__init__",
        "_session.__init__",
        "_answers.__init__",
        "_patching.__init__",
        "_plugin.__init__",
        "_cli.__init__",
        "_realtime.__init__",
        "_report.__init__",
    ),
    # 1: the provider dialects: they import nothing of the package, so that the seam's body
    # rules (a URL that asks for a stream) may ask them, as everything above does
    ("_providers.*",),
    # 2: the seam: request, response, headers, cancellation, what a body is
    ("_seam.*",),
    # 3: clocks, the virtual clock, the monotonic readers that carry what it ran ahead, and the
    # patch that puts it behind time, datetime, asyncio
    ("_timing.clock", "_timing.virtual", "_timing.readers", "_timing.timepatch"),
    # 4: the bridges (httpx/httpx2, aiohttp, urllib3) and the live default transport
    ("_bridges.*",),
    # 5: redacting headers and URLs, and the network tripwire
    ("_safety.redact", "_safety.tripwire"),
    # 6: the store below the file: the records and their bodies, stream framing, reading bytes
    # and placing them (the atomic write)
    ("_store.*",),
    # 7: on stored records: their redaction, and the secret scan (over every string of an
    # interaction, and over stream text joined)
    ("_safety.redact_interaction", "_safety.joined", "_safety.leaves", "_safety.secrets"),
    # 8: the gate, the one writer of a cassette: redact, scan, then write atomically
    ("_safety.gate",),
    # 9: the cassette (the document encoded and decoded, loaded, saved through the gate), a
    # recording session's write (merged with the file under a lock, then through the gate), and
    # a file read one interaction at a time (for check)
    ("_store.cassette", "_store.recording", "_store.streamed"),
    # 10: on stored interactions alone: what record and replay tell whoever sent a request (the
    # observer), reading what a model answered (views), the parts of a match, and a cassette's
    # timeline as plain data (show --json and the run report read it)
    (
        "_session.observer",
        "_answers.views",
        "_session.parts",
        "_session.body_part",
        "_report.timeline",
    ),
    # 11: record (and the parsing of a body as it arrives), replay, matching, and the checks a
    # loaded interaction passes before it plays
    (
        "_session.record_body",
        "_session.record",
        "_session.replay",
        "_session.replay_check",
        "_session.match",
    ),
    # 12: faults (applied to a replay plan), the miss message (reading the match index), the
    # record of one request sent (it keeps the plan's shaper), and what passed on one
    # WebSocket connection (the record a test reads back)
    ("_session.faults", "_session.miss", "_session.sent", "_realtime.log"),
    # 13: the session, which composes them for one cassette: its request path and its life
    ("_session.*",),
    # 14: what builds on a session or on faults: the timing assertions, the builder of
    # unrecorded answers (one module per provider), the in-process model on it, and the run
    # report (a test's data read from its closed session, and the page drawn from it)
    ("_timing.expect", "_answers.build*", "_answers.model", "_report.*"),
    # 14b: WebSocket sessions, recorded and replayed through a session's request path
    ("_realtime.*",),
    # 14c: the public faults module, the one place a fault is made and its arguments checked:
    # HTTP faults and WebSocket ones (which serve's control API calls for the faults another
    # language asks for)
    ("faults",),
    # 15: installing the bridges into the HTTP libraries, the pytest plugin's own modules, and
    # the loopback server (``serve``), which replays through a session per cassette
    ("_patching.*", "_plugin.*", "_serve.*"),
    # 16: the command line (with import-vcr and migrate)
    ("_cli.*",),
    # 17: the public surface: the pytest11 entry point, the conformance kit, the package and
    # its public submodules
    ("plugin", "conformance", "__main__", "__init__", "build", "views"),
]

# Imports allowed inside one layer besides a wildcard family's own (``_seam.*`` modules may
# import each other): importer pattern -> patterns it may import. None of them may close a
# circle: test_no_import_circle fails on any, whatever this table allows.
SAME_LAYER: dict[str, tuple[str, ...]] = {
    "_patching.install": ("_seam.errors",),
    "_safety.secrets": ("_safety.joined", "_safety.leaves"),
    "_store.recording": ("_store.cassette",),
    "_store.streamed": ("_store.cassette",),
    "_safety.mask": ("_safety.rules",),
    "_safety.probes": ("_safety.rules",),
    "_timing.virtual": ("_timing.clock",),
    "_timing.readers": ("_timing.virtual",),
    "_timing.timepatch": ("_timing.clock", "_timing.virtual", "_timing.readers"),
    "_session.record": ("_session.record_body",),
    "_answers.model": ("_answers.build*",),
    "_patching.*": ("_plugin.*",),
    "_plugin.*": ("_patching.*",),
    "__main__": ("_cli.*",),
    "__init__": ("faults", "build", "views"),  # public submodules the package may re-export
}

SEAM_MODULES = (
    "_seam.transport",
    "_seam.headers",
    "_seam.cancel",
    "_seam.errors",
    "_seam.bodies",
    "_seam.codings",
    "_seam.stream_kind",
    "_seam.served",
)
HTTP_MODULES = ("_bridges.compat", "_bridges.live", "_bridges.httpx")


@dataclass(frozen=True)
class Import:
    target: str  # "pytest_toolnexus._seam.transport", "httpx", ...
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


def pattern_of(module: str, layers: list[tuple[str, ...]] = LAYERS) -> tuple[int, str] | None:
    """The layer and the pattern ``module`` belongs to: the pattern that names it, else the
    first wildcard it matches, lowest layer first."""
    matches = [
        (layer, pattern)
        for layer, patterns in enumerate(layers)
        for pattern in patterns
        if fnmatch.fnmatchcase(module, pattern)
    ]
    named = [match for match in matches if match[1] == module]
    return (named or matches or [None])[0]


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


# The layers that may import pytest: the plugin's own modules, the command line (migrate's
# collection probe is a pytest plugin) and the public surface.
PYTEST_LAYERS = (layer_of("_plugin.serve"), layer_of("_cli.main"), layer_of("plugin"))


def test_the_package_is_where_the_test_expects_it():
    assert "_seam.transport" in MODULES
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
        if pattern_of(m) is None or layer_of(m) not in PYTEST_LAYERS
    }

    assert not below, f"only the plugin side may import pytest: {below}"


def test_the_seam_modules_import_neither_httpx_nor_httpx2():
    importers = _external_importers({"httpx", "httpx2", "httpcore"})

    assert not {m: where for m, where in importers.items() if m in SEAM_MODULES}


def test_only_compat_live_and_bridge_import_httpx():
    importers = _external_importers({"httpx", "httpx2", "httpcore"})

    assert set(importers) <= set(HTTP_MODULES), (
        f"httpx/httpx2 imported outside {', '.join(HTTP_MODULES)}: "
        f"{ {m: w for m, w in importers.items() if m not in HTTP_MODULES} }"
    )
    assert "_bridges.compat" in importers  # the check sees the imports it is meant to police


# The other HTTP libraries: only their bridges and the patches that install them import one,
# and the loopback server its web server (aiohttp's; docs/serve.md says why) in the modules
# that speak HTTP: the application, the answer to a replayed request, the control API, the
# recording proxy with its client to the upstream, and the WebSocket sessions served and
# recorded.
OTHER_HTTP = {"aiohttp", "multidict", "yarl", "requests", "urllib3", "botocore", "boto3"}
SERVER = (
    *("_serve.app", "_serve.answer", "_serve.control", "_serve.proxy", "_serve.upstream"),
    *("_serve.websocket", "_serve.recorded_websocket", "_serve.sockets"),
)


def test_only_bridges_and_their_patches_import_other_http_libraries():
    importers = _external_importers(OTHER_HTTP)
    outside = {
        m: where
        for m, where in importers.items()
        if not any(fnmatch.fnmatchcase(m, f) for f in ("_bridges.*", "_patching.*", *SERVER))
    }

    assert not outside, f"an HTTP library other than httpx imported outside a bridge: {outside}"
    assert "_bridges.aiohttp" in importers  # the check sees the imports it is meant to police
    assert "_serve.app" in importers


def test_the_store_never_imports_the_recorder_or_the_replayer():
    store = [m for m in MODULES if fnmatch.fnmatchcase(m, "_store.*")]
    bad = {}
    for module in store:
        for imported in imports_of(module, _read(module)):
            target = imported.internal or ""
            if fnmatch.fnmatchcase(target, "_session.*"):
                bad.setdefault(module, []).append(target)

    assert not bad


def import_graph(sources: Mapping[str, str]) -> dict[str, set[str]]:
    """Each module of ``sources`` (name -> source) and the modules of ``sources`` it imports,
    at any depth; importing a package counts as importing its ``__init__``."""
    graph: dict[str, set[str]] = {}
    for module, source in sources.items():
        targets = graph.setdefault(module, set())
        for imported in imports_of(module, source):
            target = imported.internal
            if target is not None and target not in sources and f"{target}.__init__" in sources:
                target = f"{target}.__init__"
            if target in sources and target != module:
                targets.add(target)
    return graph


def _strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """The groups of modules that each reach every other of their group (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def _way_back(graph: Mapping[str, Iterable[str]], start: str, group: set[str]) -> list[str]:
    """The shortest chain of imports from ``start`` back to itself, inside ``group``."""
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                back = [node]
                while back[-1] != start:
                    back.append(previous[back[-1]])
                return [*reversed(back), start]
            if nxt in group and nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"{start} is in a group it cannot get back to")


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One import circle for each group of modules that import each other, directly or
    through others, as the chain from its first module back to it (``["a", "b", "a"]``)."""
    found = []
    for group in _strongly_connected(graph):
        start = min(group)
        if len(group) > 1 or start in graph.get(start, ()):
            found.append(_way_back(graph, start, group))
    return sorted(found)


def test_no_import_circle():
    found = circles(import_graph({module: _read(module) for module in MODULES}))

    assert not found, (
        "import circles (each module imports the next, at some depth):\n"
        + "\n".join(f"  {' -> '.join(circle)}" for circle in found)
        + "\nBreak each: move what both need into a module below both, or let the lower one "
        "take it as an argument (a Protocol), and give every module its place in LAYERS."
    )


# The checker itself: it must see every spelling of an import.


def test_the_checker_finds_imports_at_every_depth_and_spelling():
    source = """
from __future__ import annotations
import json
from typing import TYPE_CHECKING
from . import headers
from .cancel import CancelToken
from pytest_toolnexus._bridges import compat
import pytest_toolnexus._seam.errors
if TYPE_CHECKING:
    from pytest_toolnexus._bridges.live import LiveTransport

def later():
    from pytest_toolnexus._store.cassette import Cassette
    import importlib
    return importlib.import_module("httpx2")

class Lazy:
    def method(self):
        import pytest_toolnexus
        return __import__("msgpack")
"""
    targets = {imported.target for imported in imports_of("_seam.transport", source)}

    assert {
        "json",
        "pytest_toolnexus._bridges.compat",
        "pytest_toolnexus._seam.headers",
        "pytest_toolnexus._seam.cancel",
        "pytest_toolnexus._seam.errors",
        "pytest_toolnexus._bridges.live",
        "pytest_toolnexus._store.cassette",
        "httpx2",
        "pytest_toolnexus",
        "msgpack",
    } <= targets


def test_the_checker_flags_an_upward_import_hidden_in_a_function():
    source = (
        "def f():\n"
        "    from pytest_toolnexus._bridges.live import LiveTransport\n"
        "    from pytest_toolnexus import plugin\n"
    )

    problems = upward_imports("_seam.transport", source)

    assert problems == [
        f"{PACKAGE}/_seam.transport.py:2 imports _bridges.live (layer 4) from layer 2",
        f"{PACKAGE}/_seam.transport.py:3 imports plugin (layer {layer_of('plugin')}) from layer 2",
    ]


def test_the_checker_allows_listed_same_layer_imports_only():
    # a wildcard family imports its own members; a listed pair is allowed one way only
    assert upward_imports("_seam.transport", "from .cancel import CancelToken") == []
    assert upward_imports("_timing.virtual", "from .clock import Clock") == []
    assert upward_imports("_timing.clock", "from .virtual import VirtualClock") == [
        f"{PACKAGE}/_timing.clock.py:1 imports _timing.virtual (layer 3) from layer 3"
    ]
    faults = layer_of("_session.faults")
    assert upward_imports("_session.faults", "from .miss import miss_error") == [
        f"{PACKAGE}/_session.faults.py:1 imports _session.miss (layer {faults}) from layer {faults}"
    ]
    assert upward_imports("_store.records", "from pytest_toolnexus._session import record") == [
        f"{PACKAGE}/_store.records.py:1 imports _session.record "
        f"(layer {layer_of('_session.record')}) from layer {layer_of('_store.records')}"
    ]
    # the cassette sits above the gate it saves through, the records below it
    assert upward_imports("_store.cassette", "from pytest_toolnexus._safety import gate") == []
    assert upward_imports("_safety.gate", "from pytest_toolnexus._store import cassette") == [
        f"{PACKAGE}/_safety.gate.py:1 imports _store.cassette "
        f"(layer {layer_of('_store.cassette')}) from layer {layer_of('_safety.gate')}"
    ]


def test_importing_the_package_from_inside_counts_as_importing_the_top_layer():
    assert upward_imports("_session.replay", "from pytest_toolnexus import Headers") == [
        f"{PACKAGE}/_session.replay.py:1 imports __init__ (layer {layer_of('__init__')}) "
        f"from layer {layer_of('_session.replay')}"
    ]


def test_modules_that_do_not_exist_yet_still_have_a_layer():
    assert pattern_of("_store.sqlite") == (layer_of("_store.write"), "_store.*")
    assert pattern_of("_seam.websocket") == (2, "_seam.*")
    assert pattern_of("_providers.mistral") == (1, "_providers.*")
    assert pattern_of("_cli.record") == (layer_of("_cli.main"), "_cli.*")
    assert pattern_of("_brand_new") is None


def test_a_module_named_in_the_table_takes_that_layer_before_its_folder_wildcard():
    layers = [("a.*",), ("b",), ("a.top",)]

    assert pattern_of("a.top", layers) == (2, "a.top")
    assert pattern_of("a.low", layers) == (0, "a.*")


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
        "from pytest_toolnexus._session.session import _redacted, CassetteSession\n"
        "from pytest_toolnexus._store import cassette\n"
        "cassette._ms(1)\n"
        "cassette.load_cassette\n"
    )

    assert private_names_reached("_cli.import_vcr", source) == [
        f"{PACKAGE}/_cli.import_vcr.py:1 imports the private name _redacted from _session.session",
        f"{PACKAGE}/_cli.import_vcr.py:3 reads the private name _ms of _store.cassette",
    ]


def test_the_circle_check_finds_a_circle_in_a_made_up_graph():
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": set(), "e": {"e"}, "f": {"a"}}

    assert circles(graph) == [["a", "b", "c", "a"], ["e", "e"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_circle_check_reads_a_circle_through_a_function_and_type_checking():
    sources = {
        "_x.one": "def later():\n    from pytest_toolnexus._x.two import Two\n",
        "_x.two": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from pytest_toolnexus._x.three import Three\n"
        ),
        "_x.three": "import pytest_toolnexus._x.one\n",
        "_x.apart": "from pytest_toolnexus._x.one import later\n",
    }

    assert circles(import_graph(sources)) == [["_x.one", "_x.two", "_x.three", "_x.one"]]
