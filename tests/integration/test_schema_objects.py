"""What a database holds after ``create_tables``, or after the migrations, is exactly
what :mod:`tiermem._storage.tables` lists: nothing unlisted, nothing missing."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tiermem import create_tables
from tiermem._storage import fts
from tiermem._storage.migrations import VERSION_TABLE, upgrade
from tiermem._storage.tables import EXTRA_DDL, FULL_TEXT_INDEXES, TABLES

from .helpers import pg_vector_sql
from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

#: Kinds of schema objects compared, and the columns of every listed table.
Objects = dict[str, set[str]]

#: The tables FTS5 keeps behind an external-content index (SQLite).
_FTS5_SHADOWS = ("", "_data", "_idx", "_docsize", "_config")


def expected(dialect: str) -> Objects:
    """The objects the listing says a database of ``dialect`` holds; indexes that back
    a primary key or unique constraint are left out (the constraints' own)."""
    found: Objects = {
        "table": {table.name for table in TABLES},
        "index": {index.name for table in TABLES for index in table.indexes if index.name},
        "view": set(),
        "trigger": set(),
        "function": set(),
    }
    for table in TABLES:
        found[f"columns of {table.name}"] = {column.name for column in table.columns}
    for index in FULL_TEXT_INDEXES:
        if dialect == "sqlite":
            found["table"] |= {index.name + suffix for suffix in _FTS5_SHADOWS}
            if index.deferred:
                found["table"].add(f"{index.name}_pending")
            found["view"].add(f"{index.name}_src")
            found["trigger"] |= {f"{index.name}_{when}" for when in ("ai", "ad", "au")}
        else:
            found["index"].add(f"ix_{index.name}")
            if index.stored:
                found[f"columns of {index.table.name}"].add("fts")
            else:
                found["function"].add(f"{index.name}_vector")
    for extra in EXTRA_DDL:
        if extra.dialect == dialect:
            found["trigger"].add(extra.name)
            found["function"].add(extra.name)
    return found


def actual(conn: Connection) -> Objects:
    """The objects the connection's database (or PostgreSQL schema) holds."""
    if conn.dialect.name == "sqlite":
        rows = conn.exec_driver_sql(
            "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
        ).all()
        found: Objects = {kind: set() for kind in ("table", "index", "view", "trigger")}
        for kind, name in rows:
            found[kind].add(name)
        found["function"] = set()
    else:
        found = {
            "table": _names(
                conn, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            ),
            "view": _names(
                conn, "SELECT viewname FROM pg_views WHERE schemaname = current_schema()"
            ),
            "index": _names(
                conn,
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relnamespace = current_schema()::regnamespace "
                "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)",
            ),
            "trigger": _names(
                conn,
                "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal",
            ),
            "function": _names(
                conn,
                "SELECT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace",
            ),
        }
    inspector = sa.inspect(conn)
    for table in TABLES:
        if table.name in found["table"]:
            columns = inspector.get_columns(table.name)
            found[f"columns of {table.name}"] = {str(column["name"]) for column in columns}
    return found


def _names(conn: Connection, query: str) -> set[str]:
    return {str(name) for name in conn.exec_driver_sql(query).scalars()}


def test_create_tables_creates_exactly_the_listed_objects(engine: Engine) -> None:
    """Every listed table (with its columns), index, full-text index and trigger exists
    after ``create_tables``, and nothing else does."""
    create_tables(engine)
    with engine.connect() as conn:
        assert actual(conn) == expected(engine.dialect.name)


def test_migrations_create_exactly_the_listed_objects(url: str, db: Engine) -> None:
    """Migrating an empty database to the latest revision gives what ``create_tables``
    gives (and Alembic's version table)."""
    upgrade(url)
    with db.connect() as conn:
        found = actual(conn)
    assert VERSION_TABLE in found["table"]
    found["table"].discard(VERSION_TABLE)
    assert found == expected(db.dialect.name)


def _stemmed(conn: Connection, index: fts.FtsIndex) -> bool:
    """Whether a full-text index reduces words to their stems."""
    if conn.dialect.name == "sqlite":
        sql = conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE name = ?", (index.name,)
        ).scalar_one()
        return fts.SQLITE_TOKENIZER in str(sql)
    return f"'{fts.PG_CONFIG}'" in pg_vector_sql(conn, index.table.name)


def test_stemming_migration_covers_every_full_text_index(url: str, db: Engine) -> None:
    """Revision 0007 stems every listed full-text index (the documents' included), and
    its downgrade returns every one to revision 0006's words."""
    upgrade(url)
    downgrade(url, "0006")
    with db.connect() as conn:
        assert [_stemmed(conn, index) for index in FULL_TEXT_INDEXES] == [False] * 3
    upgrade(url)
    with db.connect() as conn:
        assert [_stemmed(conn, index) for index in FULL_TEXT_INDEXES] == [True] * 3
