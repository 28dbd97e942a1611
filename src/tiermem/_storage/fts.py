"""Full-text indexes: SQLite FTS5 and PostgreSQL ``tsvector``, kept in step in SQL.

Each indexed table is described by an :class:`FtsIndex` (every one is listed in
:data:`tiermem._storage.tables.FULL_TEXT_INDEXES`). :func:`install_index` (which
:func:`tiermem._storage.tables.create_tables` and the migrations run) creates,
idempotently:

* on SQLite, a view that yields the indexed text of each row, an
  external-content FTS5 table over that view and triggers on the base table
  that keep the index in step with every insert, update and delete inside the
  writing transaction (an index created over existing rows is rebuilt);
* on SQLite, for a *deferred* index (conversation entries), inserts only
  record the row in a ``<name>_pending`` table, and :func:`flush` indexes the
  pending rows in one statement. FTS5 pays a fixed cost per transaction that
  writes to it, several times SQLite's cost of the row itself, so entries are
  indexed every few appends (see ``tiermem._storage.store.FTS_BATCH``) instead of in each;
  search flushes first, so it always sees every committed entry. The view
  leaves pending rows out, so the index always equals its content;
* on PostgreSQL, a GIN index without a pending list (``fastupdate=off``) on the
  rows' ``tsvector`` (without word positions where no search ranks by them, see
  :attr:`FtsIndex.positions`): for conversation entries on the vector's
  expression alone, elsewhere on a ``GENERATED ALWAYS ... STORED`` column that a
  ranking reads (see :attr:`FtsIndex.stored`).

On SQLite a row's FTS5 rowid is ``(partition << 32) + id``, where the
partition is the row's session (entries) or scope and layer (layer items):
the rows of one partition occupy one contiguous rowid range, so a term's
matches inside a partition are read with ``rowid BETWEEN`` from that range
alone, however common the term is elsewhere. Ids must stay below 2**32.

Only the first :data:`MAX_INDEXED_CHARS` characters of a text are indexed, so
a 10 MB entry costs a bounded amount of work and never exceeds PostgreSQL's
1 MB ``tsvector`` limit. Both backends split text into runs of letters and
digits (PostgreSQL's parser would otherwise keep ``3.14``, URLs and e-mail
addresses as single tokens), lower-case it, keep diacritics and reduce English
words to their stems, so "trips" finds "trip" and "hiking" finds "hike": FTS5's
``porter unicode61`` tokenizer, PostgreSQL's ``english`` configuration (Snowball;
it also leaves English stopwords out of the index). The two stemmers agree on
common words and differ on a few rare ones.

Queries are text, never syntax: :func:`query_words` reduces any string to its
words (letters and digits) without English stopwords ("what", "the", "did"),
which carry no meaning and would match most rows; the words are OR-ed as quoted
FTS5 strings or quoted ``to_tsquery`` lexemes, and ranking (BM25) happens in
:mod:`tiermem._storage.search`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import _fast as _driver
from .schema import entry_table

__all__ = [
    "ENTRY_INDEX",
    "MAX_INDEXED_CHARS",
    "MAX_QUERY_WORDS",
    "PG_SEPARATORS",
    "FtsColumn",
    "FtsIndex",
    "flush",
    "fts5_query",
    "install_index",
    "pg_vector",
    "PG_CONFIG",
    "SQLITE_TOKENIZER",
    "STOPWORDS",
    "fts5_any",
    "partition_range",
    "query_words",
    "set_pending_list",
    "tokenize",
    "tsquery_any",
    "uninstall",
    "words",
]

#: Characters of a text that are indexed (the rest is stored, not searchable).
MAX_INDEXED_CHARS = 100_000
#: Words of a query that are used; the rest are ignored.
MAX_QUERY_WORDS = 32
_MAX_WORD_CHARS = 200
_ID_BITS = 32
_ID_MASK = (1 << _ID_BITS) - 1
_WORD = re.compile(r"[^\W_]+")
#: PostgreSQL: what separates words (the same pattern on rows and on queries).
PG_SEPARATORS = "[^[:alnum:]]+"
#: PostgreSQL: the text search configuration of every index and query.
PG_CONFIG = "english"
#: SQLite: the FTS5 tokenizer of every index (the same words as PostgreSQL's, stemmed).
SQLITE_TOKENIZER = "porter unicode61 remove_diacritics 0"
_UNSTEMMED_TOKENIZER = "unicode61 remove_diacritics 0"

#: Words a query ignores: PostgreSQL's English stopword list (which its ``english``
#: configuration leaves out of the index), so both backends ignore the same words.
STOPWORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him
    his himself she her hers herself it its itself they them their theirs themselves what
    which who whom this that these those am is are was were be been being have has had
    having do does did doing a an the and but if or because as until while of at by for
    with about against between into through during before after above below to from up
    down in out on off over under again further then once here there when where why how
    all any both each few more most other some such no nor not only own same so than too
    very s t can will just don should now""".split()
)


