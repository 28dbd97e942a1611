"""Filters compile to SQL JSON expressions of each dialect (never Python over rows)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from tiermem._storage import document_filters as document_store
from tiermem.errors import InvalidArgument


def _sql(dialect: str, spec: dict[str, object]) -> str:
    clause = document_store.filter_clause(dialect, spec)
    target: sa.Dialect = (
        sqlite.dialect() if dialect == "sqlite" else postgresql.dialect()  # type: ignore[no-untyped-call]
    )
    return str(sa.select(sa.literal(1)).where(clause).compile(dialect=target))


def test_sqlite_uses_json_extract() -> None:
    """On SQLite a dotted path and an operator become json_extract/json_type conditions."""
    sql = _sql("sqlite", {"meta.score": {"$gte": 3}, "kind": "note"})
    assert "json_extract(" in sql and "json_type(" in sql and ">=" in sql


def test_postgres_uses_jsonb_operators() -> None:
    """On PostgreSQL a dotted path and an operator become jsonb #> / #>> expressions."""
    sql = _sql("postgresql", {"meta.score": {"$lt": 3}, "kind": "note"})
    assert "#>" in sql and "jsonb_typeof(" in sql and "<" in sql


def test_no_filter_is_true() -> None:
    """An empty or missing filter keeps every row."""
    assert "json" not in _sql("sqlite", {})


@pytest.mark.parametrize("spec", [{"k": {"$regex": "x"}}, {"": 1}, {'a"b': 1}])
def test_refused_filters(spec: dict[str, object]) -> None:
    """Unknown operators, empty paths and quotes in field names are refused."""
    with pytest.raises(InvalidArgument):
        _sql("sqlite", spec)
