"""Rewrite one Python file from pytest-recording to pytest-toolnexus, touching only the text that
changes: markers, the ``vcr_config`` fixture, the fixtures that only pytest-recording reads, and
tests that take the ``vcr`` fixture.

The file is parsed with ``ast``; each edit replaces the exact span of one node (a marker's
name, one keyword, one dict entry), so comments, quotes and layout elsewhere are kept.

Why one module of over 400 lines: it is one rewrite of one file; every kind of edit (markers,
``vcr_config``, fixtures, ``vcr`` arguments) works on the same span machinery and the same
parsed tree.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from .migrate_options import Mapped, map_option

__all__ = ["Finding", "Rewrite", "rewrite_source"]

_CASSETTE_ATTRS: Final = {
    "play_count": "",
    "all_played": "",
    "requests": "cassette.requests holds SentRequest objects (method, url, body), not vcrpy "
    "Requests",
}
_DROPPED_MARKERS: Final = {
    "default_cassette": "the cassette is converted to the file this test's own cassette uses",
    "block_network": "the network tripwire is armed whenever a cassette only replays; let "
    "hosts through with allow_hosts",
    "allowed_hosts": "let hosts through with allow_hosts on @pytest.mark.cassette",
}
_DROPPED_FIXTURES: Final = {
    "vcr_cassette_dir": "its cassettes were converted to the default pytest-toolnexus paths "
    "(--cassette-dir sets the folder)",
    "default_cassette_name": "its cassettes were converted to the default pytest-toolnexus paths",
}
_NEWLINES: Final = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of the report: a change worth knowing about, or something left untranslated."""

    line: int
    text: str
    untranslated: bool = False


@dataclass
class Rewrite:
    """A file's new text and what the rewrite found on the way."""

    text: str
    findings: list[Finding] = field(default_factory=list)
    markers: int = 0
    fixtures: int = 0
    defines_cassette_config: bool = False
    placed: set[str] = field(default_factory=set)
    kept: set[str] = field(default_factory=set)
    """The tests (qualified names) asked to be kept that were: left untouched, on their own
    ``vcr`` decorator."""


@dataclass(frozen=True, slots=True)
class _Edit:
    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class _Item:
    """One entry of an argument list or dict: its span, its key's span, and its value."""

    start: int
    end: int
    key: str | None
    key_span: tuple[int, int] | None
    value: ast.expr


class _Source:
    """Character offsets for ast positions (whose columns count UTF-8 bytes)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        for match in _NEWLINES.finditer(text):
            self.starts.append(match.end())

    def at(self, line: int, col: int) -> int:
        begin = self.starts[line - 1]
        end = self.starts[line] if line < len(self.starts) else len(self.text)
        return begin + len(self.text[begin:end].encode()[:col].decode(errors="ignore"))

    def start(self, node: ast.AST) -> int:
        return self.at(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.at(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def segment(self, node: ast.AST) -> str:
        return self.text[self.start(node) : self.end(node)]

    def line_start(self, offset: int) -> int:
        return self.text.rfind("\n", 0, offset) + 1

    def line_end(self, offset: int) -> int:
        """The offset just after the newline ending the line that holds ``offset``."""
        found = self.text.find("\n", offset)
        return len(self.text) if found < 0 else found + 1

    def blank_before(self, offset: int) -> bool:
        return not self.text[self.line_start(offset) : offset].strip()

    def lines(self, first: int, last: int) -> tuple[int, int]:
        """The span of whole lines ``first`` to ``last`` (1-based), newline included."""
        begin = self.starts[first - 1]
        end = self.starts[last] if last < len(self.starts) else len(self.text)
        return begin, end


def marker_name(node: ast.expr) -> str | None:
    """``vcr`` for ``pytest.mark.vcr`` or ``mark.vcr``; None for anything else."""
    if not isinstance(node, ast.Attribute):
        return None
    owner = node.value
    if (
        isinstance(owner, ast.Attribute)
        and owner.attr == "mark"
        and isinstance(owner.value, ast.Name)
        and owner.value.id == "pytest"
    ):
        return node.attr
    if isinstance(owner, ast.Name) and owner.id == "mark":
        return node.attr
    return None


def _is_fixture(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "fixture":
            return True
    return False


def _own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes inside a function, not descending into nested functions or classes."""
    for child in ast.iter_child_nodes(node):
        yield child
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield from _own_nodes(child)


