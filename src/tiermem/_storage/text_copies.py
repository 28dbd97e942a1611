"""How many times texts are stored in the tables that may hold a message's text
(:func:`tiermem.testing.stored_copies`)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

__all__ = ["MESSAGE_COLUMNS", "count_copies"]

#: The columns that may hold a message's text (the search indexes aside): an entry's
#: text and message JSON, a checkpoint and its metadata, a channel value, a pending
#: write.
MESSAGE_COLUMNS = {
    "tiermem_entry": ("content", "message"),
    "tiermem_checkpoint": ("checkpoint", "meta"),
    "tiermem_checkpoint_blob": ("value",),
    "tiermem_checkpoint_write": ("value",),
}


def count_copies(engine: Engine, texts: Sequence[str]) -> int:
    """Every occurrence of each of ``texts`` in the columns of :data:`MESSAGE_COLUMNS`."""
    stored: list[bytes] = []
    with engine.connect() as conn:
        for table, columns in MESSAGE_COLUMNS.items():
            for row in conn.execute(sa.text(f"SELECT {', '.join(columns)} FROM {table}")):
                stored += [v if isinstance(v, bytes) else str(v or "").encode() for v in row]
    everything = b"\x00".join(stored)
    return sum(everything.count(text.encode()) for text in texts)
