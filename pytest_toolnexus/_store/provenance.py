"""Which client libraries made a recording: the versions a cassette's ``meta`` keeps, so a
reader can tell an old SDK's requests from today's."""

from __future__ import annotations

import sys
from importlib import metadata
from typing import Final

__all__ = ["CLIENT_DISTRIBUTIONS", "client_versions"]

CLIENT_DISTRIBUTIONS: Final = (
    ("httpx", "httpx"),
    ("httpx2", "httpx2"),
    ("httpcore", "httpcore"),
    ("aiohttp", "aiohttp"),
    ("requests", "requests"),
    ("urllib3", "urllib3"),
    ("botocore", "botocore"),
    ("openai", "openai"),
    ("anthropic", "anthropic"),
    ("google.genai", "google-genai"),
    ("ollama", "ollama"),
    ("mistralai", "mistralai"),
    ("groq", "groq"),
    ("cohere", "cohere"),
    ("litellm", "litellm"),
)
"""(module, distribution) pairs: a library counts once its module is imported."""


def client_versions() -> dict[str, str]:
    """``{distribution: version}`` for each client library imported in this process."""
    found: dict[str, str] = {}
    for module, distribution in CLIENT_DISTRIBUTIONS:
        if module not in sys.modules:
            continue
        try:
            found[distribution] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return found