@dataclass(frozen=True, slots=True)
class FtsColumn:
    """One indexed text of a row.

    Attributes:
        name: the column's name in the FTS5 table.
        sql: the SQL expression of its text, with ``{r}`` where the row's
            qualifier goes (``new.``, ``old.`` or nothing).
    """

    name: str
    sql: str


@dataclass(frozen=True, slots=True)
class FtsIndex:
    """A full-text index over one table whose integer primary key is ``id``.

    Attributes:
        name: the FTS5 table (SQLite); also the prefix of the view, triggers
            and GIN index names.
        table: the indexed table.
        partition_sql: SQLite: the expression (with ``{r}``) of a row's
            partition, the high bits of its FTS5 rowid.
        columns: the indexed texts.
        deferred: SQLite: new rows wait in ``<name>_pending`` until :func:`flush`.
        positions: PostgreSQL: the ``tsvector`` keeps where each word occurs, which
            ``ts_rank`` reads. Without them (``strip``) it holds each word once, a
            third of its size or less; a search that only asks which words a row
            holds (:func:`tiermem._storage.search.pg_candidates`) needs no more.
        stored: PostgreSQL: the ``tsvector`` is a stored generated column (``fts``)
            with a GIN index on it; otherwise only the GIN index holds it (an
            expression index) and the rows keep their text alone. A vector is
            about the size of its text; stored, every row carries it, and every
            update of the row copies it. A search that reads only which rows hold
            a word (:func:`~tiermem._storage.search.pg_candidates`) never computes
            it again; one that reads the vector itself needs it stored.
    """

    name: str
    table: sa.Table
    partition_sql: str
    columns: tuple[FtsColumn, ...]
    deferred: bool = False
    positions: bool = True
    stored: bool = True


def _limited(column: str) -> str:
    return f"substr({{r}}{column}, 1, {MAX_INDEXED_CHARS})"


#: Conversation entries, partitioned by session.
ENTRY_INDEX = FtsIndex(
    name="tiermem_entry_fts",
    table=entry_table,
    partition_sql="{r}session_pk",
    columns=(FtsColumn("content", _limited("content")),),
    deferred=True,
    positions=False,
    stored=False,
)


# --------------------------------------------------------------------------- queries


def words(text: str) -> list[str]:
    """Every word of ``text`` (runs of letters and digits), lower-cased, in order."""
    return [word.lower() for word in _WORD.findall(text)]


def tokenize(text: str, limit: int | None = MAX_QUERY_WORDS) -> list[str]:
    """The distinct words of ``text`` (runs of letters and digits), lower-cased, in
    order, at most ``limit`` of them (``None``: all); punctuation, quotes and
    operators are separators."""
    found: dict[str, None] = {}
    for match in _WORD.finditer(text):
        found.setdefault(match.group().lower()[:_MAX_WORD_CHARS])
        if len(found) == limit:
            break
    return list(found)


def query_words(text: str, limit: int | None = MAX_QUERY_WORDS) -> list[str]:
    """The words of a query that are searched: :func:`tokenize` (up to ``limit``
    words) without :data:`STOPWORDS` (a query of stopwords only searches nothing)."""
    return [word for word in tokenize(text, limit) if word not in STOPWORDS]


def fts5_any(found: Sequence[str]) -> str:
    """The FTS5 MATCH expression of rows containing any of ``found``."""
    return " OR ".join(fts5_query(word) for word in found)


