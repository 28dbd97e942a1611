"""The operation runner shared by every public method.

Each public operation is written once, as a generator (``_op_*``) that does
its database work through ``Database.run`` and yields the two things whose
sync and async forms differ: sending signals (:class:`Emit`) and calling the
summarizer (:class:`Summarize`). :meth:`OpRunner._run` drives an operation
for the sync API; :meth:`OpRunner._arun` drives the same generator for the
async API, running its database steps on a worker thread and awaiting the
model and async receivers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from .. import signals
from .._compression.policy import Summarizer
from .._storage import store
from .._storage.database import Database
from ..errors import InvalidArgument, SummarizerOutputInvalid
from ..tiers import MemoryTier
from ..tokens import TokenCounter
from ..types import MemoryConfig

__all__ = ["EARLIEST_TIME", "LATEST_TIME", "Emit", "Op", "OpRunner", "Summarize"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Emit:
    """Send these signals (after the commit that produced them)."""

    pending: list[signals.Pending]


@dataclass(frozen=True, slots=True)
class Summarize:
    """Call the summarizer with this prompt; the answer (or error) is sent back."""

    prompt: str


#: The times a clock may return: far enough from the ends of ``datetime`` that
#: adding the longest duration ``MemoryConfig`` accepts (10 years) or subtracting the
#: longest tier threshold (100 years) stays in range.
EARLIEST_TIME = datetime(1000, 1, 1, tzinfo=UTC)
LATEST_TIME = datetime(9000, 1, 1, tzinfo=UTC)

#: A public operation: yields requests, returns its result.
Op = Generator[Emit | Summarize, Any, T]


class OpRunner:
    """State and drivers every part of ``ConversationMemory`` shares."""

    project: str
    config: MemoryConfig
    counter: TokenCounter
    _db: Database
    _summarizer: Summarizer | None
    _clock: Callable[[], datetime]

    def now(self) -> datetime:
        """The memory's clock, checked to be timezone-aware and within
        ``EARLIEST_TIME``..``LATEST_TIME``, in UTC (SQLite keeps no offset, so every
        stored time must be UTC to compare correctly).

        Raises:
            InvalidArgument: for any other value, before the caller runs any SQL.
        """
        moment = self._clock()
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

    def _run(self, op: Op[T]) -> T:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = op.throw(error) if error is not None else op.send(value)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            value, error = None, None
            if isinstance(request, Emit):
                signals.send(self, request.pending)
                continue
            try:
                value = self._require_summarizer().summarize(
                    request.prompt, self.config.summarizer_timeout
                )
            except BaseException as exc:  # handed to the op so it releases its claim
                error = exc

    async def _arun(self, op: Op[T]) -> T:
        value: Any = None
        error: BaseException | None = None
        while True:
            # StopIteration must not cross into a Future (asyncio cannot set it on
            # one and the await would hang), so the step reports the end itself.
            done, request = await asyncio.to_thread(_step, op, value, error)
            if done:
                return request  # type: ignore[no-any-return]
            value, error = None, None
            if isinstance(request, Emit):
                await signals.send_async(self, request.pending)
                continue
            try:
                value = await self._require_summarizer().asummarize(
                    request.prompt, self.config.summarizer_timeout
                )
            except BaseException as exc:
                error = exc

    def _require_summarizer(self) -> Summarizer:
        if self._summarizer is None:  # ops only yield _Summarize when one is set
            raise SummarizerOutputInvalid("no summarizer configured")
        return self._summarizer

    def _session(self, conn: Connection, session_id: str, **kwargs: Any) -> store.SessionRow:
        return store.get_session(conn, self.project, session_id, **kwargs)

    def _woken(self, session_id: str, previous_tier: str | None) -> Op[None]:
        """Signal ``tier_changed`` when an access woke a session that was not ACTIVE
        (``previous_tier`` as :func:`~tiermem.store.activate` returned it)."""
        if previous_tier is not None and previous_tier != MemoryTier.ACTIVE.value:
            payload = {
                "session_ids": (session_id,),
                "tier": MemoryTier.ACTIVE.value,
                "project": self.project,
            }
            yield Emit([("tier_changed", payload)])


def _step(op: Op[Any], value: Any, error: BaseException | None) -> tuple[bool, Any]:
    """Advance ``op`` once: ``(True, result)`` when it returned, else ``(False, request)``."""
    try:
        return False, (op.throw(error) if error is not None else op.send(value))
    except StopIteration as stop:
        return True, stop.value
