"""The pytest plugin's own modules: settings, hooks, expiry and the vcr marker guard.
``pytest_toolnexus.plugin`` is the entry point."""

__all__: list[str] = []
