"""Imported summaries are stored as compression and merges store them: one writer
(:func:`tiermem._storage.summaries.insert_summaries`) builds and inserts every row."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

import tiermem
from tiermem import MemoryConfig
from tiermem._storage.coverage import SUMMARY_OF
from tiermem._storage.schema import entry_table, session_table, summary_table
from tiermem.testing import FakeSummarizer, ManualClock

from ..conftest import MemoryFactory

S, E, M = session_table.c, entry_table.c, summary_table.c

#: Session columns that say what a session holds (its identity and access left out).
CONTENT_COLUMNS = (
    "memory_tier",
    "last_seq",
    "entry_count",
    "entry_tokens",
    "active_count",
    "active_tokens",
    "summary_count",
    "summary_tokens",
    "encoding",
    "pending_calls",
    "compressed_seq",
)


def stored_shape(engine: Engine, session_id: str) -> dict[str, Any]:
    """A session's summary rows (oldest first, by first seq then level) with every
    column but its id and session, parents and covered entries named by position in
    that order, and the session's counters and tier."""
    with engine.connect() as conn:
        session = (
            conn.execute(sa.select(session_table).where(S.session_id == session_id)).one()._asdict()
        )
        rows = [
            row._asdict()
            for row in conn.execute(
                sa.select(summary_table)
                .where(M.session_pk == session["pk"])
                .order_by(M.first_seq, M.level)
            )
        ]
        # The summary each entry is covered by, whether its row names it or its range's.
        links = conn.execute(
            sa.select(E.seq, SUMMARY_OF).where(E.session_pk == session["pk"]).order_by(E.seq)
        ).all()
    position = {row["id"]: index for index, row in enumerate(rows)}
    summaries = [
        {
            **{key: value for key, value in row.items() if key not in ("id", "session_pk")},
            "parent_id": None if row["parent_id"] is None else position[row["parent_id"]],
        }
        for row in rows
    ]
    return {
        "summaries": summaries,
        "covered": [(seq, None if sid is None else position[sid]) for seq, sid in links],
        "session": {name: session[name] for name in CONTENT_COLUMNS},
    }


def test_imported_summary_rows_have_the_shape_of_compressed_ones(
    make_memory: MemoryFactory, engine: Engine, clock: ManualClock
) -> None:
    """A compressed and merged session, exported and imported under another id, stores
    summary rows equal column by column (content, level, seqs, entry and token counts,
    times, parent), the same entries linked to each, and the same counters and tier."""
    memory = make_memory(
        config=MemoryConfig(auto_compress=False, summary_share=0.01, max_tokens=1_000),
        summarizer=FakeSummarizer(),
    )
    for turn in range(8):
        memory.add_user_message("s", f"question {turn}: what do the harbour records say")
        memory.add_assistant_message("s", f"answer {turn}: ships, tides and cargo")
        clock.advance(seconds=30)
        if turn % 2 == 1:
            memory.compress("s", force=True, keep=2)
    original = stored_shape(engine, "s")
    levels = [summary["level"] for summary in original["summaries"]]
    assert 1 in levels and max(levels) >= 2, "compression and a merge both wrote rows"
    assert any(summary["parent_id"] is not None for summary in original["summaries"])
    memory.import_session(memory.export_session("s"), session_id="copy")
    assert stored_shape(engine, "copy") == original


def test_only_the_summary_writer_inserts_summary_rows() -> None:
    """No module of the package but the summary table's own inserts into it."""
    source = Path(tiermem.__file__).parent
    inserting = {
        str(path.relative_to(source))
        for path in source.rglob("*.py")
        if "migrations" not in path.parts
        and re.search(r"insert\(\s*summary_table|INSERT_SUMMARY\b", path.read_text())
    }
    assert inserting == {"_storage/statements.py", "_storage/summaries.py"}
