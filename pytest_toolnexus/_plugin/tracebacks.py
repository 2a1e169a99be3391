"""The answer first: a failure the plugin raised on purpose is reported at the caller's line.

A cassette miss travels up through the plugin's bridge and session, then through the HTTP
library and the SDK that sent the request (openai, httpx, urllib3 under requests), before it
reaches the test. The plugin's own modules hide their frames (``__tracebackhide__``, see
``_seam/errors.py``), but pytest would still print the innermost library frame in full, about
200 lines for urllib3's ``urlopen``, before the message. For the plugin's expected errors the
report ends instead at the last frame of the project's own code (the test, or a helper or
fixture of the project), so the message comes straight after the line that sent the request.
``--full-trace`` and ``--tb=native`` show every frame, as pytest always does; any other error
is left alone.
"""

from __future__ import annotations

import functools
import sysconfig
from pathlib import Path
from types import TracebackType

import pytest

from pytest_toolnexus._seam.errors import expected_error

__all__ = ["answer_first"]

PACKAGE_DIR = Path(__file__).resolve().parent.parent


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """The folders whose code is not the project's: the standard library, the installed
    packages, and this plugin."""
    paths = sysconfig.get_paths()
    found = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    dirs = {str(Path(p).resolve()) for p in found}
    dirs.add(str(PACKAGE_DIR))
    return tuple(sorted(dirs))


@functools.cache
def _is_project_file(path: str) -> bool:
    if path.startswith("<"):  # <frozen runpy>, <string>: nobody's source to read
        return False
    resolved = str(Path(path).resolve())
    return not any(resolved == d or resolved.startswith(d + "/") for d in _library_dirs())


def answer_first(config: pytest.Config, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """End ``excinfo``'s traceback at the last frame of the project's code, when the error is
    one the plugin raises on purpose, unless ``--full-trace`` or ``--tb=native`` asks for
    every frame.

    The report reads a copy: the exception's own ``__traceback__`` keeps every frame, for
    ``--tb=native``, ``--pdb`` and anything else that walks it.
    """
    if (
        config.getoption("fulltrace", False)
        or config.getoption("tbstyle", "auto") == "native"
        or not expected_error(excinfo)
    ):
        return
    chain: list[TracebackType] = []
    tb: TracebackType | None = excinfo.tb
    while tb is not None:
        chain.append(tb)
        tb = tb.tb_next
    last = None
    for index, entry in enumerate(chain):
        if _is_project_file(entry.tb_frame.f_code.co_filename):
            last = index
    if last is None or last == len(chain) - 1:
        return
    # pytest cuts a test's traceback by walking the raw entries from the test's frame on, so
    # a shortened list of its entries would grow back; a shortened copy of the chain does not.
    copy: TracebackType | None = None
    for entry in reversed(chain[: last + 1]):
        copy = TracebackType(copy, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    excinfo.traceback = type(excinfo.traceback)(copy)  # type: ignore[arg-type]
