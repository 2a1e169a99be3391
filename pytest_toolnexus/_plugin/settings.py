"""The options of one cassette, layered: ini file, then the ``cassette_config`` fixture, then
the marker, then the command line; and the default cassette file name for a test."""

from __future__ import annotations

import functools
import hashlib
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

from pytest_toolnexus._safety.mask import masked_repr
from pytest_toolnexus._session.faults import Fault
from pytest_toolnexus._session.modes import RecordMode, TimingMode
from pytest_toolnexus._session.parts import MATCH_PRESETS, match_parts
from pytest_toolnexus._store.cassette import meta_problem

from .choices import (
    EXPIRY_POLICIES,
    RECORD_MODES,
    TIMING_MODES,
    UNSERVED_POLICIES,
    UNUSED_POLICIES,
)

__all__ = [
    "EXPIRY_POLICIES",
    "OPTION_NAMES",
    "UNSERVED_POLICIES",
    "UNUSED_POLICIES",
    "CassetteOptions",
    "cassette_file_name",
    "default_cassette_path",
    "layer",
    "name_problem",
]

_AGE_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_AGE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_MAX_NAME: Final = 100
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_RUNS: Final = re.compile(r"_{2,}")
_DIGEST: Final = 10


@masked_repr
@dataclass(frozen=True, slots=True)
class CassetteOptions:
    """Everything a test's cassette can be told. See docs/pytest.md for each option."""

    name: str | None = None
    record: RecordMode = "none"
    timing: TimingMode = "virtual"
    speed: float = 1.0
    ignore_body: tuple[str, ...] = ()
    match_headers: tuple[str, ...] = ()
    match_on: str | tuple[str, ...] = "default"
    ignore_query: tuple[str, ...] = ()
    ignore_headers: tuple[str, ...] = ()
    allow_repeats: bool = False
    allow_hosts: tuple[str, ...] = ()
    unused: str = "warn"
    meta: Mapping[str, Any] = field(default_factory=dict)
    faults: tuple[Fault, ...] = ()
    allow_secrets: tuple[str, ...] = ()
    wire_check: bool = True
    record_on_error: bool = False
    max_age: float | None = None
    on_expired: str = "warn"
    unserved: str = "fail"

    def session_arguments(self) -> dict[str, Any]:
        """The keyword arguments of a ``CassetteSession`` these options set, as the marker and
        ``use_cassette`` both pass them (the record mode is the caller's to decide)."""
        return {
            "timing": self.timing,
            "speed": self.speed,
            "ignore_body": self.ignore_body,
            "match_headers": self.match_headers,
            "match_on": self.match_on,
            "ignore_query": self.ignore_query,
            "ignore_headers": self.ignore_headers,
            "allow_repeats": self.allow_repeats,
            "meta": self.meta,
            "faults": self.faults,
            "allow_secrets": self.allow_secrets,
            "wire_check": self.wire_check,
        }


OPTION_NAMES: Final = tuple(f.name for f in fields(CassetteOptions))


def _strings(value: Any, option: str, where: str) -> tuple[str, ...]:
    if isinstance(value, Mapping):  # iterating it would take its keys and drop its values
        raise TypeError(f"{where}: {option} must be a list of strings, got {value!r}")
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, Iterable) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError(f"{where}: {option} must be a list of strings, got {value!r}")


