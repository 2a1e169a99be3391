"""Realtime: WebSocket sessions recorded and replayed through a cassette session, with their
timing on the session's clock (issue 21; docs/cassette-format.md, "websocket")."""

__all__: list[str] = []
