"""When a session is compressed, and how deep: the budget rules that an append, a
turn and the rounds of a compression share (:mod:`tiermem._ops.compress` runs them).

A session's counters (its row) decide, never its entries: the context's tokens with
the summaries' frame, against ``max_tokens`` and ``max_entries``; the low-water mark
``compress_to`` a compression takes the context down to; the backoff and the claim
that keep an automatic compression waiting.
"""

from __future__ import annotations

import math
from datetime import datetime

from .._core.clock import as_utc
from .._core.context import MemoryContext
from .._storage.rows import SessionRecord

__all__ = [
    "blocked",
    "compressible",
    "compression_wanted",
    "context_tokens",
    "early_margin",
    "excess",
    "mergeable",
    "over_budget",
    "reducible",
    "summary_limit",
]


def context_tokens(ctx: MemoryContext, session: SessionRecord) -> int:
    """The tokens of the context the counters describe, the summaries' frame included."""
    frame = ctx.frame_tokens + 2 * session.summary_count if session.summary_count else 0
    return session.context_tokens + frame


def over_budget(ctx: MemoryContext, session: SessionRecord) -> bool:
    """Whether the context passed ``max_tokens`` or ``max_entries``."""
    most = ctx.config.max_entries
    return context_tokens(ctx, session) > ctx.config.max_tokens or (
        most is not None and session.active_count > most
    )


def excess(ctx: MemoryContext, session: SessionRecord, room: int = 0) -> tuple[int, int]:
    """The tokens and entries a compression must take for the context to fall to
    the low-water mark (``compress_to`` of ``max_tokens`` and of ``max_entries``),
    and by ``room`` tokens at least: what it takes is replaced by a summary of
    ``compression_ratio`` of its size.

    When the new summary will take the summaries past ``summary_share`` of the
    budget, the round that follows merges them all into one of ``compression_ratio``
    of their size: the context then falls by the summaries' shrinking too, and the
    compression takes only what is left to take. Counting the merge as if it did not
    happen would take the context far under the mark (about 0.35 of the budget
    instead of 0.6 at the defaults), leaving the model fewer verbatim entries than
    ``compress_to`` promises. A summary shorter than planned may leave the summaries
    under their share, so that no merge comes: the context then stays somewhat above
    the mark, within the budget."""
    config = ctx.config
    context = context_tokens(ctx, session)
    mark = min(int(config.compress_to * config.max_tokens), context - room)
    over = max(context - mark, 0)
    ratio = config.compression_ratio
    tokens = math.ceil(over / (1 - ratio))
    held, share = session.summary_tokens, summary_limit(ctx)
    if session.summary_count and held + ratio * tokens > share:
        # After the merge the context is context - tokens + ratio * (held + ratio * tokens)
        # - held; solved for the mark. Taking so little that the merge no longer
        # follows would leave the context above the mark: take at least what makes it.
        landing = math.ceil(max(over - (1 - ratio) * held, 0) / (1 - ratio * ratio))
        tokens = max(landing, math.floor((share - held) / ratio) + 1)
    most = config.max_entries
    entries = 0 if most is None else session.active_count - int(config.compress_to * most)
    return tokens, max(entries, 0)


def compressible(ctx: MemoryContext, session: SessionRecord) -> bool:
    """Whether enough entries lie outside the recent window (pins aside)."""
    outside = session.active_count - ctx.config.recent_window
    return outside >= ctx.config.min_entries_to_compress


def reducible(ctx: MemoryContext, session: SessionRecord) -> bool:
    """Whether compressing or merging could shrink an over-budget context."""
    return compressible(ctx, session) or session.summary_count >= 2 or session.active_count >= 2


def summary_limit(ctx: MemoryContext) -> float:
    """The tokens the summaries may hold before they are merged: ``summary_share`` of
    ``max_tokens`` (:func:`mergeable`, and :func:`excess`, which plans for the merge)."""
    return ctx.config.summary_share * ctx.config.max_tokens


def mergeable(ctx: MemoryContext, session: SessionRecord) -> bool:
    """Whether the summaries passed their share of the budget."""
    return session.summary_count >= 2 and session.summary_tokens > summary_limit(ctx)


def blocked(ctx: MemoryContext, session: SessionRecord, now: datetime) -> bool:
    """Automatic compression waits out a backoff and a live claim."""
    backoff, claim = session.backoff_until, session.claim_expires_at
    return (backoff is not None and as_utc(backoff) > now) or (
        claim is not None and as_utc(claim) > now
    )


def compression_wanted(ctx: MemoryContext, counters: SessionRecord, now: datetime) -> bool:
    """Whether an append that left these counters triggers automatic compression:
    over budget, something to reduce (else wait for more entries), no backoff or
    live claim in the way."""
    return bool(
        ctx.config.auto_compress
        and over_budget(ctx, counters)
        and reducible(ctx, counters)
        and not blocked(ctx, counters, now)
    )


def early_margin(ctx: MemoryContext) -> int:
    """How far under ``max_tokens`` a turn may compress early for its recalled block
    (:func:`tiermem._ops.compress.make_room`): an eighth of what a compression takes
    off (``1 - compress_to`` of the budget), about a turn of a chat's growth. So a
    turn compresses only where the next turn or so would, and compressions (summarizer
    calls) come at most about an eighth more often."""
    config = ctx.config
    return int((1 - config.compress_to) * config.max_tokens / 8)
