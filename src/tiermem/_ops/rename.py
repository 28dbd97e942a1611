"""Renaming a session: its conversation, tier, checkpoints and change-feed events
move to a new id, in one transaction (storage: :mod:`tiermem._storage.renames`).

A chatbot backend that stored a visitor's conversation under an anonymous id moves
it to the account's id once the visitor signs in. An append by the old id afterwards
starts a new session of that id.
"""

from __future__ import annotations

from .._core.context import MemoryContext
from .._core.messages import validate_session_id
from .._core.runner import Op
from .._storage.database import Connection
from .._storage.renames import rename_session
from ..errors import InvalidArgument
from ..events import Event, SessionRenamed
from . import feed

__all__ = ["rename"]


def rename(ctx: MemoryContext, session_id: str, new_id: str) -> Op[None]:
    """Give the session ``session_id`` the id ``new_id``; one ``session:renamed``
    event (and signal) after the commit.

    Raises:
        InvalidSessionId: either id breaks the session id rule.
        InvalidArgument: the two ids are the same.
        SessionNotFound: no session has ``session_id``.
        SessionExists: a session already has ``new_id``; nothing changed.
    """
    validate_session_id(session_id)
    validate_session_id(new_id, "new session id")
    if new_id == session_id:
        raise InvalidArgument(f"the new session id is the session's id: {new_id!r}")

    def work(conn: Connection) -> tuple[None, list[Event]]:
        rename_session(conn, ctx.project, session_id, new_id)
        return None, [SessionRenamed(new_id, session_id)]

    return (yield from feed.transact_recorded(ctx, work))
