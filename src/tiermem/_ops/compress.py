"""Compression operations: claim, summarize outside any transaction, verified commit.

The protocol: (1) in one short transaction, lock the session, pick the
entries (:func:`~tiermem.compression.select_entries`) and take a claim with
a lease (an automatic compression does this in the transaction of the append
that triggered it, which holds the lock already); (2) call the summarizer with
no transaction or lock held; (3) in a second transaction, store the summary
and link the entries only if the claim is still ours and every entry is still
active. A failure in (2) releases the claim, backs automatic compression off
and signals ``compression_failed``; no entry changes. A killed worker's claim
expires after ``claim_ttl``.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from .._compression.policy import (
    conversation_lines,
    fit_summary,
    heuristic_summary,
    select_entries,
    summary_prompt,
)
from .._core import failpoints as _failpoints
from .._core.messages import validate_session_id
from .._core.runner import Emit, Op, OpRunner, Summarize
from .._storage import store
from .._storage.store import MessageWindow
from ..errors import (
    InvalidArgument,
    SessionNotFound,
    SummarizationError,
    SummarizerOutputInvalid,
    TiermemError,
)
from ..types import CompressionResult, MemoryEntry, MemorySummary

__all__ = ["CompressionMixin"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
_MAX_ROUNDS = 6  # compress, merge, then halve the window down to one entry


@dataclass(frozen=True, slots=True)
class Planned:
    """One round of compression as planned in a write transaction.

    ``chosen`` is empty when no entry could be taken (then no claim was written
    under ``token``); ``counters`` is the session row the plan saw.
    """

    token: str
    chosen: list[MemoryEntry]
    counters: Mapping[str, Any]


class CompressionMixin(OpRunner):
    """The compression half of ``ConversationMemory``."""

    _frame_tokens: int
    _worker: ThreadPoolExecutor | None
    _queued: set[str]
    _queue_lock: threading.Lock

    def compress(
        self, session_id: str, force: bool = False, *, keep: int | None = None
    ) -> CompressionResult | None:
        """Summarize the oldest active entries now.

        Without ``force`` nothing happens unless the session is over
        ``max_tokens`` or ``max_entries``. ``keep`` overrides ``recent_window``.
        Returns ``None`` when there is nothing to compress. While the context is
        over budget further rounds follow; once one round committed, a later
        one's failure is signalled and logged and the call returns the last
        committed result.

        Raises:
            SummarizationError: the summarizer failed; every entry stays active.
            CompressionInProgress: another worker holds the session's claim.
            CompressionConflict: the entries changed while the model ran.
        """
        return self._run(self._op_compress(session_id, force=force, keep=keep, auto=False))

    async def acompress(
        self, session_id: str, force: bool = False, *, keep: int | None = None
    ) -> CompressionResult | None:
        """Async :meth:`compress`."""
        return await self._arun(self._op_compress(session_id, force=force, keep=keep, auto=False))

    def _over_budget(self, session: Mapping[Any, Any]) -> bool:
        frame = self._frame_tokens + 2 * session["summary_count"] if session["summary_count"] else 0
        context = session["active_tokens"] + session["summary_tokens"] + frame
        return bool(
            context > self.config.max_tokens or session["active_count"] > self.config.max_entries
        )

    def _compressible(self, session: Mapping[Any, Any]) -> bool:
        """Whether enough entries lie outside the recent window (pins aside)."""
        outside = session["active_count"] - self.config.recent_window
        return bool(outside >= self.config.min_entries_to_compress)

    def _reducible(self, session: Mapping[Any, Any]) -> bool:
        """Whether compressing or merging could shrink an over-budget context."""
        return bool(
            self._compressible(session)
            or session["summary_count"] >= 2
            or session["active_count"] >= 2
        )

    def _mergeable(self, session: Mapping[Any, Any]) -> bool:
        """Whether the summaries passed their share of the budget."""
        share = self.config.summary_share * self.config.max_tokens
        return bool(session["summary_count"] >= 2 and session["summary_tokens"] > share)

    def _blocked(self, session: Mapping[Any, Any], now: datetime) -> bool:
        """Automatic compression waits out a backoff and a live claim."""
        backoff, claim = session["backoff_until"], session["claim_expires_at"]
        return (backoff is not None and store.as_utc(backoff) > now) or (
            claim is not None and store.as_utc(claim) > now
        )

    def _compression_wanted(self, counters: Mapping[str, Any], now: datetime) -> bool:
        """Whether an append that left these counters triggers automatic compression:
        over budget, something to reduce (else wait for more entries), no backoff or
        live claim in the way."""
        return bool(
            self.config.auto_compress
            and self._over_budget(counters)
            and self._reducible(counters)
            and not self._blocked(counters, now)
        )

    def _compression_due(self, counters: Mapping[str, Any], now: datetime) -> bool:
        """Whether such an append compresses before it returns (not in background)."""
        return not self.config.background and self._compression_wanted(counters, now)

    def _auto_compress(
        self,
        session_id: str,
        counters: Mapping[str, Any],
        window_sink: list[MessageWindow] | None = None,
        planned: Planned | None = None,
    ) -> Op[None]:
        """Compress after an append that left ``counters``, if wanted. With a
        ``window_sink``, the last commit also reads what ``get_messages`` shows
        into it (when no further round follows), saving the caller a transaction.
        ``planned`` is the first round's plan when the append made it."""
        try:
            if planned is None and not self._compression_wanted(counters, self.now()):
                return
            if self.config.background:
                self._enqueue(session_id)
                return
            yield from self._op_compress(
                session_id,
                force=False,
                keep=None,
                auto=True,
                window_sink=window_sink,
                planned=planned,
            )
        except Exception as exc:
            if window_sink is not None:
                # Read in a commit that then failed: it shows what was rolled back.
                window_sink.clear()
            # The append already committed; a failed compression is reported by the
            # compression_failed signal and the log, never by failing the add (a
            # caller would retry it and store the message twice).
            _log_after_commit("automatic compression", session_id, exc)

    def _reset_background(self) -> None:
        """No background worker, nothing queued, a fresh lock: the state of a new
        memory, and of every memory in a forked child (see :func:`_reset_after_fork`)."""
        self._worker = None
        self._queued = set()
        self._queue_lock = threading.Lock()
        _MEMORIES.add(self)

    def _enqueue(self, session_id: str) -> None:
        with self._queue_lock:
            if session_id in self._queued:
                return
            self._queued.add(session_id)
            if self._worker is None:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix="tiermem-compress")
            self._worker.submit(self._background_compress, session_id)

    def _background_compress(self, session_id: str) -> None:
        with self._queue_lock:
            self._queued.discard(session_id)
        try:
            self._run(self._op_compress(session_id, force=False, keep=None, auto=True))
        except Exception:
            logger.exception("background compression of %r failed", session_id)

    def _op_compress(
        self,
        session_id: str,
        *,
        force: bool,
        keep: int | None,
        auto: bool,
        window_sink: list[MessageWindow] | None = None,
        planned: Planned | None = None,
    ) -> Op[CompressionResult | None]:
        validate_session_id(session_id)
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
            raise InvalidArgument(f"keep must be an int >= 0, got {keep!r}")
        result: CompressionResult | None = None
        window = self.config.recent_window if keep is None else keep
        for _ in range(_MAX_ROUNDS):
            try:
                step = yield from self._compress_once(
                    session_id,
                    force=force,
                    keep=window,
                    auto=auto,
                    window_sink=window_sink,
                    planned=planned,
                )
                if step is not None:
                    result, counters = step
                elif planned is not None:  # nothing to take: the append's counters stand
                    counters = dict(planned.counters)
                else:
                    fetched = self._db.run(
                        lambda conn: self._counters(conn, session_id), write=False
                    )
                    if fetched is None:
                        break
                    counters = fetched
                planned = None  # only the first round was planned by the append
                over = self._over_budget(counters)
                if self._mergeable(counters) or (over and counters["summary_count"] >= 2):
                    merged = yield from self._merge_once(session_id, counters, window_sink)
                    if merged is not None:
                        result, counters = merged
                        over = self._over_budget(counters)
            except Exception as exc:
                if result is None:
                    raise
                # A round committed, so this call succeeded: a later failure (signalled,
                # its claim released) must not report it as failed.
                if window_sink is not None:
                    window_sink.clear()  # read in the transaction that was rolled back
                _log_after_commit("further compression", session_id, exc)
                break
            if not over or keep is not None:
                break
            # Still over max_tokens: the recent window itself does not fit. Keep
            # fewer entries (at least one) so the context honours the budget; a
            # caller's explicit ``keep`` is never overridden.
            if step is None:
                if window <= 1:
                    break
                window = max(window // 2, 1)
            force = True
        return result

    def _counters(self, conn: Connection, session_id: str) -> dict[str, Any] | None:
        try:
            return dict(self._session(conn, session_id, lock=False))
        except SessionNotFound:
            return None

    def _settled(self, counters: Mapping[str, Any]) -> bool:
        """Whether a commit that left ``counters`` ends an automatic compression:
        within budget and no merge due (see the loop of :meth:`_op_compress`)."""
        return not self._over_budget(counters) and not self._mergeable(counters)

    def _then_read(
        self,
        window_sink: list[MessageWindow] | None,
        work: Callable[[Connection], tuple[MemorySummary, dict[str, Any]]],
    ) -> Callable[[Connection], tuple[MemorySummary, dict[str, Any]]]:
        """``work``, followed in its transaction by the window read into
        ``window_sink`` when the counters it returns settle the compression."""
        if window_sink is None:
            return work

        def work_then_read(conn: Connection) -> tuple[MemorySummary, dict[str, Any]]:
            summary, counters = work(conn)
            window_sink.clear()
            if self._settled(counters):
                window_sink.append(store.read_message_window(conn, counters))
            return summary, counters

        return work_then_read

    def _plan_compression(
        self,
        conn: Connection,
        session: Mapping[str, Any],
        now: datetime,
        *,
        force: bool = False,
        keep: int | None = None,
        auto: bool = True,
    ) -> Planned:
        """In the caller's write transaction (``session`` locked): pick the entries
        to compress and take the claim (none when there is nothing to do)."""
        token = uuid.uuid4().hex
        if (auto and self._blocked(session, now)) or (not force and not self._over_budget(session)):
            return Planned(token, [], session)
        chosen = select_entries(
            store.read_entries(conn, session, active_only=True, fresh=False),
            self.config,
            force=force,
            keep=keep,
        )
        if chosen:
            store.claim(conn, session, token, now, self.config.claim_ttl)
        return Planned(token, chosen, session)

    def _compress_once(
        self,
        session_id: str,
        *,
        force: bool,
        keep: int | None,
        auto: bool,
        window_sink: list[MessageWindow] | None = None,
        planned: Planned | None = None,
    ) -> Op[tuple[CompressionResult, dict[str, Any]] | None]:
        if planned is None:
            now = self.now()

            def plan(conn: Connection) -> Planned | None:
                try:
                    session = self._session(conn, session_id)
                except SessionNotFound:
                    if auto:
                        return None
                    raise
                return self._plan_compression(conn, session, now, force=force, keep=keep, auto=auto)

            planned = self._db.run(plan)
        if planned is None or not planned.chosen:
            return None
        token, taken = planned.token, planned.chosen
        before = planned.counters["active_tokens"] + planned.counters["summary_tokens"]
        _failpoints.hit("compress.after_claim")
        original = sum(entry.token_count for entry in taken)
        text, tokens = yield from self._summarize(
            session_id,
            token,
            conversation_lines(taken),
            original,
            lambda quote: heuristic_summary(taken, quote=quote),
        )
        summary, counters = self._commit(
            session_id,
            token,
            self._then_read(
                window_sink,
                lambda conn: store.commit_summary(
                    conn, self._session(conn, session_id), token, taken, text, tokens, self.now()
                ),
            ),
        )
        _failpoints.hit("compress.after_commit_before_signal")
        result = _result(session_id, summary, len(taken), before, counters)
        yield Emit([("compressed", {"session_id": session_id, "result": result})])
        return result, counters

    def _merge_once(
        self,
        session_id: str,
        counters: Mapping[str, Any],
        window_sink: list[MessageWindow] | None = None,
    ) -> Op[tuple[CompressionResult, dict[str, Any]] | None]:
        """Summarize the top-level summaries into one higher-level summary."""
        now, token = self.now(), uuid.uuid4().hex

        def plan(conn: Connection) -> list[MemorySummary] | None:
            session = self._session(conn, session_id)
            children = store.read_summaries(conn, session, with_ids=False)
            if len(children) < 2:
                return None
            store.claim(conn, session, token, now, self.config.claim_ttl)
            return children

        try:
            children = self._db.run(plan)
        except TiermemError as exc:
            logger.warning("summary merge of %r skipped: %s", session_id, exc)
            return None
        if children is None:
            return None
        texts = [child.content for child in children]
        original = sum(child.token_count for child in children)
        try:
            text, tokens = yield from self._summarize(
                session_id,
                token,
                conversation_lines([], texts),
                original,
                lambda quote: heuristic_summary([], texts, quote=quote),
            )
        except SummarizationError:
            return None  # the unmerged summaries stay valid; the failure was signalled
        before = counters["active_tokens"] + counters["summary_tokens"]
        try:
            summary, after = self._commit(
                session_id,
                token,
                self._then_read(
                    window_sink,
                    lambda conn: store.commit_merge(
                        conn,
                        self._session(conn, session_id),
                        token,
                        children,
                        text,
                        tokens,
                        self.now(),
                    ),
                ),
            )
        except TiermemError as exc:
            # As when planning or the model fails: the compression before this merge
            # is committed, so the call must not report a failure; the unmerged
            # summaries stay valid and the claim was released.
            if window_sink is not None:
                window_sink.clear()  # read in the transaction that was rolled back
            logger.warning("summary merge of %r failed: %s", session_id, exc)
            return None
        result = _result(session_id, summary, 0, before, after, merged=len(children))
        yield Emit([("compressed", {"session_id": session_id, "result": result})])
        return result, after

    def _summarize(
        self,
        session_id: str,
        token: str,
        lines: Sequence[str],
        original_tokens: int,
        heuristic: Callable[[int], str],
    ) -> Op[tuple[str, int]]:
        """Ask the model (outside any transaction) and validate the answer; on failure
        release the claim, back off, signal ``compression_failed`` and raise."""
        try:
            _failpoints.hit("compress.in_llm")
            if self._summarizer is None:
                text = fit_summary(heuristic, original_tokens, self.config, self.counter)
            else:
                prompt = summary_prompt(lines, original_tokens, self.config, self.counter)
                try:
                    text = yield Summarize(prompt)
                except SummarizationError:
                    if not self.config.heuristic_fallback:
                        raise
                    text = fit_summary(heuristic, original_tokens, self.config, self.counter)
            tokens = self.counter.count_text(text)
            if tokens >= original_tokens:
                raise SummarizerOutputInvalid(
                    f"summary not shorter than its input ({tokens} >= {original_tokens} tokens)"
                )
        except BaseException as error:
            self._release(session_id, token)
            if isinstance(error, TiermemError):
                yield Emit([("compression_failed", {"session_id": session_id, "error": error})])
            raise
        return text, tokens

    def _release(self, session_id: str, token: str) -> None:
        """Drop our claim after a failure (and back off); never raises, so the error
        that made us release is the one the caller sees."""
        backoff = (self.config.backoff_base, self.config.backoff_max)
        try:
            now = self.now()
            self._db.run(
                lambda conn: store.release_failed_claim(
                    conn, self._session(conn, session_id), token, now, backoff
                )
            )
        except TiermemError as exc:  # the lease expires on its own
            logger.warning("could not release compression claim of %r: %s", session_id, exc)
        except Exception:
            logger.exception("could not release compression claim of %r", session_id)

    def _commit(self, session_id: str, token: str, work: Callable[[Connection], T]) -> T:
        def guarded(conn: Connection) -> T:
            result = work(conn)
            _failpoints.hit("compress.before_commit")
            return result

        try:
            return self._db.run(guarded)
        except BaseException:
            # A failed commit (storage error, changed entries, anything else) must not
            # leave our claim blocking every retry until its lease runs out; after a
            # commit that did happen the claim is no longer ours and this does nothing.
            self._release(session_id, token)
            raise


#: Every memory, so that a forked child can reset their background state.
_MEMORIES: weakref.WeakSet[CompressionMixin] = weakref.WeakSet()


def _reset_after_fork() -> None:
    """Reset the background state of every memory in a forked child.

    The parent's worker thread does not exist in the child, yet its executor
    counts it as idle and would never start another; sessions queued in the
    parent would stay marked as queued; the queue lock may have been held by a
    thread of the parent. Done at the fork, before any thread of the child
    runs, rather than by a pid check on each enqueue, which two threads of the
    child could race.
    """
    for memory in list(_MEMORIES):
        memory._reset_background()


os.register_at_fork(after_in_child=_reset_after_fork)


def _log_after_commit(what: str, session_id: str, error: Exception) -> None:
    """Log a failure that follows a commit of the same call (which therefore returns
    normally): a typed error as a warning, an untyped one (a bug) with its traceback."""
    if isinstance(error, TiermemError):
        logger.warning("%s of %r failed: %s", what, session_id, error)
    else:
        logger.error("%s of %r failed", what, session_id, exc_info=error)


def _result(
    session_id: str,
    summary: MemorySummary,
    entries: int,
    before: int,
    counters: Mapping[str, Any],
    *,
    merged: int = 0,
) -> CompressionResult:
    after = counters["active_tokens"] + counters["summary_tokens"]
    return CompressionResult(
        session_id=session_id,
        summary=summary,
        entries_compressed=entries,
        tokens_before=before,
        tokens_after=after,
        tokens_saved=before - after,
        ratio=summary.compression_ratio,
        merged_summaries=merged,
    )
