"""Reading a vcrpy cassette file into its raw interactions: YAML (vcrpy's default serializer)
or JSON (its ``serializer="json"``), either one gzip-compressed (``.yaml.gz``, ``.json.gz``,
as langchain's ``YamlGzipSerializer`` writes them), and Ruby VCR's ``http_interactions``; or a
response-only fixture (``{status, headers, body}``), recognised here and converted only for a
request the user names.
"""

from __future__ import annotations

import gzip
import importlib
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = [
    "CASSETTE_SUFFIXES",
    "FIXTURE_KEYS",
    "VcrImportError",
    "VcrSource",
    "default_dest",
    "read_vcr",
]

CASSETTE_SUFFIXES: Final = (".yaml", ".yml", ".json")
"""The suffixes of the files a folder is searched for (each also with ``.gz``)."""

FIXTURE_KEYS: Final = frozenset({"status", "headers", "body"})
"""The keys of a response-only fixture: all three, and no other."""

_GZIP_MAGIC: Final = b"\x1f\x8b"
# Top-level keys besides the interactions. ``recorded_with`` is Ruby VCR's tool version.
_TOP_KEYS: Final = frozenset({"interactions", "http_interactions", "version", "recorded_with"})


class VcrImportError(Exception):
    """The source file cannot be read as a vcrpy cassette, or cannot be converted."""


@dataclass(frozen=True, slots=True)
class VcrSource:
    """What a file holds: its raw interactions and the name of its flavour, or, for a
    response-only fixture, that one response map (and no interactions)."""

    interactions: list[Any]
    flavour: str
    fixture: Mapping[str, Any] | None = None


def _base_name(source: Path) -> Path:
    """``chat.yaml.gz`` as ``chat.yaml``; other names as they are."""
    return source.with_suffix("") if source.suffix.lower() == ".gz" else source


def default_dest(source: Path) -> Path:
    """``chat.yaml`` (or ``chat.yaml.gz``, ``chat.json``) becomes ``chat.msgpack``, beside it."""
    return _base_name(source).with_suffix(".msgpack")


def _unreadable(source: Path, what: str, exc: Exception) -> VcrImportError:
    detail = " ".join(str(exc).split())[:300]
    return VcrImportError(f"{source} is not a {what} file vcrpy could read: {detail}")


def _yaml_load(text: bytes, source: Path) -> Any:
    """The YAML document, read with PyYAML's safe loader. A file with the Python tags older
    vcrpy versions wrote (``!!python/tuple``, a ``BytesIO`` request body) is read again with
    vcrpy's own safe loader, when vcrpy is installed; it constructs those few tags and no
    others. (vcrpy is not tried first: importing it costs a third of a second.)"""
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError as exc:
        raise VcrImportError(
            "import-vcr needs PyYAML to read vcrpy cassettes: pip install pyyaml (or vcrpy)"
        ) from exc
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.constructor.ConstructorError as exc:
        problem: Exception = exc
    except yaml.YAMLError as exc:
        raise _unreadable(source, "YAML", exc) from exc
    try:
        serializer: Any = importlib.import_module("vcr.serializers.yamlserializer")
    except ImportError:
        raise _unreadable(source, "YAML", problem) from problem
    try:
        return serializer.deserialize(text)
    except yaml.YAMLError as exc:
        raise _unreadable(source, "YAML", exc) from exc


def _document(data: bytes, source: Path) -> tuple[Any, str]:
    """The parsed document, and how it was stored when not as plain YAML (``, JSON``,
    ``, gzip``)."""
    gzipped = data.startswith(_GZIP_MAGIC)
    if gzipped:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise VcrImportError(f"{source} starts as gzip but does not decompress: {exc}") from exc
    packing = ", gzip" if gzipped else ""
    as_json = _base_name(source).suffix.lower() == ".json"
    if as_json or data.lstrip()[:1] == b"{":
        try:
            return json.loads(data), f", JSON{packing}"
        except (ValueError, UnicodeDecodeError) as exc:
            if as_json:
                raise _unreadable(source, "JSON", exc) from exc
    return _yaml_load(data, source), packing


def read_vcr(source: Path) -> VcrSource:
    """The raw interactions of a vcrpy (or Ruby VCR) cassette and the name of its flavour, or
    the response of a response-only fixture."""
    try:
        data = source.read_bytes()
    except FileNotFoundError as exc:
        raise VcrImportError(f"{source} does not exist") from exc
    except OSError as exc:
        raise VcrImportError(f"cannot read {source}: {exc.strerror or exc}") from exc
    doc, storage = _document(data, source)
    if isinstance(doc, list) and doc and isinstance(doc[0], Mapping) and "request" in doc[0]:
        raise VcrImportError(
            f"{source} is a cassette from vcrpy before 1.0 (no format version); run vcrpy's "
            "migration script (python -m vcr.migration) on it first"
        )
    if not isinstance(doc, Mapping):
        raise VcrImportError(
            f"{source} is not a vcrpy cassette: it is not a map with 'interactions'"
        )
    if (
        "interactions" not in doc
        and "http_interactions" not in doc
        and ("status" in doc or "body" in doc)
    ):
        return _fixture(doc, source, storage)
    unknown = sorted(str(key) for key in doc if key not in _TOP_KEYS)
    if "interactions" in doc:
        version = doc.get("version", 1)
        if version != 1:
            raise VcrImportError(
                f"{source} is a vcrpy cassette of format version {version!r}; import-vcr "
                "reads version 1"
            )
        raw, flavour = doc["interactions"], f"vcrpy format 1{storage}"
    elif "http_interactions" in doc:
        raw, flavour = doc["http_interactions"], f"ruby vcr{storage}"
    else:
        raise VcrImportError(f"{source} is not a vcrpy cassette: it has no 'interactions' list")
    if unknown:
        raise VcrImportError(
            f"{source} has the top-level field(s) {', '.join(map(repr, unknown))}, which "
            "import-vcr does not understand (a vcrpy cassette has 'interactions' and 'version')"
        )
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise VcrImportError(f"{source} is not a vcrpy cassette: 'interactions' is not a list")
    return VcrSource(raw, flavour)


def _fixture(doc: Mapping[Any, Any], source: Path, storage: str) -> VcrSource:
    """A response-only fixture: exactly ``status``, ``headers`` and ``body``."""
    unknown = sorted(str(key) for key in doc if key not in FIXTURE_KEYS)
    missing = sorted(FIXTURE_KEYS - set(doc))
    if unknown or missing:
        problems = []
        if unknown:
            problems.append(
                f"has the field(s) {', '.join(map(repr, unknown))}, which import-vcr does not "
                "understand"
            )
        if missing:
            problems.append(f"lacks {', '.join(map(repr, missing))}")
        raise VcrImportError(
            f"{source} is neither a vcrpy cassette nor a response-only fixture: it has no "
            f"'interactions', and as a fixture ({{status, headers, body}}, exactly those) it "
            f"{' and '.join(problems)}"
        )
    return VcrSource([], f"response fixture{storage}", fixture=doc)
