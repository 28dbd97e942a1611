"""A session's new id, in SQL (:func:`tiermem._ops.rename.rename`).

A session's rows (entries, summaries, vectors, graph checkpoints) point at its
primary key, not at its id: a rename updates the session row and, so that the feed
names a session one way (and ``forget`` finds every event of it), the session id of
its earlier events.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import SessionExists, SessionNotFound
from . import sessions
from .event_schema import event_table

__all__ = ["rename_session"]

V = event_table.c


def rename_session(conn: Connection, project: str, session_id: str, new_id: str) -> None:
    """Give the session ``session_id`` of ``project`` the id ``new_id``.

    Raises:
        SessionNotFound: no session has ``session_id``.
        SessionExists: a session already has ``new_id`` (the unique constraint on a
            project's session ids says so, also of one created a moment before).
    """
    try:
        renamed = sessions.rename(conn, project, session_id, new_id)
    except sa.exc.IntegrityError as error:
        raise SessionExists(f"session {new_id!r} already exists in project {project!r}") from error
    if renamed == 0:
        raise SessionNotFound(f"session {session_id!r} not found in project {project!r}")
    conn.execute(
        sa.update(event_table)
        .where(V.project == project, V.session_id == session_id)
        .values(session_id=new_id)
    )
