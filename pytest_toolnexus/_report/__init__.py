"""The timeline data of a cassette and of a test run, and the HTML report drawn from it."""

__all__: list[str] = []
