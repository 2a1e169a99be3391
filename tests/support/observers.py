"""An observer for tests that use the recorder on its own: it keeps what the recorder hands over."""

from __future__ import annotations

from pytest_toolnexus._session.observer import NoObserver
from pytest_toolnexus._store.cassette import Interaction


class Kept(NoObserver):
    """Appends each recorded interaction to ``interactions`` and each sentence about a stream
    the recorder could not parse to ``problems`` (lists the test reads afterwards)."""

    def __init__(
        self,
        interactions: list[Interaction] | None = None,
        problems: list[str] | None = None,
    ) -> None:
        self.interactions = [] if interactions is None else interactions
        self.problems = [] if problems is None else problems

    def recorded(self, interaction: Interaction) -> None:
        self.interactions.append(interaction)

    def problem(self, text: str) -> None:
        self.problems.append(text)
