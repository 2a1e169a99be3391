"""Safety: what a secret looks like, redaction and the secret scan before a write, and the
network tripwire."""

__all__: list[str] = []