def fts5_query(word: str) -> str:
    """The FTS5 MATCH expression of one word: a quoted string, never an operator."""
    return '"' + word.replace('"', '""') + '"'


def tsquery_any(found: Sequence[str]) -> str:
    """``to_tsquery`` input matching any of ``found`` (each a quoted lexeme)."""
    return " | ".join("'" + word.replace("'", "''").replace("\\", "\\\\") + "'" for word in found)


def partition_range(partition: int) -> tuple[int, int]:
    """The FTS5 rowids of one partition (SQLite)."""
    low = partition << _ID_BITS
    return low, low + _ID_MASK


# --------------------------------------------------------------------------- DDL


def _rowid(index: FtsIndex, r: str) -> str:
    return f"(({index.partition_sql.format(r=r)}) << {_ID_BITS}) + {r}id"


def _sqlite_install(conn: Connection, index: FtsIndex, tokenizer: str) -> None:
    table, name = index.table.name, index.name
    names = ", ".join(column.name for column in index.columns)
    pending = f"{name}_pending"
    view = (
        f"CREATE VIEW {name}_src AS SELECT {_rowid(index, '')} AS fts_rowid, "
        + ", ".join(f"{column.sql.format(r='')} AS {column.name}" for column in index.columns)
        + f" FROM {table}"
        + (f" WHERE id NOT IN (SELECT id FROM {pending})" if index.deferred else "")
    )
    fts_table = (
        f"CREATE VIRTUAL TABLE {name} USING fts5({names}, content='{name}_src', "
        f"content_rowid='fts_rowid', tokenize='{tokenizer}')"
    )
    existing: dict[str, str] = dict(
        conn.exec_driver_sql(
            "SELECT type, sql FROM sqlite_master WHERE name IN (?, ?)", (f"{name}_src", name)
        ).all()
    )
    if existing and existing != {"view": view, "table": fts_table}:
        uninstall(conn, index)  # an index of an older layout or tokenizer: rebuild it
        existing = {}
    if existing:
        return
    if index.deferred:
        conn.exec_driver_sql(f"CREATE TABLE {pending} (id INTEGER PRIMARY KEY)")
    conn.exec_driver_sql(view)
    conn.exec_driver_sql(fts_table)

    def values(r: str) -> str:
        return ", ".join([_rowid(index, r)] + [column.sql.format(r=r) for column in index.columns])

    insert = f"INSERT INTO {name}(rowid, {names}) VALUES ({values('new.')});"
    delete = f"INSERT INTO {name}({name}, rowid, {names}) VALUES ('delete', {values('old.')});"
    if index.deferred:
        # A pending row is not in the index: removing it must not touch the index
        # (an FTS5 'delete' of a row never added would corrupt it). An updated
        # row is indexed again by the next flush.
        indexed = f"NOT EXISTS (SELECT 1 FROM {pending} WHERE id = old.id)"
        delete = (
            f"INSERT INTO {name}({name}, rowid, {names}) "
            f"SELECT 'delete', {values('old.')} WHERE {indexed}; "
            f"DELETE FROM {pending} WHERE id = old.id;"
        )
        insert = f"INSERT OR IGNORE INTO {pending}(id) VALUES (new.id);"
    watched = ", ".join(sorted(_referenced(index)))
    for suffix, when, body in (
        ("ai", f"AFTER INSERT ON {table}", insert),
        ("ad", f"AFTER DELETE ON {table}", delete),
        ("au", f"AFTER UPDATE OF {watched} ON {table}", delete + " " + insert),
    ):
        conn.exec_driver_sql(f"CREATE TRIGGER {name}_{suffix} {when} BEGIN {body} END")
    # A new index over existing rows (an upgraded database) starts complete.
    conn.exec_driver_sql(f"INSERT INTO {name}({name}) VALUES ('rebuild')")


@functools.cache
def _flush_statements(index: FtsIndex) -> tuple[str, str]:
    name, pending = index.name, f"{index.name}_pending"
    names = ", ".join(column.name for column in index.columns)
    exprs = ", ".join([_rowid(index, "")] + [column.sql.format(r="") for column in index.columns])
    return (
        f"INSERT INTO {name}(rowid, {names}) SELECT {exprs} FROM {index.table.name} "
        f"WHERE id IN (SELECT id FROM {pending})",
        f"DELETE FROM {pending}",
    )