def parse_age(value: Any, where: str) -> float | None:
    """Seconds from ``max_age``: a number of seconds, or text such as ``"30d"``, ``"12h"``,
    ``"90m"``, ``"2w"``; an empty value means no limit."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise TypeError(f"{where}: max_age must be a duration such as '30d', got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (found := _AGE.match(value)):
        seconds = float(found.group(1)) * _AGE_UNITS[found.group(2) or "s"]
    else:
        raise TypeError(
            f"{where}: max_age must be seconds or a duration such as '30d', '12h', '2w', "
            f"got {value!r}"
        )
    if seconds <= 0:
        raise TypeError(f"{where}: max_age must be more than zero, got {value!r}")
    return seconds


def _match_on(value: Any, where: str) -> str | tuple[str, ...]:
    if isinstance(value, str) and value.strip() in MATCH_PRESETS:
        return value.strip()
    items = _strings(value, "match_on", where)
    try:
        match_parts(items)
    except ValueError as exc:
        raise TypeError(f"{where}: {exc}") from None
    return items


def layer(base: CassetteOptions, values: Mapping[str, Any], where: str) -> CassetteOptions:
    """``base`` with ``values`` laid over it; ``where`` names the layer in error messages."""
    if not values:
        return base  # most layers are empty (no fixture, a bare marker, no options given)
    changes: dict[str, Any] = {}
    for key, value in values.items():
        if key not in OPTION_NAMES:
            known = ", ".join(OPTION_NAMES)
            raise TypeError(f"{where}: unknown cassette option {key!r}; the options are {known}")
        if value is None:
            raise TypeError(
                f"{where}: {key}=None is not a value of {key}; leave the option out to keep "
                "the value of the layer below (see docs/pytest.md, Layering)"
            )
        if key == "record" and value not in RECORD_MODES:
            raise TypeError(
                f"{where}: record={value!r} is not a record mode ({', '.join(RECORD_MODES)})"
            )
        if key == "timing" and value not in TIMING_MODES:
            raise TypeError(
                f"{where}: timing={value!r} is not a timing mode ({', '.join(TIMING_MODES)})"
            )
        if key == "unused" and value not in UNUSED_POLICIES:
            raise TypeError(f"{where}: unused={value!r} is not one of {', '.join(UNUSED_POLICIES)}")
        if key == "unserved" and value not in UNSERVED_POLICIES:
            raise TypeError(
                f"{where}: unserved={value!r} is not one of {', '.join(UNSERVED_POLICIES)}"
            )
        if key == "speed" and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise TypeError(f"{where}: speed must be a positive, finite number, got {value!r}")
        if key == "on_expired" and value not in EXPIRY_POLICIES:
            raise TypeError(
                f"{where}: on_expired={value!r} is not one of {', '.join(EXPIRY_POLICIES)}"
            )
        if key == "max_age":
            value = parse_age(value, where)
            if value is None:
                changes[key] = None
                continue
        if key == "match_on":
            value = _match_on(value, where)
        if key in ("allow_repeats", "wire_check", "record_on_error") and not isinstance(
            value, bool
        ):
            raise TypeError(f"{where}: {key} must be True or False, got {value!r}")
        if key == "name" and (not isinstance(value, str) or not value.strip()):
            raise TypeError(f"{where}: the cassette name must be a non-empty string")
        if key == "name" and (problem := name_problem(value)) is not None:
            raise TypeError(f"{where}: {problem}")
        if key == "meta" and not isinstance(value, Mapping):
            raise TypeError(f"{where}: meta must be a mapping")
        if key == "meta" and (problem := meta_problem(value)) is not None:
            raise TypeError(
                f"{where}: meta cannot be stored in a cassette ({problem}); give it strings, "
                "numbers, booleans, None, bytes, and lists and maps of them"
            )
        if key in (
            "ignore_body",
            "match_headers",
            "ignore_query",
            "ignore_headers",
            "allow_hosts",
            "allow_secrets",
        ):
            value = _strings(value, key, where)
        if key == "faults":
            items = (value,) if isinstance(value, Fault) else tuple(value)
            if not all(isinstance(f, Fault) for f in items):
                raise TypeError(
                    f"{where}: faults must be made with pytest_toolnexus.faults, got {value!r}"
                )
            value = items
        changes[key] = value
    return replace(base, **changes)


def cassette_file_name(test_name: str) -> str:
    """A safe, bounded file name (without extension) for a test or parametrized test id.

    An ASCII name keeps only ``A-Z a-z 0-9 . _ -`` (as it always has, so committed cassettes
    keep their paths). Any other name keeps its Unicode letters and digits, in NFC, and ends in
    a short hash of the exact name, so that distinct names never share a file, even on file
    systems that ignore case or Unicode normalisation.
    """
    if not test_name.isascii():
        return _unicode_file_name(test_name)
    readable = test_name.replace("[", "-").replace("]", "")
    safe = _UNSAFE.sub("_", readable).strip("._-") or "cassette"
    if len(safe) > _MAX_NAME:
        digest = hashlib.sha256(test_name.encode()).hexdigest()[:12]
        safe = f"{safe[: _MAX_NAME - 13]}-{digest}"
    return safe


def _unicode_file_name(test_name: str) -> str:
    readable = unicodedata.normalize("NFC", test_name.replace("[", "-").replace("]", ""))
    kept = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in readable)
    kept = _RUNS.sub("_", kept).strip("._-")
    digest = hashlib.sha256(test_name.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    # Bounded in bytes, which is what file systems count (a CJK character takes three).
    room = _MAX_NAME - _DIGEST - 1
    kept = kept.encode()[:room].decode("utf-8", "ignore").rstrip("._-")
    # Cutting may leave a base character whose combining mark was cut off: normalise again.
    kept = unicodedata.normalize("NFC", kept)
    return f"{kept or 'cassette'}-{digest}"


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a cassette inside the cassette folder, or None when it can."""
    target = Path(name)
    if target.is_absolute() or name.startswith(("/", "\\")):
        return f"the cassette name {name!r} must be a relative path inside the cassette directory"
    if ".." in target.parts:
        return f"the cassette name {name!r} must not go up a folder with '..'"
    if name.startswith("~"):
        return (
            f"the cassette name {name!r} starts with '~', which is not your home folder here "
            "(it would make a folder named '~'): give a path inside the cassette directory"
        )
    if target.name in ("", ".") or not name.strip(" /\\."):
        return (
            f"the cassette name {name!r} names no file; give a name such as 'chat' or 'shared/chat'"
        )
    return None


@functools.lru_cache(maxsize=1024)
def _folder_of(base_dir: Path, rootdir: Path, test_path: Path) -> Path:
    """The cassette folder of a test file (cached: every test of a module asks for it)."""
    try:
        relative = test_path.relative_to(rootdir)
    except ValueError:
        relative = Path(test_path.name)
    return base_dir / relative.with_suffix("")


def default_cassette_path(
    base_dir: Path, rootdir: Path, test_path: Path, test_name: str, name: str | None
) -> Path:
    """``<base_dir>/<test file relative to rootdir, no suffix>/<name>.msgpack``.

    A ``name`` with a slash is taken relative to ``base_dir`` instead; a name is used as given
    (after making it safe), so tests can share a cassette by naming the same one.
    """
    folder = _folder_of(base_dir, rootdir, test_path)
    if name is None:
        return folder / f"{cassette_file_name(test_name)}.msgpack"
    problem = name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    target = Path(name)
    if target.suffix != ".msgpack":
        target = target.with_name(f"{cassette_file_name(target.name)}.msgpack")
    if len(target.parts) > 1:
        return base_dir / target
    return folder / target
