"""Compression operations: claim, summarize outside any transaction, verified commit.

The protocol: (1) in one short transaction, lock the session, pick the
entries (:func:`~tiermem._compression.policy.select_entries`) and take a claim with
a lease (an automatic compression does this in the transaction of the append
that triggered it, which holds the lock already); (2) call the summarizer with
no transaction or lock held; (3) in a second transaction, store the summary
and link the entries only if the claim is still ours and every entry is still
active. A failure in (2) releases the claim, backs automatic compression off
and signals ``compression_failed``; no entry changes. A killed worker's claim
expires after ``claim_ttl``. A cancelled (or interrupted) call releases its claim:
the token is chosen before the transaction that may take the claim
(:func:`releasing_claim`), and the release is a cleanup transaction, which the
async driver runs after that transaction ended, even when the caller is gone
(:mod:`tiermem._core.runner`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import NamedTuple, TypeVar

from .._compression.policy import (
    conversation_lines,
    fit_summary,
    heuristic_summary,
    select_entries,
    summary_prompt,
)
from .._core.context import MemoryContext
from .._core.messages import validate_session_id
from .._core.runner import Op, run
from .._core.validate import check_optional_int
from .._storage import failpoints as _failpoints
from .._storage import sessions, store, summaries
from .._storage.database import Connection
from .._storage.rows import SessionRecord
from .._storage.store import MessageWindow
from ..errors import (
    SessionNotFound,
    SummarizationError,
    SummaryNotShorter,
    TiermemError,
)
from ..events import Compressed, CompressionFailed, Event
from ..types import CompressionResult, MemoryEntry, MemorySummary
from . import feed
from .compress_budget import (
    blocked,
    early_margin,
    excess,
    mergeable,
    over_budget,
)

__all__ = [
    "Outcome",
    "Planned",
    "auto_compress",
    "compress",
    "make_room",
    "new_claim_token",
    "plan_compression",
    "releasing_claim",
]

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
    counters: SessionRecord


class Outcome(NamedTuple):
    """What a compression did: its result (``None``: nothing was compressed, or it
    was queued) and the window ``get_messages`` shows, when asked for, read in the
    last commit (``None`` when that commit left more to do or none happened)."""

    result: CompressionResult | None
    window: MessageWindow | None


class _Round(NamedTuple):
    """One committed round: its result, the counters it left, and the window read
    in its commit (see :class:`Outcome`)."""

    result: CompressionResult
    counters: SessionRecord
    window: MessageWindow | None


def auto_compress(
    ctx: MemoryContext,
    session_id: str,
    planned: Planned | None,
    *,
    with_window: bool,
    room: int = 0,
) -> Op[Outcome]:
    """The compression an append triggers once
    :func:`tiermem._ops.compress_budget.compression_wanted` said so: queued in
    background mode, else run from ``planned`` (the first round's plan,
    when the append made it). ``with_window``: the last commit also reads what
    ``get_messages`` shows (when no further round follows), saving the caller a
    transaction. ``room``: see :func:`make_room`."""
    try:
        if ctx.config.background:
            ctx.background.submit(session_id, partial(_compress_in_background, ctx, session_id))
            return Outcome(None, None)
        return (
            yield from _compress(
                ctx,
                session_id,
                force=False,
                keep=None,
                auto=True,
                with_window=with_window,
                planned=planned,
                room=room,
            )
        )
    except Exception as exc:
        # The append already committed; a failed compression is reported by the
        # compression_failed signal and the log, never by failing the add (a
        # caller would retry it and store the message twice).
        _log_after_commit("automatic compression", session_id, exc)
        return Outcome(None, None)


def make_room(ctx: MemoryContext, session_id: str, tokens: int, headroom: int) -> Op[Outcome]:
    """The automatic compression a turn runs early, when the block it recalled found
    no room beside the whole context (``tokens`` short) and that context is within
    :func:`~tiermem._ops.compress_budget.early_margin` of ``max_tokens``
    (``headroom`` under it): else that turn's context is cut for the block and the
    next turn or so compresses anyway, two breaks of a prompt cache's prefix where one
    is due, and the cut shows the model less. Further from the budget the turn keeps
    the cut: compressing there for every large block would call the summarizer more
    often. It runs as the automatic one does (its backoff, its claim, down to the
    low-water mark), and not at all in the background mode or with automatic
    compression off. It is :func:`auto_compress`, so it never raises: the turn's append
    committed."""
    config = ctx.config
    if not config.auto_compress or config.background or tokens <= 0:
        return Outcome(None, None)
    if headroom > early_margin(ctx):
        return Outcome(None, None)
    return (yield from auto_compress(ctx, session_id, None, with_window=True, room=tokens))


def compress(
    ctx: MemoryContext, session_id: str, *, force: bool, keep: int | None, auto: bool = False
) -> Op[CompressionResult | None]:
    """Summarize the oldest active entries (see ``ConversationMemory.compress``);
    ``auto`` for the compression an append triggers."""
    outcome = yield from _compress(
        ctx, session_id, force=force, keep=keep, auto=auto, with_window=False, planned=None
    )
    return outcome.result


def _compress(
    ctx: MemoryContext,
    session_id: str,
    *,
    force: bool,
    keep: int | None,
    auto: bool,
    with_window: bool,
    planned: Planned | None,
    room: int = 0,
) -> Op[Outcome]:
    """The rounds of a compression (see :func:`compress`), and what they did; with
    ``room`` (:func:`make_room`) the first round runs under the budget."""
    validate_session_id(session_id)
    check_optional_int("keep", keep)
    result: CompressionResult | None = None
    shown: MessageWindow | None = None
    window = ctx.config.recent_window if keep is None else keep
    for _ in range(_MAX_ROUNDS):
        try:
            step = yield from _compress_once(
                ctx,
                session_id,
                force=force,
                keep=window,
                auto=auto,
                with_window=with_window,
                planned=planned,
                room=room,
            )
            room = 0  # further rounds only for the budget itself
            if step is not None:
                result, counters, shown = step
            elif planned is not None:  # nothing to take: the append's counters stand
                counters = planned.counters
            else:
                fetched = yield from ctx.transact(
                    lambda conn: _read_counters(ctx, conn, session_id), write=False
                )
                if fetched is None:
                    break
                counters = fetched
            planned = None  # only the first round was planned by the append
            over = over_budget(ctx, counters)
            if mergeable(ctx, counters) or (over and counters.summary_count >= 2):
                merged = yield from _merge_once(ctx, session_id, counters, with_window)
                if merged is not None:
                    result, counters, shown = merged
                    over = over_budget(ctx, counters)
        except Exception as exc:
            if result is None:
                raise
            # A round committed, so this call succeeded: a later failure (signalled,
            # its claim released) must not report it as failed.
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
    return Outcome(result, shown)


def _read_counters(ctx: MemoryContext, conn: Connection, session_id: str) -> SessionRecord | None:
    try:
        return sessions.get_session(conn, ctx.project, session_id, lock=False)
    except SessionNotFound:
        return None


def _settled(ctx: MemoryContext, counters: SessionRecord) -> bool:
    """Whether a commit that left ``counters`` ends an automatic compression:
    within budget and no merge due (see the loop of :func:`_compress`)."""
    return not over_budget(ctx, counters) and not mergeable(ctx, counters)


def plan_compression(
    ctx: MemoryContext,
    conn: Connection,
    session: SessionRecord,
    now: datetime,
    *,
    force: bool = False,
    keep: int | None = None,
    auto: bool = True,
    token: str,
    room: int = 0,
) -> Planned:
    """In the caller's write transaction (``session`` locked): pick the entries
    to compress and take the claim ``token`` (none when there is nothing to do).
    ``room``: the tokens a turn's recalled block lacked (:func:`make_room`); such a
    compression runs under the budget, and takes at least that many."""
    over = room > 0 or over_budget(ctx, session)
    if (auto and blocked(ctx, session, now)) or (not force and not over):
        return Planned(token, [], session)
    chosen = select_entries(
        store.read_entries(conn, session, active_only=True, fresh=False),
        ctx.config,
        force=force,
        keep=keep,
        # Only as deep as the low-water mark; a forced round takes all it may.
        take=None if force else excess(ctx, session, room),
    )
    if chosen:
        summaries.claim(conn, session, token, now, ctx.config.claim_ttl)
    return Planned(token, chosen, session)


def _compress_once(
    ctx: MemoryContext,
    session_id: str,
    *,
    force: bool,
    keep: int | None,
    auto: bool,
    with_window: bool,
    planned: Planned | None,
    room: int = 0,
) -> Op[_Round | None]:
    if planned is None:
        now, token = ctx.now(), new_claim_token()

        def plan(conn: Connection) -> Planned | None:
            try:
                session = sessions.get_session(conn, ctx.project, session_id)
            except SessionNotFound:
                if auto:
                    return None
                raise
            return plan_compression(
                ctx, conn, session, now, force=force, keep=keep, auto=auto, token=token, room=room
            )

        planned = yield from releasing_claim(ctx, session_id, token, ctx.transact(plan))
    if planned is None or not planned.chosen:
        return None
    token, taken = planned.token, planned.chosen
    before = planned.counters.context_tokens
    _failpoints.hit("compress.after_claim")
    original = sum(entry.token_count for entry in taken)
    text, tokens = yield from _summarize(
        ctx,
        session_id,
        token,
        conversation_lines(taken),
        original,
        lambda quote: heuristic_summary(taken, quote=quote),
    )
    done, pending = yield from _commit(
        ctx,
        session_id,
        token,
        lambda conn: summaries.commit_summary(
            conn,
            sessions.get_session(conn, ctx.project, session_id),
            token,
            taken,
            text,
            tokens,
            ctx.now(),
        ),
        lambda s, c: _result(session_id, s, len(taken), before, c),
        with_window,
    )
    _failpoints.hit("compress.after_commit_before_signal")
    yield from ctx.emit(pending)
    return done


def _merge_once(
    ctx: MemoryContext,
    session_id: str,
    counters: SessionRecord,
    with_window: bool,
) -> Op[_Round | None]:
    """Summarize the top-level summaries into one higher-level summary."""
    now, token = ctx.now(), new_claim_token()

    def plan(conn: Connection) -> list[MemorySummary] | None:
        session = sessions.get_session(conn, ctx.project, session_id)
        children = summaries.read_summaries(conn, session, with_ids=False)
        if len(children) < 2:
            return None
        summaries.claim(conn, session, token, now, ctx.config.claim_ttl)
        return children

    try:
        children = yield from releasing_claim(ctx, session_id, token, ctx.transact(plan))
    except TiermemError as exc:
        logger.log(exc.log_level, "summary merge of %r skipped: %s", session_id, exc)
        return None
    if children is None:
        return None
    texts = [child.content for child in children]
    original = sum(child.token_count for child in children)
    try:
        text, tokens = yield from _summarize(
            ctx,
            session_id,
            token,
            conversation_lines([], texts),
            original,
            lambda quote: heuristic_summary([], texts, quote=quote),
        )
    except SummarizationError:
        return None  # the unmerged summaries stay valid; the failure was signalled
    before = counters.context_tokens
    try:
        done, pending = yield from _commit(
            ctx,
            session_id,
            token,
            lambda conn: summaries.commit_merge(
                conn,
                sessions.get_session(conn, ctx.project, session_id),
                token,
                children,
                text,
                tokens,
                ctx.now(),
            ),
            lambda s, c: _result(session_id, s, 0, before, c, merged=len(children)),
            with_window,
        )
    except TiermemError as exc:
        # As when planning or the model fails: the compression before this merge
        # is committed, so the call must not report a failure; the unmerged
        # summaries stay valid and the claim was released.
        logger.log(exc.log_level, "summary merge of %r failed: %s", session_id, exc)
        return None
    yield from ctx.emit(pending)
    return done


def _summarize(
    ctx: MemoryContext,
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
        if ctx.summarizer is None:
            text = fit_summary(heuristic, original_tokens, ctx.config, ctx.counter)
        else:
            prompt = summary_prompt(lines, original_tokens, ctx.config, ctx.counter)
            try:
                text = yield from ctx.summarize(prompt)
            except SummarizationError:
                if not ctx.config.heuristic_fallback:
                    raise
                text = fit_summary(heuristic, original_tokens, ctx.config, ctx.counter)
        tokens = ctx.counter.count_text(text)
        if tokens >= original_tokens:
            raise SummaryNotShorter(
                f"summary not shorter than its input ({tokens} >= {original_tokens} tokens)"
            )
    except GeneratorExit:  # closed unfinished: no effect can be yielded any more
        run(_release(ctx, session_id, token))
        raise
    except BaseException as error:
        failed: list[Event] = []
        if isinstance(error, TiermemError):
            failed = [CompressionFailed(session_id, error)]
        yield from _release(ctx, session_id, token, failed)
        yield from ctx.emit(failed)
        raise
    return text, tokens


def new_claim_token() -> str:
    """A fresh compression claim token."""
    return uuid.uuid4().hex


def releasing_claim(ctx: MemoryContext, session_id: str, token: str, op: Op[T]) -> Op[T]:
    """``op``, which may take the claim ``token`` (and hand it on to a compression that
    releases it on failure); if ``op`` is interrupted (cancelled, closed,
    ``KeyboardInterrupt``) the claim is released before the interruption goes on,
    so no claim outlives a cancelled call. An error (an ``Exception``) rolled the
    claim back or was handled by whoever held it, so it just passes."""
    try:
        return (yield from op)
    except GeneratorExit:  # closed unfinished: no effect can be yielded any more
        run(_release(ctx, session_id, token))
        raise
    except BaseException as interruption:
        if not isinstance(interruption, Exception):
            yield from _release(ctx, session_id, token)
        raise


def _release(
    ctx: MemoryContext, session_id: str, token: str, failed: list[Event] | None = None
) -> Op[None]:
    """Drop our claim after a failure (and back off), recording the ``failed``
    signal's event in the same transaction; never raises, so the error that made
    us release is the one the caller sees."""
    backoff = (ctx.config.backoff_base, ctx.config.backoff_max)

    def release(conn: Connection) -> None:
        try:
            session = sessions.get_session(conn, ctx.project, session_id)
        except SessionNotFound:  # never created, or cleared: no claim is left
            return
        summaries.release_failed_claim(conn, session, token, now, backoff)
        feed.record(ctx, conn, failed or [])

    try:
        now = ctx.now()
        yield from ctx.transact(release, cleanup=True)
    except TiermemError as exc:  # the lease expires on its own
        logger.warning("could not release compression claim of %r: %s", session_id, exc)
    except Exception:
        logger.exception("could not release compression claim of %r", session_id)


Written = tuple[MemorySummary, SessionRecord]


def _commit(
    ctx: MemoryContext,
    session_id: str,
    token: str,
    work: Callable[[Connection], Written],
    describe: Callable[[MemorySummary, SessionRecord], CompressionResult],
    with_window: bool,
) -> Op[tuple[_Round, list[Event]]]:
    """Run ``work`` (store the summary) with its ``compressed`` event in one
    transaction, reading the window there too (``with_window``) when the counters
    it leaves settle the compression; the round and the signal to send."""

    def guarded(conn: Connection) -> tuple[_Round, list[Event]]:
        summary, counters = work(conn)
        shown = None
        if with_window and _settled(ctx, counters):
            shown = store.read_message_window(conn, counters)
        result = describe(summary, counters)
        pending: list[Event] = [Compressed(session_id, result)]
        feed.record(ctx, conn, pending)
        _failpoints.hit("compress.before_commit")
        return _Round(result, counters, shown), pending

    try:
        return (yield from ctx.transact(guarded))
    except GeneratorExit:
        run(_release(ctx, session_id, token))
        raise
    except BaseException:
        # A failed commit (storage error, changed entries, anything else) must not
        # leave our claim blocking every retry until its lease runs out; after a
        # commit that did happen the claim is no longer ours and this does nothing.
        yield from _release(ctx, session_id, token)
        raise


def _compress_in_background(ctx: MemoryContext, session_id: str) -> None:
    run(compress(ctx, session_id, force=False, keep=None, auto=True))


def _log_after_commit(what: str, session_id: str, error: Exception) -> None:
    """Log a failure that follows a commit of the same call (which therefore returns
    normally): a typed error at its ``log_level`` (a warning, or less for a normal
    event such as another worker compressing), an untyped one (a bug) with its
    traceback."""
    if isinstance(error, TiermemError):
        logger.log(error.log_level, "%s of %r failed: %s", what, session_id, error)
    else:
        logger.error("%s of %r failed", what, session_id, exc_info=error)


def _result(
    session_id: str,
    summary: MemorySummary,
    entries: int,
    before: int,
    counters: SessionRecord,
    *,
    merged: int = 0,
) -> CompressionResult:
    after = counters.context_tokens
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