def flush(conn: Connection, index: FtsIndex = ENTRY_INDEX) -> None:
    """Index the pending rows of a deferred index, in the caller's transaction
    (SQLite; a no-op on PostgreSQL, whose index is a generated column)."""
    if conn.dialect.name != "sqlite" or not index.deferred:
        return
    for statement in _flush_statements(index):
        _driver.execute_sql(conn, statement).close()


def _columns_read(*sql: str) -> set[str]:
    """Columns of the base table that the expressions ``sql`` (with ``{r}``) read."""
    return set(re.findall(r"\{r\}(\w+)", " ".join(sql)))


def _referenced(index: FtsIndex) -> set[str]:
    """Columns of the base table the indexed expressions read."""
    return _columns_read(index.partition_sql, "{r}id", *(column.sql for column in index.columns))


def _pg_expression(index: FtsIndex, config: str, qualifier: str = "") -> str:
    parts = [
        f"to_tsvector('{config}'::regconfig, regexp_replace("
        f"{column.sql.format(r=qualifier)}, '{PG_SEPARATORS}', ' ', 'g'))"
        for column in index.columns
    ]
    vector = " || ".join(parts)
    return vector if index.positions else f"strip({vector})"


#: GIN's pending list (``fastupdate``, on by default) keeps new rows' words unsorted
#: and uncompressed until a vacuum or 4 MB of them: a conversation's index was seven
#: times the size of the same index built at once, and every search read the whole
#: list. Inserted straight into the tree, an entry's words cost no measurable time
#: of a turn (issue 32's checkpointer benchmark) and the index stays compact.
_GIN_OPTIONS = "fastupdate=off"


def _pg_index_definition(conn: Connection, index: FtsIndex) -> str | None:
    return conn.exec_driver_sql(
        "SELECT pg_get_indexdef(to_regclass(%(i)s))", {"i": f"ix_{index.name}"}
    ).scalar()


#: The planner's cost of computing one row's vector, in units of ``cpu_operator_cost``
#: (0.0025): about 100 microseconds for 500 characters, measured. At
#: ``to_tsvector``'s own cost (100) the planner judged it cheaper to compute the vector
#: of each of a session's 400 rows than to read the GIN index for a common word, and
#: one recall took 40 ms instead of one.
_PG_VECTOR_COST = 2000


def _pg_function(index: FtsIndex) -> str:
    """The name of the function computing an unstored index's vector."""
    return f"{index.name}_vector"


def _pg_arguments(index: FtsIndex) -> list[str]:
    """The columns an unstored index's function takes (those its texts read), in order."""
    return sorted(_columns_read(*(column.sql for column in index.columns)))


def pg_vector(index: FtsIndex, qualifier: str) -> str:
    """PostgreSQL: the SQL of a row's ``tsvector`` in a query whose row is
    ``qualifier`` (``"e."``): its stored column, or the call its index is built on
    (written the same way, so the planner uses the index)."""
    if index.stored:
        return f"{qualifier}fts"
    arguments = ", ".join(qualifier + column for column in _pg_arguments(index))
    return f"{_pg_function(index)}({arguments})"


def _pg_install_expression(conn: Connection, index: FtsIndex, config: str) -> None:
    """The GIN index on the vector's function; a stored column (an older layout) is
    dropped with its index first.

    The vector is computed by a PL/pgSQL function rather than written out in the
    index: a function of SQL would be inlined, and the planner would cost it as
    ``to_tsvector`` (see :data:`_PG_VECTOR_COST`).
    """
    table, name, function = index.table.name, index.name, _pg_function(index)
    parameters = ", ".join(f"{column} text" for column in _pg_arguments(index))
    body = f"BEGIN RETURN {_pg_expression(index, config)}; END"
    column = conn.exec_driver_sql(
        "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%(t)s) "
        "AND attname = 'fts' AND NOT attisdropped",
        {"t": table},
    ).scalar()
    if column is not None:
        uninstall(conn, index)
    found = conn.exec_driver_sql(
        "SELECT prosrc, procost FROM pg_proc WHERE oid = to_regproc(%(f)s)", {"f": function}
    ).first()
    if found is None or found[0] != body or found[1] != _PG_VECTOR_COST:
        # Other words or positions (or none yet): the index is rebuilt on the new one.
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS ix_{name}")
        conn.exec_driver_sql(
            f"CREATE OR REPLACE FUNCTION {function}({parameters}) RETURNS tsvector "
            f"LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST {_PG_VECTOR_COST} "
            f"AS $body${body}$body$"
        )
    definition = _pg_index_definition(conn, index)
    if definition is None:
        conn.exec_driver_sql(
            f"CREATE INDEX IF NOT EXISTS ix_{name} ON {table} "
            f"USING gin ({pg_vector(index, '')}) WITH ({_GIN_OPTIONS})"
        )
    elif _GIN_OPTIONS not in definition:
        set_pending_list(conn, index, enabled=False)


