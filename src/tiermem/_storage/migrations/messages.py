"""The data rewrite that migrations of an entry's stored message share: every row of
``tiermem_entry`` read once, in batches by id, and written back where it changes.
Which form a stored message has is told by its text, which SQL's patterns cannot
tell exactly, so the rows are read rather than rewritten by one ``UPDATE``."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

__all__ = ["BATCH", "rewrite_messages"]

#: Rows read (and rewritten) per statement.
BATCH = 500


def rewrite_messages(bind: Connection, rewrite: Callable[[str, str], str]) -> None:
    """Give each entry the message ``rewrite(message, content)`` returns (its columns
    as stored); nothing when the table does not exist yet."""
    if not sa.inspect(bind).has_table("tiermem_entry"):
        return
    entry = sa.table("tiermem_entry", sa.column("id"), sa.column("content"), sa.column("message"))
    after = 0
    while True:
        rows = bind.execute(
            sa.select(entry.c.id, entry.c.message, entry.c.content)
            .where(entry.c.id > after)
            .order_by(entry.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        changed = [
            {"pk": pk, "rewritten": new}
            for pk, body, text in rows
            if (new := rewrite(body, text)) != body
        ]
        if changed:
            bind.execute(
                sa.update(entry)
                .where(entry.c.id == sa.bindparam("pk"))
                .values(message=sa.bindparam("rewritten")),
                changed,
            )
        after = rows[-1][0]
