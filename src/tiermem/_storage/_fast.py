"""The hot statements, executed on the SQLite driver connection.

For a one-row ``UPDATE`` or a twenty-row ``SELECT`` on SQLite, SQLAlchemy's
per-execution machinery (execution context, result object, row processing)
costs several times what SQLite itself spends. The statements every turn runs
are therefore compiled once per dialect into what that machinery would send
anyway (the SQL string, the positional parameters and the type processors
SQLAlchemy itself applies to them and to the result columns) and executed on
the DB-API connection, inside the transaction the SQLAlchemy ``Connection``
opened.

Nothing else changes: the engine's ``before_cursor_execute`` and
``after_cursor_execute`` listeners are called with every statement (so
instrumentation and fault injection see the same statements), and driver
errors are raised as SQLAlchemy's ``DBAPIError``, as ``Connection.execute``
raises them, for :meth:`tiermem._storage.database.Database.run` to translate. On PostgreSQL
every statement goes through ``Connection.execute``: its disconnect detection
invalidates the pool's dead connections, and there the network round trip, not
Python, is the cost.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import exc
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["execute_sql", "fetch", "fetch_rows", "first", "write"]

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A statement as the SQLite driver gets it."""

    sql: str
    params: tuple[tuple[str, Any, Processor], ...]
    """Per ``?``: the parameter name, its literal value (if not passed) and its processor."""
    columns: tuple[str, ...]
    results: tuple[Processor, ...]


_MISSING = object()


# Keyed by dialect instance (one per engine): bounded, so a process that creates
# many engines does not keep them all alive.
@functools.lru_cache(maxsize=512)
def _compile(
    statement: Executable, dialect: Dialect, column_keys: tuple[str, ...] | None
) -> _Compiled:
    compiled = cast(
        SQLCompiler,
        cast(ClauseElement, statement).compile(
            dialect=dialect, column_keys=list(column_keys) if column_keys is not None else None
        ),
    )
    names = compiled.positiontup or []
    params = []
    for name in names:
        bind = compiled.binds[name]
        literal = _MISSING if bind.required else bind.effective_value
        processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
        params.append((name, literal, processor))
    exported = getattr(statement, "exported_columns", ())
    columns = tuple(column.key for column in exported)
    results = tuple(
        column.type.dialect_impl(dialect).result_processor(dialect, None) for column in exported
    )
    return _Compiled(compiled.string, tuple(params), columns, results)


def _arguments(compiled: _Compiled, values: Mapping[str, Any]) -> tuple[Any, ...]:
    args = []
    for name, literal, processor in compiled.params:
        value = values.get(name, literal)
        if value is _MISSING:
            raise exc.ArgumentError(f"no value for parameter {name!r}")
        args.append(processor(value) if processor is not None and value is not None else value)
    return tuple(args)


def execute_sql(conn: Connection, sql: str, args: Sequence[Any] = ()) -> Any:
    """Run ``sql`` on the driver connection with the engine's statement listeners
    and SQLAlchemy's error wrapping; returns the DB-API cursor."""
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    dispatch = conn.dispatch
    if dispatch.before_cursor_execute:
        for listener in dispatch.before_cursor_execute:
            sql, args = listener(conn, cursor, sql, args, None, False)
    try:
        cursor.execute(sql, args)
    except conn.dialect.loaded_dbapi.Error as error:
        raise exc.DBAPIError.instance(
            sql, args, error, conn.dialect.loaded_dbapi.Error, dialect=conn.dialect
        ) from error
    if dispatch.after_cursor_execute:
        for listener in dispatch.after_cursor_execute:
            listener(conn, cursor, sql, args, None, False)
    return cursor


def _run(
    conn: Connection,
    statement: Executable,
    values: Mapping[str, Any],
    column_keys: tuple[str, ...] | None,
) -> tuple[_Compiled, Any]:
    compiled = _compile(statement, conn.dialect, column_keys)
    return compiled, execute_sql(conn, compiled.sql, _arguments(compiled, values))


def _process(compiled: _Compiled, row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(
        value if processor is None or value is None else processor(value)
        for processor, value in zip(compiled.results, row, strict=True)
    )


def fetch_rows(
    conn: Connection,
    statement: Executable,
    values: Mapping[str, Any],
    *,
    column_keys: tuple[str, ...] | None = None,
) -> list[tuple[Any, ...]]:
    """The rows of ``statement`` as tuples, typed as SQLAlchemy would type them."""
    if conn.dialect.name != "sqlite":
        result = conn.execute(statement, dict(values))
        return [tuple(row) for row in result]
    compiled, cursor = _run(conn, statement, values, column_keys)
    rows = cursor.fetchall()
    cursor.close()
    if not any(compiled.results):
        return rows  # type: ignore[no-any-return]
    return [_process(compiled, row) for row in rows]


def fetch(
    conn: Connection,
    statement: Executable,
    values: Mapping[str, Any],
    *,
    column_keys: tuple[str, ...] | None = None,
) -> list[dict[str, Any]]:
    """The rows of ``statement`` as dicts keyed by column name."""
    if conn.dialect.name != "sqlite":
        return [dict(row) for row in conn.execute(statement, dict(values)).mappings()]
    columns = _compile(statement, conn.dialect, column_keys).columns
    return [
        dict(zip(columns, row, strict=True))
        for row in fetch_rows(conn, statement, values, column_keys=column_keys)
    ]


def first(
    conn: Connection,
    statement: Executable,
    values: Mapping[str, Any],
    *,
    column_keys: tuple[str, ...] | None = None,
) -> dict[str, Any] | None:
    """The first row of ``statement`` as a dict, or ``None``."""
    rows = fetch(conn, statement, values, column_keys=column_keys)
    return rows[0] if rows else None


def write(
    conn: Connection,
    statement: Executable,
    values: Mapping[str, Any],
    *,
    column_keys: tuple[str, ...] | None = None,
) -> int:
    """Run a statement that returns no rows; returns the driver's row count."""
    if conn.dialect.name != "sqlite":
        return int(conn.execute(statement, dict(values)).rowcount)
    _, cursor = _run(conn, statement, values, column_keys)
    count = int(cursor.rowcount)
    cursor.close()
    return count
