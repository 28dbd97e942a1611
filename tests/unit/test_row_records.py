"""The typed row records name exactly the columns of their tables, in order, so a
whole-table SELECT builds them by keyword or by position."""

from __future__ import annotations

import dataclasses

import pytest
import sqlalchemy as sa

from tiermem._storage.layer_schema import item_table
from tiermem._storage.rows import EntryRecord, ItemRecord, SessionRecord, SummaryRecord
from tiermem._storage.schema import entry_table, session_table, summary_table


@pytest.mark.parametrize(
    ("record", "table"),
    [
        (SessionRecord, session_table),
        (SummaryRecord, summary_table),
        (EntryRecord, entry_table),
        (ItemRecord, item_table),
    ],
)
def test_a_record_has_a_field_per_column(record: type, table: sa.Table) -> None:
    """Each record has one field per column of its table, in the table's order."""
    assert [field.name for field in dataclasses.fields(record)] == list(table.c.keys())


def test_a_session_record_is_built_from_its_row_and_changed_by_replacing_it() -> None:
    """A session record reads a whole-table row by name; it is immutable, so a change
    is a new record."""
    engine = sa.create_engine("sqlite://")
    session_table.create(engine)
    with engine.begin() as conn:
        conn.execute(
            session_table.insert().values(
                project="p",
                session_id="s",
                created_at=sa.func.current_timestamp(),
                last_accessed=sa.func.current_timestamp(),
                encoding="cl100k_base",
                active_tokens=5,
                summary_tokens=7,
            )
        )
        row = conn.execute(sa.select(session_table)).mappings().one()
    record = SessionRecord.from_row(row)
    assert (record.session_id, record.context_tokens, record.pending_calls) == ("s", 12, "{}")
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.access_count = 1  # type: ignore[misc]
    touched = dataclasses.replace(record, access_count=1)
    assert (touched.access_count, record.access_count, touched.pk) == (1, 0, record.pk)
