"""Cassettes nobody could record: provider streams, answers and errors, with a cadence.

    from pytest_toolnexus import build

    build.build_cassette(path, [
        build.error(429, retry_after="1"),
        build.openai_chat("Hello!", cadence=build.Cadence(ttft=0.3, gap=0.02, jitter=0.005)),
    ])

Every function returns one interaction that the official SDK parses into the text and tool
calls it was built from. Built requests match any body at the provider's URL; the realtime
sessions (``openai_realtime``, ``gemini_live``) match the client's frames by their type.
"""

from ._answers.build import (
    ANTHROPIC_URL,
    GEMINI_BASE,
    GEMINI_LIVE_URL,
    OLLAMA_URL,
    OPENAI_CHAT_URL,
    OPENAI_REALTIME_URL,
    OPENAI_RESPONSES_URL,
    Cadence,
    RealtimeTurn,
    ToolCall,
    anthropic_messages,
    build_cassette,
    error,
    gemini,
    gemini_live,
    ollama_chat,
    openai_chat,
    openai_realtime,
    openai_responses,
    split_text,
)

__all__ = [
    "ANTHROPIC_URL",
    "GEMINI_BASE",
    "GEMINI_LIVE_URL",
    "OLLAMA_URL",
    "OPENAI_CHAT_URL",
    "OPENAI_REALTIME_URL",
    "OPENAI_RESPONSES_URL",
    "Cadence",
    "RealtimeTurn",
    "ToolCall",
    "anthropic_messages",
    "build_cassette",
    "error",
    "gemini",
    "gemini_live",
    "ollama_chat",
    "openai_chat",
    "openai_realtime",
    "openai_responses",
    "split_text",
]
