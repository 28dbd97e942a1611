"""Migration 0022: entries keep their text once. The upgrade changes no row (whole
JSON rows of earlier versions read as they are); the downgrade puts the text back
into every hollow JSON, exactly as an earlier version wrote it."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._core.messages import serialize
from tiermem._core.packing import unpack
from tiermem._storage.migrations import upgrade

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

MESSAGES = [
    HumanMessage("Where did Ines move?", id="h-1"),
    AIMessage("Let me look.", id="a-1", tool_calls=[{"name": "notes", "args": {}, "id": "c-1"}]),
    ToolMessage("Ines moved to Porto in May.", tool_call_id="c-1"),
    AIMessage(content=[{"type": "text", "text": "She moved to Porto."}], id="a-2"),
    HumanMessage("A NUL \x00 in a question", id="h-2"),
]


def _columns(db: Engine) -> list[tuple[str, str]]:
    with db.connect() as conn:
        rows = conn.exec_driver_sql("SELECT content, message FROM tiermem_entry ORDER BY seq")
        return [(str(content), str(message)) for content, message in rows]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_downgrade_puts_every_text_back_and_the_upgrade_reads_both(
    url: str, db: Engine
) -> None:
    upgrade(url)
    with ConversationMemory(url) as memory:
        memory.add_messages("s", MESSAGES)
    hollow = _columns(db)
    whole = [serialize(m, max_chars=10**6) for m in MESSAGES]
    hollowed = [unpack(kept) != json for (_, kept), json in zip(hollow, whole, strict=True)]
    assert sum(hollowed) == 4  # the content blocks keep their text in their JSON

    downgrade(url, "0021")
    assert [message for _, message in _columns(db)] == whole
    assert [content for content, _ in _columns(db)] == [content for content, _ in hollow]

    upgrade(url)
    assert [message for _, message in _columns(db)] == whole  # the upgrade rewrites nothing
    with ConversationMemory(url) as memory:
        memory.add_messages("s", [HumanMessage("Stored after the upgrade.", id="h-3")])
        assert memory.get_messages("s") == [
            *MESSAGES,
            HumanMessage("Stored after the upgrade.", id="h-3"),
        ]
        assert MESSAGES[2] in [hit.entry.message for hit in memory.search("Ines moved")]
    with db.connect() as conn:
        newest = conn.execute(
            sa.text("SELECT message FROM tiermem_entry ORDER BY seq DESC LIMIT 1")
        ).scalar_one()
    assert "Stored after the upgrade." not in newest
