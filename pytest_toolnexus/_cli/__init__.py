"""The ``pytest-toolnexus`` command line: check, show, diff, import-vcr and migrate."""

__all__: list[str] = []
