"""Test helpers: a canonical dump of the tiermem tables and a provider-shape check."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

from tiermem import RECALL_MARKER, is_summary_message

#: Session-row columns a failed compression may change by design: it releases its
#: claim and records the failure for the automatic trigger's backoff.
COMPRESSION_BOOKKEEPING = frozenset(
    {"claim_token", "claim_expires_at", "failures", "backoff_until"}
)

#: The change-feed events a failed compression writes by design (with the bookkeeping).
FAILURE_EVENTS = frozenset({"compression_failed"})


def canonical_dump(
    engine: Engine, *, ignore: Collection[str] = (), ignore_events: Collection[str] = ()
) -> str:
    """Every row of every ``tiermem*`` table, sorted, as one string.

    Args:
        ignore: column names left out of the dump (in every table).
        ignore_events: change-feed events of these kinds left out.
    """
    lines: list[str] = []
    with engine.connect() as conn:
        names = sorted(n for n in sa.inspect(conn).get_table_names() if n.startswith("tiermem"))
        for name in names:
            # Reflect only tables the models do not declare (reflection is slow).
            table = SQLModel.metadata.tables.get(name)
            if table is None:
                table = sa.Table(name, sa.MetaData(), autoload_with=conn)
            columns = [c for c in table.columns if c.name not in ignore]
            query = sa.select(*columns)
            if name == "tiermem_event" and ignore_events:
                query = query.where(table.c.kind.not_in(list(ignore_events)))
            rows = sorted(repr(tuple(row)) for row in conn.execute(query))
            lines.append(f"== {name} ({', '.join(c.name for c in columns)}): {len(rows)} rows")
            lines.extend(rows)
    return "\n".join(lines)


def dump_but_failure(engine: Engine) -> str:
    """:func:`canonical_dump` without what a failed compression writes by design (its
    bookkeeping columns and its ``compression_failed`` event)."""
    return canonical_dump(engine, ignore=COMPRESSION_BOOKKEEPING, ignore_events=FAILURE_EVENTS)


def assert_provider_valid(messages: Sequence[BaseMessage]) -> None:
    """Fail unless ``messages`` is a valid chat-model input: at most one leading system
    summary, and every assistant tool call immediately followed by exactly its results
    (OpenAI's and Anthropic's rule), with no tool result anywhere else."""
    summaries = [
        i
        for i, message in enumerate(messages)
        if is_summary_message(message) and RECALL_MARKER not in message.additional_kwargs
    ]
    assert summaries in ([], [0]), f"summary messages at {summaries}"
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        assert not isinstance(message, ToolMessage), f"tool result without its call at {index - 1}"
        if isinstance(message, AIMessage) and message.tool_calls:
            expected = {str(call["id"]) for call in message.tool_calls}
            answered: list[str] = []
            while index < len(messages) and isinstance(messages[index], ToolMessage):
                tool_message = messages[index]
                assert isinstance(tool_message, ToolMessage)
                answered.append(tool_message.tool_call_id)
                index += 1
            assert sorted(answered) == sorted(expected), (
                f"call {sorted(expected)} answered by {answered}"
            )


def pg_vector_sql(conn: sa.Connection, table: str) -> str:
    """PostgreSQL: how ``table``'s search vector is computed, wherever it lives: the
    expression of its stored ``fts`` column, else that of the function its GIN index
    is built on."""
    found = conn.exec_driver_sql(
        "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a "
        "JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        "WHERE a.attrelid = to_regclass(%(t)s) AND a.attname = 'fts' AND NOT a.attisdropped",
        {"t": table},
    ).scalar()
    if found is None:
        found = conn.exec_driver_sql(
            "SELECT pg_get_indexdef(to_regclass(%(i)s))", {"i": f"ix_{table}_fts"}
        ).scalar_one()
        assert found is not None, f"{table} has no search vector"
        found = found[found.index("USING gin (") + len("USING gin (") :]
        function = found[: found.index("(")]
        if function.endswith("_vector"):  # the body of the function the index calls
            body = conn.exec_driver_sql(
                "SELECT prosrc FROM pg_proc WHERE oid = to_regproc(%(f)s)", {"f": function}
            ).scalar_one()
            found = body.removeprefix("BEGIN RETURN ").removesuffix("; END")
    return str(found)


def has_stored_vector(conn: sa.Connection, table: str) -> bool:
    """PostgreSQL: whether ``table`` keeps its search vector in a column."""
    return bool(
        conn.exec_driver_sql(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass(%(t)s) "
            "AND attname = 'fts' AND NOT attisdropped",
            {"t": table},
        ).scalar_one()
    )


#: The logger of the storage layer's retries (a deadlock or serialization failure).
RETRY_LOGGER = "tiermem._storage.database"


def deadlock_retries(records: Sequence[logging.LogRecord]) -> list[str]:
    """The logged retries of transactions that failed with a deadlock (SQLSTATE
    40P01); a test captures :data:`RETRY_LOGGER` at INFO to see them."""
    return [r.getMessage() for r in records if "SQLSTATE 40P01" in r.getMessage()]
