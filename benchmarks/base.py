"""What every contender implements, and the settings they all share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

MAX_TOKENS = 2000
"""The context budget every contender is configured with."""
SESSION_ID = "bench-session"
"""The one conversation every contender stores."""
SUMMARY_TEXT = (
    "Summary: the user and the assistant discussed memory tiers, token budgets and "
    "the schema of the session so far."
)
"""The fixed answer of the fake summary models."""

ContextT = TypeVar("ContextT")


class Contender(ABC, Generic[ContextT]):
    """One memory implementation under test.

    ``step(human, ai)`` stores one exchange and returns the context the model
    would get next; it is the only timed call. ``texts(context)`` turns that
    context into message texts so the harness can count its tokens outside the
    timed region.
    """

    @abstractmethod
    def step(self, human: str, ai: str) -> ContextT:
        """Store one exchange and return the context the model would get next."""

    @abstractmethod
    def texts(self, context: ContextT) -> list[str]:
        """Return the message texts of a context returned by :meth:`step`."""

    def close(self) -> None:  # noqa: B027 - a contender with nothing to release keeps this
        """Release files, connections and schemas."""
