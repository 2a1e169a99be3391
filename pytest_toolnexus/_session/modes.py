"""The record and timing modes a session takes, apart from the session so that the plugin can
offer them as command-line choices without importing it."""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = ["RECORD_MODES", "TIMING_MODES", "RecordMode", "TimingMode"]

RecordMode = Literal["none", "once", "new", "all"]
RECORD_MODES: Final = get_args(RecordMode)
TimingMode = Literal["virtual", "real", "instant"]
TIMING_MODES: Final = get_args(TimingMode)
