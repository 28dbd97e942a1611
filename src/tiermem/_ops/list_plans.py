"""How a checkpoint's message lists are stored (:mod:`tiermem._ops.threads`): each
list as a delta on the list this process last knew for its channel, or whole, with
the entry ids of the messages it knew reused; the rest become entries.

What a process knows of a thread is only a shortcut, and may be stale: the thread
id may name another session since (renamed, or deleted and begun again, maybe by
another process). A put therefore looks up the newest reused entry with the new
messages (:func:`witness`); when it is not the session's, :class:`StaleList` makes
the put store the checkpoint again without what the process knew.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from .._core.context import MemoryContext
from .._core.messages import serialize
from .._core.render import is_summary_message
from ..checkpoints import NewCheckpoint
from .known_lists import Known, KnownLists

__all__ = ["FULL_EVERY", "ListPlan", "Ref", "StaleList", "plan_list", "witness"]

#: One message of a stored list: an entry id, or the JSON of a message kept in the
#: list itself (tiermem's summary message, which is not an entry).
Ref = int | str
#: A message list is stored whole at least every this many versions of a chain, so
#: reading one reads at most this many rows.
FULL_EVERY = 32


@dataclass
class ListPlan:
    """How one message-list version is stored."""

    channel: str
    version: str
    messages: Sequence[BaseMessage]
    refs: list[Ref | None]  # None: resolved in the transaction
    base: Known | None  # a delta on this, if its row is still there
    source: Known | None  # the known list whose entry ids ``refs`` reuses
    extends: bool = False  # whether it starts with the known list (nothing removed)


class StaleList(Exception):
    """A list this process knew for the thread id belongs to another session than
    the one the id now names (renamed or deleted since, maybe by another process):
    the checkpoint is stored again without what this process knew of the thread."""


def plan_list(
    ctx: MemoryContext,
    known: KnownLists,
    new: NewCheckpoint,
    key: tuple[str, str],
    msgs: Sequence[BaseMessage],
) -> ListPlan:
    """How the list ``msgs`` of channel version ``key`` is stored: a delta on the
    known list it extends, else whole, reusing the entry ids of known messages."""
    channel, version = key
    cached = known.get((new.thread_id, new.checkpoint_ns, channel))
    extends = cached is not None and cached.starts(msgs)
    if cached is not None and extends and cached.depth + 1 < FULL_EVERY:
        tail = [_inline(ctx, m) for m in msgs[len(cached.messages) :]]
        return ListPlan(channel, version, msgs, [*cached.refs, *tail], cached, cached, True)
    positions = {} if cached is None else {m.id: n for n, m in enumerate(cached.messages)}
    refs: list[Ref | None] = []
    source = None
    for message in msgs:
        at = positions.get(message.id)
        if cached is not None and at is not None and cached.same(at, message):
            refs.append(cached.refs[at])
            source = cached
        else:
            refs.append(_inline(ctx, message))
    return ListPlan(channel, version, msgs, refs, None, source, extends)


def witness(source: Known) -> tuple[str, int] | None:
    """The message id and entry id of the newest entry of a known list (``None`` when
    it has no entry, or its newest entry's message has no id to look it up by)."""
    for message, ref in zip(reversed(source.messages), reversed(source.refs), strict=True):
        if isinstance(ref, int):
            return (message.id, ref) if message.id else None
    return None


def _inline(ctx: MemoryContext, message: BaseMessage) -> str | None:
    """The JSON a summary message is kept as in its list; ``None`` for a message
    that is (or becomes) an entry."""
    if is_summary_message(message):
        return serialize(message, max_chars=ctx.config.max_entry_chars)
    return None
