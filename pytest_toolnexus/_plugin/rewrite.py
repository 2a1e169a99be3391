"""Keeping pytest's assertion rewriting off the plugin's own machinery.

pytest rewrites the asserts of every module of a package that a ``pytest11`` entry point names,
this one included: at import it parses each module, rewrites its asserts and compiles it again.
It keeps the result in ``__pycache__`` only where it may write bytecode; where it may not
(``PYTHONDONTWRITEBYTECODE``, common in container images, or a read-only site-packages) every
run pays that again for the hundred modules a cassette's first use imports, about 90 ms on the
benchmark machine (benchmarks/README.md, 6b). The machinery's asserts are internal checks no
user reads, so once pytest is configured the package is taken off pytest's list, and only the
module whose asserts a user does read goes back on it: ``pytest_toolnexus.conformance``, whose
failures should show both sides. The modules the entry point itself imported were rewritten
already and stay so.

The list is pytest's own (``AssertionRewritingHook._must_rewrite``), not public: where it is not
found (another pytest, ``--assert=plain``), nothing changes and the import is as slow as before.
"""

from __future__ import annotations

import pytest

__all__ = ["exempt_from_rewrite"]

_PACKAGE = "pytest_toolnexus"
_REWRITTEN = ("pytest_toolnexus.conformance",)
"""The modules whose asserts a user reads in a failure, rewritten as pytest would."""


def exempt_from_rewrite(config: pytest.Config) -> bool:
    """Take the package off the modules pytest rewrites, but for :data:`_REWRITTEN`; returns
    whether it could."""
    try:
        from _pytest.assertion.rewrite import assertstate_key
    except ImportError:
        return False
    state = config.stash.get(assertstate_key, None)
    hook = getattr(state, "hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    if hook is None or not isinstance(marked, set) or _PACKAGE not in marked:
        return False
    marked.discard(_PACKAGE)
    hook.mark_rewrite(*_REWRITTEN)
    return True
