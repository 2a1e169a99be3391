"""The loopback server: ``pytest-toolnexus serve`` replays cassettes to clients in any
language, over HTTP, with the session's own matching (docs/serve.md)."""

__all__: list[str] = []