class _Rewriter:
    def __init__(
        self,
        text: str,
        names: Mapping[str, str],
        add_match_on: bool,
        keep: Collection[str] = (),
    ) -> None:
        self.src = _Source(text)
        self.names = names
        self.keep = keep
        self.add_match_on = add_match_on
        self.edits: list[_Edit] = []
        self.result = Rewrite(text)
        self.handled: set[int] = set()

    # -- reporting --------------------------------------------------------------------------

    def note(self, node: ast.AST, text: str, untranslated: bool = False) -> None:
        line = getattr(node, "lineno", 1)
        self.result.findings.append(Finding(line, text, untranslated))

    def mapped(self, node: ast.AST, where: str, mapped: Mapped) -> None:
        if mapped.note:
            self.note(node, f"{where}: {mapped.note}", mapped.untranslated)

    # -- argument lists and dicts -----------------------------------------------------------

    def _edit_items(
        self,
        items: Sequence[_Item],
        interior: tuple[int, int],
        where: str,
        *,
        in_call: bool,
        leading: str | None = None,
        drop_positional: bool = False,
        add: Sequence[tuple[str, str]] = (),
    ) -> bool:
        """Map each keyed item, drop positional ones when asked, prepend ``leading`` and
        append ``add``; returns True when nothing is left (the caller may drop the brackets)."""
        text = self.src.text
        kept: list[int] = []
        changes: dict[int, str | None] = {}  # index -> replacement text, None to delete
        first_key: dict[str, int] = {}
        values: dict[int, tuple[str, str]] = {}
        positional = [i for i, item in enumerate(items) if item.key is None]
        for index in positional:
            if leading is not None and index == positional[0]:
                changes[index] = leading
                kept.append(index)
            elif drop_positional:
                changes[index] = None
            else:
                kept.append(index)
        for index, item in enumerate(items):
            if item.key is None:
                continue
            if item.key_span is None:  # a ``**spread``
                kept.append(index)
                self.note(
                    item.value,
                    f"{where}: **{self.src.segment(item.value)} is spread in; map its keys "
                    "by hand (docs/migrating.md)",
                    untranslated=True,
                )
                continue
            mapped = map_option(item.key, item.value, self.src.segment(item.value))
            self.mapped(item.value, where, mapped)
            if not mapped.pairs:
                changes[index] = None
                continue
            key, value = mapped.pairs[0]
            if key in first_key:
                # Two vcrpy options that both become allow_hosts: one list.
                other = first_key[key]
                merged = _merge_lists(values[other][1], value)
                values[other] = (key, merged)
                changes[other] = _pair(key, merged, in_call)
                changes[index] = None
                continue
            first_key[key] = index
            values[index] = (key, value)
            kept.append(index)
            if key != item.key or value != self.src.segment(item.value):
                changes[index] = _pair(key, value, in_call)
        kept.sort()
        new_items = [_pair(k, v, in_call) for k, v in add]
        if leading is not None and not positional:
            if kept:
                self.edits.append(_Edit(items[kept[0]].start, items[kept[0]].start, leading + ", "))
            else:
                new_items.insert(0, leading)
        if not kept and not new_items:
            return True
        if not kept:
            self.edits.append(_Edit(*interior, ", ".join(new_items)))
            return False
        last_kept = kept[-1]
        tail_start = items[last_kept].end
        tail_end = tail_start
        for index, item in enumerate(items):
            replacement = changes.get(index, "keep")
            if replacement == "keep":
                continue
            if replacement is not None:
                self.edits.append(_Edit(item.start, item.end, replacement))
            elif index > last_kept:
                tail_end = max(tail_end, item.end)
            else:
                self.edits.append(self._delete_forward(item))
        appended = ""
        if new_items:
            multiline = "\n" in text[items[0].start - 1 : interior[1]] and self.src.blank_before(
                items[0].start
            )
            if multiline:
                indent = text[self.src.line_start(items[0].start) : items[0].start]
                after = tail_start
                while after < interior[1] and text[after] in " \t":
                    after += 1
                if tail_end == tail_start and text[after : after + 1] == ",":
                    # After the trailing comma and any comment on that line.
                    at = self.src.line_end(after)
                    lines = "".join(f"{indent}{item},\n" for item in new_items)
                    self.edits.append(_Edit(at, at, lines))
                    new_items = []
                appended = "".join(f",\n{indent}{item}" for item in new_items)
            else:
                appended = "".join(f", {item}" for item in new_items)
        if tail_end != tail_start or appended:
            self.edits.append(_Edit(tail_start, tail_end, appended))
        return False

    def _delete_forward(self, item: _Item) -> _Edit:
        """Delete an item that has a comma after it; whole lines when it sits on its own."""
        text = self.src.text
        end = item.end
        while end < len(text) and text[end] in " \t\r\n":
            end += 1
        if end < len(text) and text[end] == ",":
            end += 1
        rest = self.src.line_end(end)
        if self.src.blank_before(item.start) and not text[end:rest].strip():
            return _Edit(self.src.line_start(item.start), rest, "")
        while end < len(text) and text[end] in " \t":
            end += 1
        return _Edit(item.start, end, "")

    # -- markers ----------------------------------------------------------------------------

    def marker(self, node: ast.expr, name: str | None) -> None:
        """Rewrite one ``pytest.mark.vcr`` (bare or called); ``name`` goes on it as the
        cassette name."""
        call = node if isinstance(node, ast.Call) else None
        func = call.func if call is not None else node
        self.handled.add(id(func))
        if call is not None:
            self.handled.add(id(call))
        end = self.src.end(func)
        self.edits.append(_Edit(end - len("vcr"), end, "cassette"))
        self.result.markers += 1
        leading = _quote(name) if name is not None else None
        if call is None:
            if leading is not None:
                self.edits.append(_Edit(end, end, f"({leading})"))
            return
        items = [_Item(self.src.start(a), self.src.end(a), None, None, a) for a in call.args]
        for keyword in call.keywords:
            start = self.src.start(keyword)
            key_span = None if keyword.arg is None else (start, start + len(keyword.arg))
            items.append(
                _Item(start, self.src.end(keyword), keyword.arg or "", key_span, keyword.value)
            )
        items.sort(key=lambda item: item.start)
        names = [self.src.segment(a) for a in call.args]
        if names and name is None:
            self.note(
                call,
                f"@pytest.mark.vcr({', '.join(names)}): these cassettes were merged into each "
                "test's own cassette",
            )
        empty = self._edit_items(
            items,
            (end + 1, self.src.end(call) - 1),
            "@pytest.mark.vcr",
            in_call=True,
            leading=leading,
            drop_positional=True,
        )
        if empty:
            self.edits.append(_Edit(end, self.src.end(call), ""))

    def drop_decorator(self, decorator: ast.expr, name: str) -> None:
        self.handled.add(id(decorator))
        if isinstance(decorator, ast.Call):
            self.handled.add(id(decorator.func))
        begin, end = self.src.lines(decorator.lineno, decorator.end_lineno or decorator.lineno)
        line = self.src.text[begin:end].strip()
        if line.startswith("@") and line[1:].strip() == self.src.segment(decorator):
            self.edits.append(_Edit(begin, end, ""))
            self.note(decorator, f"@pytest.mark.{name} removed: {_DROPPED_MARKERS[name]}")
        else:
            self.note(
                decorator,
                f"@pytest.mark.{name}: remove it by hand; {_DROPPED_MARKERS[name]}",
                untranslated=True,
            )

    def decorators(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, qualname: str
    ) -> None:
        vcr = [d for d in node.decorator_list if marker_name(_callee(d)) == "vcr"]
        for decorator in node.decorator_list:
            kind = marker_name(_callee(decorator))
            if kind in _DROPPED_MARKERS:
                self.drop_decorator(decorator, kind)
        is_function = not isinstance(node, ast.ClassDef)
        name = self.names.get(qualname) if is_function else None
        for decorator in vcr:
            # The decorator nearest the def is the marker pytest finds first.
            self.marker(decorator, name if decorator is vcr[-1] else None)
        if vcr and name is not None:
            self.result.placed.add(qualname)

    # -- fixtures and functions -------------------------------------------------------------

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str) -> None:
        if qualname in self.keep:
            # Left on pytest-recording: its markers, fixtures and arguments stay as they are.
            if any(marker_name(_callee(d)) == "vcr" for d in node.decorator_list):
                self.result.kept.add(qualname)
            for child in ast.walk(node):
                self.handled.add(id(child))
            return
        self.decorators(node, qualname)
        if node.name == "cassette_config":
            self.result.defines_cassette_config = True
        if node.name == "vcr_config" and _is_fixture(node):
            self.vcr_config(node)
        elif node.name in _DROPPED_FIXTURES and _is_fixture(node):
            self.drop_function(node)
        elif node.name == "pytest_recording_configure":
            self.note(
                node,
                "pytest_recording_configure configures vcrpy (custom matchers, persisters); "
                "decide matches in a pytest_toolnexus_match hook instead",
                untranslated=True,
            )
        arguments = node.args
        params = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        takes_vcr = [a for a in params if a.arg == "vcr"]
        if takes_vcr:
            self.vcr_fixture(node, takes_vcr[0])

    def vcr_config(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        begin = self.src.at(node.lineno, node.col_offset)
        found = re.compile(r"def\s+(vcr_config)\b").search(self.src.text, begin)
        assert found is not None
        self.edits.append(_Edit(found.start(1), found.end(1), "cassette_config"))
        self.result.fixtures += 1
        self.result.defines_cassette_config = True
        self.note(node, "vcr_config renamed cassette_config")
        returns = [n for n in _own_nodes(node) if isinstance(n, ast.Return)]
        for ret in returns:
            if not isinstance(ret.value, ast.Dict):
                extra = (
                    ', and add "match_on": "vcrpy" to what it returns' if self.add_match_on else ""
                )
                self.note(
                    ret,
                    "cassette_config returns something other than a dict literal; map its keys "
                    f"by hand{extra} (docs/migrating.md)",
                    untranslated=True,
                )
                continue
            self.config_dict(ret.value)

    def config_dict(self, node: ast.Dict) -> None:
        items = []
        has_match_on = False
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                items.append(
                    _Item(self.src.start(value) - 2, self.src.end(value), "**", None, value)
                )
                continue
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                self.note(key, "vcr_config: a key that is not a string; map it by hand", True)
                continue
            has_match_on = has_match_on or key.value == "match_on"
            items.append(
                _Item(
                    self.src.start(key),
                    self.src.end(value),
                    key.value,
                    (self.src.start(key), self.src.end(key)),
                    value,
                )
            )
        add: list[tuple[str, str]] = []
        if self.add_match_on and not has_match_on:
            add.append(("match_on", '"vcrpy"'))
            self.note(
                node,
                'cassette_config: "match_on": "vcrpy" added, so requests match as vcrpy '
                "matched them (method, scheme, host, port, path, query; never the body)",
            )
        interior = (self.src.start(node) + 1, self.src.end(node) - 1)
        if self._edit_items(items, interior, "vcr_config", in_call=False, add=add) and items:
            self.edits.append(_Edit(*interior, ""))

    def drop_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        begin, end = self.src.lines(first, node.end_lineno or node.lineno)
        # Take the blank lines before it too, so the file keeps its spacing.
        while begin > 0:
            previous = self.src.line_start(begin - 1)
            if self.src.text[previous:begin].strip():
                break
            begin = previous
        self.edits.append(_Edit(begin, end, ""))
        self.result.fixtures += 1
        self.note(
            node,
            f"the {node.name} fixture removed: {_DROPPED_FIXTURES[node.name]}; an import only "
            "it used is left for your linter",
        )

    def vcr_fixture(self, node: ast.FunctionDef | ast.AsyncFunctionDef, arg: ast.arg) -> None:
        start = self.src.start(arg)
        self.edits.append(_Edit(start, start + len("vcr"), "cassette"))
        self.result.fixtures += 1
        self.note(arg, f"{node.name} takes the cassette fixture instead of vcr")
        for child in _own_nodes(node):
            if isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name):
                if child.value.id != "vcr":
                    continue
                if child.attr not in _CASSETTE_ATTRS:
                    self.note(
                        child,
                        f"vcr.{child.attr}: the cassette fixture has no {child.attr} (see the "
                        "cassette fixture in docs/pytest.md#fixtures)",
                        untranslated=True,
                    )
                elif _CASSETTE_ATTRS[child.attr]:
                    self.note(child, f"vcr.{child.attr}: {_CASSETTE_ATTRS[child.attr]}")
            if isinstance(child, ast.Name) and child.id == "vcr":
                start = self.src.start(child)
                self.edits.append(_Edit(start, start + len("vcr"), "cassette"))

    # -- the walk ---------------------------------------------------------------------------

    def walk(self, body: Sequence[ast.stmt], scope: Sequence[str]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                qualname = ".".join([*scope, node.name])
                self.decorators(node, qualname)
                self.walk(node.body, [*scope, node.name])
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.function(node, ".".join([*scope, node.name]))

    def rest(self, tree: ast.Module) -> None:
        """Markers outside decorators (``pytestmark``, ``pytest.param(marks=...)``) and imports
        of vcrpy."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                for module in modules:
                    if module.split(".")[0] in ("vcr", "pytest_recording"):
                        self.note(
                            node,
                            f"imports {module}; remove it once nothing here uses vcrpy",
                            untranslated=True,
                        )
            if id(node) in self.handled:
                continue
            if isinstance(node, ast.Call | ast.Attribute) and marker_name(_callee(node)) == "vcr":
                self.marker(node, None)
            elif isinstance(node, ast.Call | ast.Attribute):
                kind = marker_name(node.func if isinstance(node, ast.Call) else node)
                if kind in _DROPPED_MARKERS and id(node) not in self.handled:
                    if isinstance(node, ast.Call):
                        self.handled.add(id(node.func))
                    self.note(
                        node,
                        f"pytest.mark.{kind}: remove it by hand; {_DROPPED_MARKERS[kind]}",
                        untranslated=True,
                    )

    def apply(self) -> str:
        text = self.src.text
        edits = sorted(self.edits, key=lambda e: (e.start, e.end))
        for before, after in itertools.pairwise(edits):
            if after.start < before.end:
                raise AssertionError(f"overlapping edits {before} and {after}")
        for edit in reversed(edits):
            text = text[: edit.start] + edit.text + text[edit.end :]
        return text


def _callee(node: ast.expr) -> ast.expr:
    return node.func if isinstance(node, ast.Call) else node


def _quote(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _pair(key: str, value: str, in_call: bool) -> str:
    return f"{key}={value}" if in_call else f"{_quote(key)}: {value}"


def _merge_lists(first: str, second: str) -> str:
    a, b = ast.literal_eval(first), ast.literal_eval(second)
    merged = [*a, *(h for h in b if h not in a)]
    return "[" + ", ".join(_quote(h) for h in merged) + "]"


def rewrite_source(
    text: str,
    names: Mapping[str, str],
    *,
    add_match_on: bool = True,
    keep: Collection[str] = (),
) -> Rewrite:
    """The pytest-toolnexus version of ``text``.

    ``names`` maps a test's qualified name (``Class.test``) to the cassette name its nearest
    ``vcr`` marker must carry. Every ``vcr_config`` dict without ``match_on`` gets
    ``"match_on": "vcrpy"`` when ``add_match_on``. The test functions named in ``keep`` are
    left as they are (``Rewrite.kept`` says which had a ``vcr`` decorator to stay on). Raises
    SyntaxError for unparsable text.
    """
    tree = ast.parse(text)
    rewriter = _Rewriter(text, names, add_match_on, keep)
    rewriter.walk(tree.body, [])
    rewriter.rest(tree)
    result = rewriter.result
    result.text = rewriter.apply()
    result.findings.sort(key=lambda f: f.line)
    return result
