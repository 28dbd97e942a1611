"""Query tokenizing and FTS5 query building: any text is words, never syntax."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage

from tiermem import ConversationMemory
from tiermem._storage import fts
from tiermem._storage.store import FTS_BATCH
from tiermem._storage.tables import create_tables

HOSTILE = [
    '"',
    '""',
    "'",
    "*",
    "a*",
    "AND",
    "OR NOT",
    "NEAR(",
    "NEAR(a b, 2)",
    "-",
    "-foo",
    ":",
    "col:value",
    "()",
    "(a OR",
    "^start",
    "{a b}: c",
    "'; DROP TABLE tiermem_entry; --",
    "\\",
    "%_",
    "café naïve",
    "東京タワー",
    "emoji \U0001f600 party",
    "tab\tnew\nline",
]


def test_tokenize_splits_on_everything_but_letters_and_digits() -> None:
    """Punctuation, underscores and operators separate words; words are lower-cased."""
    assert fts.tokenize('Deploy "FAILED" on host_42: error-code 3.14!') == [
        "deploy",
        "failed",
        "on",
        "host",
        "42",
        "error",
        "code",
        "3",
        "14",
    ]


def test_tokenize_deduplicates_and_caps_the_number_of_words() -> None:
    """Repeated words count once and a query keeps at most MAX_QUERY_WORDS words."""
    assert fts.tokenize("a b a B") == ["a", "b"]
    many = " ".join(f"w{i}" for i in range(100))
    assert len(fts.tokenize(many)) == fts.MAX_QUERY_WORDS


def test_tokenize_keeps_unicode_letters() -> None:
    """Accented, CJK and other non-ASCII letters stay inside words."""
    assert fts.tokenize("Café 東京タワー ÜBER") == ["café", "東京タワー", "über"]


@pytest.mark.parametrize("query", ["", "   ", "!!!", '"" * ()', "-:-"])
def test_tokenize_of_wordless_text_is_empty(query: str) -> None:
    """Text without letters or digits has no words."""
    assert fts.tokenize(query) == []


def test_fts5_query_quotes_a_word() -> None:
    """A word becomes one quoted FTS5 string; an embedded quote is doubled."""
    assert fts.fts5_query("near") == '"near"'
    assert fts.fts5_query('a"b') == '"a""b"'


def test_tsquery_any_quotes_each_word() -> None:
    """The PostgreSQL query ORs quoted lexemes; quotes and backslashes are escaped."""
    assert fts.tsquery_any(["and", "or"]) == "'and' | 'or'"
    assert fts.tsquery_any(["it's", "a\\b"]) == "'it''s' | 'a\\\\b'"


def test_partition_ranges_are_disjoint_and_hold_every_id() -> None:
    """Each partition owns the 2**32 rowids above its number shifted by 32 bits."""
    low, high = fts.partition_range(5)
    assert (low, high) == (5 << 32, (6 << 32) - 1)
    assert fts.partition_range(6)[0] == high + 1


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_text_is_a_valid_fts5_query(query: str) -> None:
    """Quotes, operators, column filters and unicode never become FTS5 syntax errors."""
    connection = sqlite3.connect(":memory:")
    connection.execute(
        "CREATE VIRTUAL TABLE t USING fts5(content, tokenize='unicode61 remove_diacritics 0')"
    )
    connection.execute("INSERT INTO t VALUES (?)", (f"stored {query} text",))
    for word in fts.tokenize(query):
        rows = connection.execute(
            "SELECT rowid FROM t WHERE t MATCH ?", (fts.fts5_query(word),)
        ).fetchall()
        assert rows == [(1,)], word
    connection.close()


def _engine(path: Path) -> sa.Engine:
    return sa.create_engine(f"sqlite:///{path}")


def test_install_is_idempotent_and_rebuilds_over_existing_rows(tmp_path: Path) -> None:
    """Installing twice is harmless, and an index installed over existing rows is complete."""
    engine = _engine(tmp_path / "db.sqlite")
    create_tables(engine)
    with engine.begin() as conn:
        fts.uninstall(conn, fts.ENTRY_INDEX)
        conn.exec_driver_sql(
            "INSERT INTO tiermem_session (project, session_id, created_at, last_accessed, "
            "access_count, memory_tier, last_seq, entry_count, entry_tokens, active_count, "
            "active_tokens, summary_count, summary_tokens, encoding, pending_calls, failures) "
            "VALUES ('p', 's', '2026-01-01', '2026-01-01', 0, 'active', 1, 1, 1, 1, 1, 0, 0, "
            "'cl100k_base', '{}', 0)"
        )
        conn.exec_driver_sql(
            "INSERT INTO tiermem_entry (session_pk, seq, type, role, content, message, "
            "timestamp, token_count, pinned, meta) VALUES (1, 1, 'message', 'user', "
            "'an older walrus fact', '{}', '2026-01-01', 1, 0, '{}')"
        )
    create_tables(engine)
    create_tables(engine)
    with engine.connect() as conn:
        found = conn.exec_driver_sql(
            "SELECT rowid FROM tiermem_entry_fts WHERE tiermem_entry_fts MATCH ?",
            (fts.fts5_query("walrus"),),
        ).all()
        conn.exec_driver_sql(
            "INSERT INTO tiermem_entry_fts(tiermem_entry_fts, rank) VALUES ('integrity-check', 1)"
        )
    assert [row[0] for row in found] == [(1 << 32) + 1]
    engine.dispose()


def test_uninstall_removes_every_object(tmp_path: Path) -> None:
    """Uninstalling drops the FTS table, its view and its triggers."""
    engine = _engine(tmp_path / "db.sqlite")
    create_tables(engine)
    with engine.begin() as conn:
        fts.uninstall(conn, fts.ENTRY_INDEX)
        names = {
            row[0]
            for row in conn.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE name LIKE 'tiermem_entry_fts%'"
            )
        }
    assert names == set()
    engine.dispose()


def test_a_partition_holds_only_its_own_rows(tmp_path: Path) -> None:
    """A session's rowid range holds that session's entries only."""
    engine = _engine(tmp_path / "db.sqlite")
    create_tables(engine)
    with engine.begin() as conn:
        for pk in (1, 2):
            conn.exec_driver_sql(
                "INSERT INTO tiermem_session (project, session_id, created_at, last_accessed, "
                "access_count, memory_tier, last_seq, entry_count, entry_tokens, active_count, "
                "active_tokens, summary_count, summary_tokens, encoding, pending_calls, "
                "failures) VALUES ('p', ?, '2026-01-01', '2026-01-01', 0, 'active', 0, 0, 0, "
                "0, 0, 0, 0, 'cl100k_base', '{}', 0)",
                (f"s{pk}",),
            )
        for session_pk, seq, text in (
            (1, 1, "apple pie"),
            (1, 2, "pear and apple"),
            (1, 3, "pear"),
            (2, 1, "apple"),
        ):
            conn.exec_driver_sql(
                "INSERT INTO tiermem_entry (session_pk, seq, type, role, content, message, "
                "timestamp, token_count, pinned, meta) VALUES (?, ?, 'message', 'user', ?, "
                "'{}', '2026-01-01', 1, 0, '{}')",
                (session_pk, seq, text),
            )
        fts.flush(conn)  # entries are indexed in batches
    with engine.connect() as conn:
        inside = _matching(conn, "apple OR pear", fts.partition_range(1))
        everywhere = _matching(conn, "apple")
    assert inside == {1, 2, 3}
    assert everywhere == {1, 2, 4}
    engine.dispose()


def _session_and_entries(conn: sa.Connection, texts: list[str]) -> None:
    conn.exec_driver_sql(
        "INSERT INTO tiermem_session (project, session_id, created_at, last_accessed, "
        "access_count, memory_tier, last_seq, entry_count, entry_tokens, active_count, "
        "active_tokens, summary_count, summary_tokens, encoding, pending_calls, failures) "
        "VALUES ('p', 's', '2026-01-01', '2026-01-01', 0, 'active', 0, 0, 0, 0, 0, 0, 0, "
        "'cl100k_base', '{}', 0)"
    )
    for seq, text in enumerate(texts, start=1):
        conn.exec_driver_sql(
            "INSERT INTO tiermem_entry (session_pk, seq, type, role, content, message, "
            "timestamp, token_count, pinned, meta) VALUES (1, ?, 'message', 'user', ?, "
            "'{}', '2026-01-01', 1, 0, '{}')",
            (seq, text),
        )


def _matching(conn: sa.Connection, query: str, rowids: tuple[int, int] = (0, 2**62)) -> set[int]:
    rows = conn.exec_driver_sql(
        "SELECT rowid FROM tiermem_entry_fts WHERE tiermem_entry_fts MATCH ? "
        "AND rowid BETWEEN ? AND ?",
        (query, *rowids),
    )
    return {rowid & 0xFFFFFFFF for (rowid,) in rows}


def _integrity_check(conn: sa.Connection) -> None:
    conn.exec_driver_sql(
        "INSERT INTO tiermem_entry_fts(tiermem_entry_fts, rank) VALUES ('integrity-check', 1)"
    )


def test_deferred_entries_are_indexed_by_a_flush(tmp_path: Path) -> None:
    """A new entry waits in the pending table (the index stays consistent without it)
    until a flush indexes every pending entry at once."""
    engine = _engine(tmp_path / "db.sqlite")
    create_tables(engine)
    with engine.begin() as conn:
        _session_and_entries(conn, ["walrus one", "walrus two"])
        assert _matching(conn, "walrus") == set()
        _integrity_check(conn)
        fts.flush(conn)
        assert _matching(conn, "walrus") == {1, 2}
        pending = conn.exec_driver_sql("SELECT count(*) FROM tiermem_entry_fts_pending").scalar()
        assert pending == 0
        _integrity_check(conn)
    engine.dispose()


def test_deleting_or_editing_pending_and_indexed_entries_keeps_the_index_exact(
    tmp_path: Path,
) -> None:
    """Deleting a pending entry never touches the index (an FTS5 delete of a row never
    added would corrupt it); deleting an indexed one removes it; an edited entry is
    indexed again, with its new text, by the next flush."""
    engine = _engine(tmp_path / "db.sqlite")
    create_tables(engine)
    with engine.begin() as conn:
        _session_and_entries(conn, ["otter indexed", "otter gone", "otter edited"])
        fts.flush(conn)
        conn.exec_driver_sql(
            "INSERT INTO tiermem_entry (session_pk, seq, type, role, content, message, "
            "timestamp, token_count, pinned, meta) VALUES (1, 4, 'message', 'user', "
            "'otter pending', '{}', '2026-01-01', 1, 0, '{}')"
        )
        conn.exec_driver_sql("DELETE FROM tiermem_entry WHERE id IN (2, 4)")
        conn.exec_driver_sql("UPDATE tiermem_entry SET content = 'beaver now' WHERE id = 3")
        _integrity_check(conn)
        assert _matching(conn, "otter") == {1}
        assert _matching(conn, "beaver") == set()
        fts.flush(conn)
        _integrity_check(conn)
        assert _matching(conn, "otter") == {1}
        assert _matching(conn, "beaver") == {3}
    engine.dispose()


def test_an_immediate_index_of_the_older_layout_is_rebuilt_deferred(tmp_path: Path) -> None:
    """A database whose entry index has per-row triggers (the older layout)
    is rebuilt on open, complete, and the other way round."""
    engine = _engine(tmp_path / "db.sqlite")
    create_tables(engine)
    immediate = dataclasses.replace(fts.ENTRY_INDEX, deferred=False)
    with engine.begin() as conn:
        fts.install_index(conn, immediate)
        _session_and_entries(conn, ["heron"])
        assert _matching(conn, "heron") == {1}  # indexed by its own trigger
    create_tables(engine)  # what opening a memory does
    with engine.begin() as conn:
        assert _matching(conn, "heron") == {1}
        conn.exec_driver_sql(
            "INSERT INTO tiermem_entry (session_pk, seq, type, role, content, message, "
            "timestamp, token_count, pinned, meta) VALUES (1, 2, 'message', 'user', "
            "'heron again', '{}', '2026-01-01', 1, 0, '{}')"
        )
        assert _matching(conn, "heron") == {1}  # deferred now
        fts.install_index(conn, immediate)  # back: pending entries are indexed too
        assert _matching(conn, "heron") == {1, 2}
        _integrity_check(conn)
    engine.dispose()


def test_many_short_sessions_never_pile_up_unindexed_entries(tmp_path: Path) -> None:
    """The flush cadence follows entries stored anywhere: 60 sessions of 3 entries each
    (each far shorter than a batch) leave fewer than a batch pending, so no append
    ever has to index a backlog."""
    memory = ConversationMemory(f"sqlite:///{tmp_path / 'db.sqlite'}")
    for index in range(60):
        memory.add_messages(
            f"s{index}",
            [HumanMessage(f"heron {index}"), AIMessage("seen"), HumanMessage("thanks")],
        )
    with memory.engine.connect() as conn:
        pending = conn.exec_driver_sql("SELECT count(*) FROM tiermem_entry_fts_pending").scalar()
    assert pending is not None and pending < FTS_BATCH
    assert len(memory.search("heron", limit=100)) == 60
    memory.close()


def test_an_import_indexes_its_own_entries(tmp_path: Path) -> None:
    """An imported session's entries are indexed by the import, not left for a later
    append to index."""
    memory = ConversationMemory(f"sqlite:///{tmp_path / 'db.sqlite'}")
    memory.add_messages("s", [HumanMessage(f"egret {i}") for i in range(40)])
    state = memory.export_session("s")
    memory.import_session(state, session_id="copy")
    with memory.engine.connect() as conn:
        pending = conn.exec_driver_sql("SELECT count(*) FROM tiermem_entry_fts_pending").scalar()
    assert pending == 0
    assert len(memory.search("egret", session_id="copy", limit=100)) == 40
    memory.close()
