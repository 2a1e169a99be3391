"""``import-vcr`` over many files in one process: several SRC arguments, folders searched for
vcrpy cassettes, and an ``--out`` folder that keeps each file's path relative to its folder."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from .import_vcr import AnsweredRequest, write_one
from .import_vcr_read import CASSETTE_SUFFIXES, default_dest

__all__ = ["import_many", "is_cassette_name", "sources_of"]


def is_cassette_name(path: Path) -> bool:
    """Whether a file's name is one a vcrpy cassette has: ``.yaml``, ``.yml``, ``.json``, each
    also gzip-compressed (``.yaml.gz``)."""
    name = path.name.lower()
    return name.removesuffix(".gz").endswith(CASSETTE_SUFFIXES)


def sources_of(path: Path) -> Iterator[tuple[Path, Path]]:
    """Each cassette under ``path`` with its path relative to the folder it was found in (a
    file named directly is relative to its own folder)."""
    if not path.is_dir():
        yield path, Path(path.name)
        return
    for found in sorted(path.rglob("*")):
        if found.is_file() and is_cassette_name(found):
            yield found, found.relative_to(path)


def import_many(
    paths: Sequence[Path],
    out_dir: Path | None,
    *,
    force: bool,
    allow_secrets: Sequence[str],
    out: TextIO,
    err: TextIO,
    request: AnsweredRequest | None = None,
) -> int:
    """Convert every cassette named or found under ``paths``, each on its own: one that fails
    is reported and leaves no file, and the others are still converted. Each is written to
    ``out_dir`` at its relative path, or beside its source. ``request`` is the request each
    response-only fixture among them answers (vcrpy cassettes ignore it). Returns 0 when
    every file was written, 1 when any was not, 2 when nothing was found to convert."""
    jobs = [job for path in paths for job in sources_of(path)]
    if not jobs:
        names = ", ".join(str(p) for p in paths)
        print(f"error: no vcrpy cassettes (*.yaml, *.yml, *.json, *.gz) under {names}", file=err)
        return 2
    failed: list[Path] = []
    for source, relative in jobs:
        target = default_dest(source if out_dir is None else out_dir / relative)
        code = write_one(
            source,
            target,
            force=force,
            allow_secrets=allow_secrets,
            out=out,
            err=err,
            summaries=False,
            request=request,
        )
        if code:
            failed.append(source)
            print(f"FAIL {source} (nothing written)", file=out)
    written = len(jobs) - len(failed)
    print(f"{len(jobs)} file(s): {written} written, {len(failed)} failed", file=out)
    return 1 if failed else 0
