"""The ``pytest-toolnexus`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._version import __version__

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pytest-toolnexus",
        description="Inspect and maintain pytest-toolnexus cassettes.",
    )
    parser.add_argument("--version", action="version", version=f"pytest-toolnexus {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = _parser()
    parser.parse_args(argv)
    print(f"pytest-toolnexus {__version__}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
