"""Migration 0024: entries keep their message JSON packed. The upgrade changes no row
(rows of earlier versions read as they are); the downgrade unpacks every packed row,
exactly as the previous revision wrote it."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._core.messages import full_json, serialize, stored_message
from tiermem._core.packing import unpack
from tiermem._storage.migrations import upgrade

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

MESSAGES = [
    HumanMessage("Where did Ines move?", id="h-1"),
    AIMessage("Let me look.", id="a-1", tool_calls=[{"name": "notes", "args": {}, "id": "c-1"}]),
    ToolMessage("Ines moved to Porto in May.", tool_call_id="c-1"),
    AIMessage("She moved to Porto.", id="a-2", name="guide"),
]


def _columns(db: Engine) -> list[tuple[str, str]]:
    with db.connect() as conn:
        rows = conn.exec_driver_sql("SELECT content, message FROM tiermem_entry ORDER BY seq")
        return [(str(content), str(message)) for content, message in rows]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_downgrade_unpacks_every_row_and_the_upgrade_reads_both(url: str, db: Engine) -> None:
    upgrade(url)
    with ConversationMemory(url) as memory:
        memory.add_messages("s", MESSAGES)
    packed = _columns(db)
    assert all(unpack(message) != message for _, message in packed)

    downgrade(url, "0023")
    unpacked = _columns(db)
    assert unpacked == [(content, unpack(message)) for content, message in packed]
    # What 0023 reads: the JSON of each message, its text put back where it was left out.
    whole = [full_json(stored_message(message, content)) for content, message in unpacked]
    assert whole == [serialize(m, max_chars=10**6) for m in MESSAGES]

    upgrade(url)
    assert _columns(db) == unpacked  # the upgrade rewrites nothing
    with ConversationMemory(url) as memory:
        memory.add_messages("s", [HumanMessage("Stored after the upgrade.", id="h-3")])
        assert memory.get_messages("s") == [
            *MESSAGES,
            HumanMessage("Stored after the upgrade.", id="h-3"),
        ]
    with db.connect() as conn:
        newest = conn.execute(
            sa.text("SELECT message FROM tiermem_entry ORDER BY seq DESC LIMIT 1")
        ).scalar_one()
    assert unpack(newest) != newest
