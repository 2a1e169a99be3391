"""Timing: the clocks, the virtual clock behind Python's time functions, and the timing
assertions."""

__all__: list[str] = []
