"""The hot statements, executed on the driver connection.

For a one-row ``UPDATE`` or a twenty-row ``SELECT``, SQLAlchemy's per-execution
machinery (execution context, result object, row processing) costs several times
what SQLite itself spends, and on PostgreSQL, with several conversations per worker
process on two cores, more than the driver and the round trip cost that process.
The statements every turn runs are therefore compiled once per dialect into what
that machinery would send anyway (the SQL string, the parameters and the type
processors SQLAlchemy itself applies to them and to the result columns) and
executed on the DB-API connection, inside the transaction the SQLAlchemy
``Connection`` opened.

Nothing else changes: the engine's ``before_cursor_execute`` and
``after_cursor_execute`` listeners are called with every statement (so
instrumentation and fault injection see the same statements), driver errors are
raised as SQLAlchemy's ``DBAPIError``, as ``Connection.execute`` raises them, for
:meth:`tiermem._storage.database.Database.run` to translate. A connection that died
under a statement is invalidated when its transaction's rollback fails on it, so the
pool never hands it out again. A statement whose SQL SQLAlchemy completes only at
execution (an expanding ``IN``, a literal rendered then) goes through
``Connection.execute``.
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

__all__ = ["execute_many", "execute_sql", "fetch", "fetch_rows", "first", "write"]

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A statement as the driver gets it."""

    sql: str
    params: tuple[tuple[str, str, Any, Processor], ...]
    """Per parameter, in the order of the positional placeholders: its name, its name
    in the SQL string, its literal value (if not passed) and its processor."""
    positional: bool
    """Whether the driver takes a sequence (``?``, SQLite) or a mapping (``%(name)s``)."""
    columns: tuple[str, ...]
    results: tuple[Processor, ...]
    direct: bool
    """Whether it can go to the driver as it is: its SQL string is final (no part of it
    is rendered at execution) and its results' types are known without executing it."""


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
    positional = compiled.positional
    names = (compiled.positiontup or []) if positional else list(compiled.binds)
    escaped: Mapping[str, str] = compiled.escaped_bind_names or {}
    params = []
    for name in names:
        bind = compiled.binds[name]
        literal = _MISSING if bind.required else bind.effective_value
        processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
        params.append((name, escaped.get(name, name), literal, processor))
    exported = getattr(statement, "exported_columns", ())
    columns = tuple(column.key for column in exported)
    direct = not (compiled.literal_execute_params or compiled.post_compile_params)
    try:
        results = tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None) for column in exported
        )
    except (exc.SQLAlchemyError, TypeError):
        # A type whose conversion depends on the column's type as the server sends it
        # (psycopg's numerics, which fail without it): SQLAlchemy reads that at
        # execution, so it executes the statement.
        results, direct = (), False
    return _Compiled(compiled.string, tuple(params), positional, columns, results, direct)


def _arguments(compiled: _Compiled, values: Mapping[str, Any]) -> Any:
    args = []
    for name, _, literal, processor in compiled.params:
        value = values.get(name, literal)
        if value is _MISSING:
            raise exc.ArgumentError(f"no value for parameter {name!r}")
        args.append(processor(value) if processor is not None and value is not None else value)
    if compiled.positional:
        return tuple(args)
    return {key: value for (_, key, _, _), value in zip(compiled.params, args, strict=True)}


def execute_sql(conn: Connection, sql: str, args: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
    """Run ``sql`` on the driver connection with the engine's statement listeners
    and SQLAlchemy's error wrapping; returns the DB-API cursor."""
    return _run(conn, sql, args, many=False)


def execute_many(conn: Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """Run ``sql`` once per row of ``rows`` in one driver call (``executemany``), as
    :func:`execute_sql` runs one."""
    _run(conn, sql, rows, many=True).close()


def _run(conn: Connection, sql: str, args: Any, *, many: bool) -> Any:
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    dispatch = conn.dispatch
    if dispatch.before_cursor_execute:
        for listener in dispatch.before_cursor_execute:
            sql, args = listener(conn, cursor, sql, args, None, many)
    try:
        if many:
            cursor.executemany(sql, args)
        else:
            cursor.execute(sql, args)
    except conn.dialect.loaded_dbapi.Error as error:
        raise exc.DBAPIError.instance(
            sql, args, error, conn.dialect.loaded_dbapi.Error, dialect=conn.dialect
        ) from error
    if dispatch.after_cursor_execute:
        for listener in dispatch.after_cursor_execute:
            listener(conn, cursor, sql, args, None, many)
    return cursor


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
    compiled = _compile(statement, conn.dialect, column_keys)
    if not compiled.direct:
        return [tuple(row) for row in conn.execute(statement, dict(values))]
    cursor = execute_sql(conn, compiled.sql, _arguments(compiled, values))
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
    compiled = _compile(statement, conn.dialect, column_keys)
    if not compiled.direct:
        return int(conn.execute(statement, dict(values)).rowcount)
    cursor = execute_sql(conn, compiled.sql, _arguments(compiled, values))
    count = int(cursor.rowcount)
    cursor.close()
    return count
