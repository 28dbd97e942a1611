"""Migration 0023 and fresh databases: on PostgreSQL an entry's search vector lives in
the GIN index alone (the layer items' and documents' stay stored columns), searches
use that index, and the downgrade stores the vector again."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage import fts, search
from tiermem._storage.migrations import upgrade

from .helpers import has_stored_vector, pg_vector_sql
from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

TEXT = "Herons nest by the lake; the herons came back in March."


def _stored(db: Engine) -> dict[str, bool]:
    with db.connect() as conn:
        return {
            table: has_stored_vector(conn, table)
            for table in ("tiermem_entry", "tiermem_layer_item", "tiermem_document")
        }


def _plan(db: Engine) -> str:
    """The plan of a search's statement for the rows holding a word."""
    vector = fts.pg_vector(fts.ENTRY_INDEX, "e.")
    with db.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        rows = conn.exec_driver_sql(
            f"EXPLAIN SELECT e.id FROM tiermem_entry e WHERE {vector} @@ "
            f"to_tsquery('{fts.PG_CONFIG}', 'heron')"
        )
        return "\n".join(str(row[0]) for row in rows)


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_fresh_entry_vector_is_only_in_its_index(url: str, db: Engine) -> None:
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", TEXT)
        assert [hit.entry.content for hit in memory.search("heron")] == [TEXT]
    assert _stored(db) == {
        "tiermem_entry": False,
        "tiermem_layer_item": True,
        "tiermem_document": True,
    }
    with db.connect() as conn:
        assert pg_vector_sql(conn, "tiermem_entry").startswith("strip(to_tsvector('english'")
    assert "ix_tiermem_entry_fts" in _plan(db)


@pytest.mark.parametrize("backend", ["postgres"])
def test_the_upgrade_moves_the_vector_into_the_index_and_the_downgrade_back(
    url: str, db: Engine
) -> None:
    upgrade(url)
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", TEXT)

    downgrade(url, "0022")
    assert _stored(db)["tiermem_entry"]
    with db.connect() as conn:
        vector = conn.exec_driver_sql("SELECT fts FROM tiermem_entry").scalar_one()
        assert str(vector) == "'back' 'came' 'heron' 'lake' 'march' 'nest'"
        assert "gin (fts)" in str(
            conn.exec_driver_sql(
                "SELECT pg_get_indexdef('ix_tiermem_entry_fts'::regclass)"
            ).scalar_one()
        )

    upgrade(url)
    assert _stored(db) == {
        "tiermem_entry": False,
        "tiermem_layer_item": True,
        "tiermem_document": True,
    }
    assert "ix_tiermem_entry_fts" in _plan(db)
    with ConversationMemory(url) as memory:
        assert [hit.entry.content for hit in memory.search("lake herons")] == [TEXT]


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_common_word_is_read_from_the_index_not_computed_row_by_row(url: str, db: Engine) -> None:
    """Recall's first statement (the ids of a session's rows holding each word, up to
    an id) reads a common word's rows from the full-text index. Taking the session and
    the id bound as independent, the planner expected a few of the session's rows and
    computed the vector of each of its hundreds instead (an entry's vector is not
    stored): one recall took 40 ms."""
    with ConversationMemory(url) as memory:
        for session in ("s", "others"):  # the session's ids are the table's first
            memory.add_messages(session, [HumanMessage("I read chapter 0 today.")])
    with db.begin() as conn:
        # The session's 400 entries, a quarter of them holding the word, then 40,000
        # of another session (written in SQL: a planner test needs the numbers only).
        for session, count in (("s", 400), ("others", 40_000)):
            conn.exec_driver_sql(
                "INSERT INTO tiermem_entry (session_pk, seq, type, role, content, message,"
                " message_id, timestamp, token_count, pinned, meta)"
                " SELECT e.session_pk, e.seq + n, e.type, e.role,"
                " CASE WHEN n %% 4 = 0 THEN 'I read chapter ' ELSE 'I wrote chapter ' END || n,"
                " e.message, NULL, e.timestamp, e.token_count, e.pinned, e.meta"
                " FROM tiermem_entry e JOIN tiermem_session s ON s.pk = e.session_pk,"
                " generate_series(1, %(count)s) AS n WHERE s.session_id = %(session)s",
                {"count": count, "session": session},
            )
        conn.exec_driver_sql("ANALYZE tiermem_entry")
    with db.connect() as conn:
        pk, last = conn.exec_driver_sql(
            "SELECT s.pk, max(e.id) FROM tiermem_session s JOIN tiermem_entry e"
            " ON e.session_pk = s.pk WHERE s.session_id = 's' GROUP BY s.pk"
        ).one()
        where, params = search.pg_entry_scope("default", pk, last)
        statement = search.pg_word_rows(1, where)
        plan = "\n".join(
            str(row[0])
            for row in conn.execute(
                sa.text("EXPLAIN " + statement.text), {**params, "w0": "'read'", "n": 251}
            )
        )
    assert "Index Scan on ix_tiermem_entry_fts" in plan, plan
    assert "Filter: ((retired_at IS NULL) AND (tiermem_entry_fts_vector" not in plan, plan
