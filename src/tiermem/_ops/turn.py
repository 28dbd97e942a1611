"""The turn: store a model's messages and read the next context in one call
(``add_and_get_messages``).

The append reads the context on its way (see :func:`tiermem._ops.write.add_messages`
with ``with_window``): in its own transaction when no compression follows it, else in
the compression's last commit. Only when neither could (a compression that failed, or
one that left more to do) does the turn read it in a transaction of its own.

A turn whose recalled block finds no room beside the whole context compresses then
(:func:`tiermem._ops.compress.make_room`), before the context would pass
``max_tokens``, rather than cut the context for the block.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from .._core.context import MemoryContext
from .._core.runner import Op
from ..errors import ContextReadFailed, TiermemError
from ..types import ContextMessages, MemoryEntry
from .compress import make_room
from .expectation import Expected
from .read import MessageWindow, message_window
from .recall import check_query, render_recalled
from .write import add_messages

__all__ = ["add_turn"]


def add_turn(
    ctx: MemoryContext,
    session_id: str,
    messages: Sequence[BaseMessage],
    skip_existing: bool,
    expected: Expected,
    query: str | None = None,
) -> Op[ContextMessages]:
    """Store a model turn and read the next context (``add_and_get_messages``), with
    what ``query`` (default: the newest human message) recalls.

    With an ``expected`` session state (:mod:`tiermem._ops.expectation`) the
    messages are appended only if the session is still in it, checked under the
    session's lock: a caller that answered from the context an earlier call
    returned never stores a turn another writer's append made stale. Otherwise
    :class:`StaleContext` is raised and nothing is written. Messages that are all
    stored already (``skip_existing``) are no append, and pass."""
    query = check_query(query)
    stored = yield from add_messages(
        ctx, session_id, messages, skip_existing, with_window=True, expected=expected
    )
    window = stored.window
    if window is None:
        window = yield from _read_after(ctx, session_id, stored.entries)
    rendered = yield from render_recalled(ctx, session_id, window, query)
    if rendered.lacking:
        # The recalled block found no room beside the whole context, so it cut the
        # context. Near the budget the next turn compresses anyway: compress now
        # instead, one change of the context's prefix where there would be two.
        made = yield from make_room(ctx, session_id, rendered.lacking, rendered.headroom)
        if made.result is not None:
            window = made.window
            if window is None:
                window = yield from _read_after(ctx, session_id, stored.entries)
            rendered = yield from render_recalled(ctx, session_id, window, query)
    return ContextMessages(rendered.messages, window.version)


def _read_after(
    ctx: MemoryContext, session_id: str, entries: list[MemoryEntry]
) -> Op[MessageWindow]:
    """The window a compression after the append left, read on its own."""
    try:
        return (yield from message_window(ctx, session_id))
    except TiermemError as exc:
        # The append committed: a plain error would make the caller add the
        # messages again.
        raise ContextReadFailed(
            f"the {len(entries)} messages were stored, but reading the context "
            f"failed: {exc}; read it with get_messages",
            entries=entries,
        ) from exc
