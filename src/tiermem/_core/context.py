"""The context every operation of one memory runs in.

A :class:`MemoryContext` holds what the operations share: the database, the
project, the configuration, the token counter, the clock, the summarizer and
the background queue. ``ConversationMemory`` owns one and passes it to plain
operation functions (:mod:`tiermem._ops`); so does every ``LayeredMemory`` of
that memory. The operations reach the outside world only through the effects
they yield (:mod:`tiermem._core.runner`), built here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from .. import signals
from .._compression.background import BackgroundQueue
from ..errors import InvalidArgument, SummarizerOutputInvalid
from .runner import Emit, Op, Summarize, transact

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from .._compression.summarizer import Summarizer
    from .._storage.database import Database
    from ..tokens import TokenCounter
    from ..types import MemoryConfig
    from .embedder import Embedder

__all__ = ["EARLIEST_TIME", "LATEST_TIME", "MemoryContext"]

T = TypeVar("T")

#: The times a clock may return: far enough from the ends of ``datetime`` that
#: adding the longest duration ``MemoryConfig`` accepts (10 years) or subtracting the
#: longest tier threshold (100 years) stays in range.
EARLIEST_TIME = datetime(1000, 1, 1, tzinfo=UTC)
LATEST_TIME = datetime(9000, 1, 1, tzinfo=UTC)


@dataclass(eq=False)
class MemoryContext:
    """The shared state of one memory's operations.

    Attributes:
        project: the namespace of the sessions.
        database: the engine with tiermem's transaction discipline.
        config: budgets and compression settings (replaced, never mutated).
        counter: the token counter.
        clock: returns the current time (``utc_now`` unless a test injects one).
        summarizer: the model that compresses, or ``None`` for the heuristic.
        owner: the sender of every signal (the ``ConversationMemory``).
        frame_tokens: what the head system message costs beyond its summaries.
        background: the queue of background compressions.
        embedder: the embedding model and its queue and cache, if any.
    """

    project: str
    database: Database
    config: MemoryConfig
    counter: TokenCounter
    clock: Callable[[], datetime]
    summarizer: Summarizer | None
    owner: object
    frame_tokens: int
    background: BackgroundQueue = field(default_factory=BackgroundQueue)
    embedder: Embedder | None = None

    def now(self) -> datetime:
        """The clock's time, checked to be timezone-aware and within
        ``EARLIEST_TIME``..``LATEST_TIME``, in UTC (SQLite keeps no offset, so every
        stored time must be UTC to compare correctly).

        Raises:
            InvalidArgument: for any other value, before the caller runs any SQL.
        """
        moment = self.clock()
        if not isinstance(moment, datetime) or moment.tzinfo is None:
            raise InvalidArgument("clock must return timezone-aware datetimes")
        try:
            moment = moment.astimezone(UTC)
        except OverflowError as exc:  # an offset that moves it past year 1 or 9999
            raise InvalidArgument(f"clock returned {moment!r}, out of range") from exc
        if not EARLIEST_TIME <= moment < LATEST_TIME:
            raise InvalidArgument(
                f"clock returned {moment.isoformat()}; it must be within "
                f"{EARLIEST_TIME.year}-{LATEST_TIME.year - 1}"
            )
        return moment

    def moment(self) -> Any:
        """Now as the database should see it: the server's ``now()`` on PostgreSQL
        without an injected clock, else :meth:`now`."""
        return self.database.server_now() if self.database.server_time else self.now()

    def transact(
        self,
        work: Callable[[Connection], T],
        *,
        write: bool = True,
        snapshot: bool = False,
        cleanup: bool = False,
    ) -> Op[T]:
        """Run ``work`` in one transaction of this memory's database (``cleanup``: see
        :class:`~tiermem._core.runner.Transact`)."""
        return transact(self.database, work, write=write, snapshot=snapshot, cleanup=cleanup)

    def emit(self, pending: Sequence[signals.Signalled]) -> Op[None]:
        """Send the signals of ``pending`` events from this memory (after the commit
        that made them)."""
        if pending:
            yield Emit(self.owner, pending)

    def summarize(self, prompt: str) -> Op[str]:
        """Ask the summarizer (an operation only asks when one is set)."""
        if self.summarizer is None:
            raise SummarizerOutputInvalid("no summarizer configured")
        text: str = yield Summarize(self.summarizer, prompt, self.config.summarizer_timeout)
        return text
