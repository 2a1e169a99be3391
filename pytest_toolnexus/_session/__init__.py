"""Record and replay: the recorder, the replayer, matching, faults, and the session that
composes them for one cassette."""

__all__: list[str] = []