def _pg_install(conn: Connection, index: FtsIndex, config: str) -> None:
    if not index.stored:
        _pg_install_expression(conn, index, config)
        return
    table, name = index.table.name, index.name
    definition = _pg_index_definition(conn, index)
    if definition is not None and "gin (fts)" not in definition:
        conn.exec_driver_sql(f"DROP INDEX ix_{name}")  # on a function: rebuilt on fts
        conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {_pg_function(index)}")
    # Catalog checks first: ALTER/CREATE INDEX would take table locks even when
    # there is nothing to do, and block behind running writers.
    expression = conn.exec_driver_sql(
        "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a "
        "JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        "WHERE a.attrelid = to_regclass(%(t)s) AND a.attname = 'fts' AND NOT a.attisdropped",
        {"t": table},
    ).scalar()
    stripped = expression is not None and expression.startswith("strip(")
    if expression is not None and (f"'{config}'" not in expression or stripped == index.positions):
        uninstall(conn, index)  # an index of other words or positions: rebuild it
        expression = None
    if expression is None:
        conn.exec_driver_sql(
            f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS fts tsvector "
            f"GENERATED ALWAYS AS ({_pg_expression(index, config)}) STORED"
        )
    options = conn.exec_driver_sql(
        "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = to_regclass(%(i)s)",
        {"i": f"ix_{name}"},
    ).scalar()
    if options is None:
        conn.exec_driver_sql(
            f"CREATE INDEX IF NOT EXISTS ix_{name} ON {table} USING gin (fts) WITH ({_GIN_OPTIONS})"
        )
    elif _GIN_OPTIONS not in options:
        set_pending_list(conn, index, enabled=False)


def set_pending_list(conn: Connection, index: FtsIndex, *, enabled: bool) -> None:
    """PostgreSQL: turn an existing GIN index's pending list on (PostgreSQL's
    default) or off; turned off, what the list holds moves into the index."""
    name = f"ix_{index.name}"
    if enabled:
        conn.exec_driver_sql(f"ALTER INDEX {name} RESET (fastupdate)")
        return
    conn.exec_driver_sql(f"ALTER INDEX {name} SET ({_GIN_OPTIONS})")
    conn.exec_driver_sql("SELECT gin_clean_pending_list(%(i)s::regclass)", {"i": name})


def install_index(conn: Connection, index: FtsIndex, *, stemmed: bool = True) -> None:
    """Create one full-text index if it is missing; an index of another layout (an
    older view, deferred where ``index`` is not) or of other words (stemmed where
    ``stemmed`` is false, or the reverse) is rebuilt."""
    if conn.dialect.name == "postgresql":
        _pg_install(conn, index, PG_CONFIG if stemmed else "simple")
    else:
        _sqlite_install(conn, index, SQLITE_TOKENIZER if stemmed else _UNSTEMMED_TOKENIZER)


def uninstall(conn: Connection, index: FtsIndex) -> None:
    """Drop one full-text index with its view, triggers or column."""
    name, table = index.name, index.table.name
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS ix_{name}")
        conn.exec_driver_sql(f"ALTER TABLE IF EXISTS {table} DROP COLUMN IF EXISTS fts")
        conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {_pg_function(index)}")
        return
    for suffix in ("ai", "ad", "au"):
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}_{suffix}")
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
    conn.exec_driver_sql(f"DROP VIEW IF EXISTS {name}_src")
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}_pending")
