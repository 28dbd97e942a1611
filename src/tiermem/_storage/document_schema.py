"""The table of stored JSON documents (the LangGraph store of ``tiermem-langgraph``).

* ``tiermem_document``: one row per (project, namespace, key). ``namespace`` is
  the namespace's labels joined with ``.`` (labels never contain one), so the
  documents under a namespace prefix are one range of the unique index;
  PostgreSQL compares it with the ``C`` collation, byte by byte, as SQLite does.
  ``value`` is the JSON document (``JSONB`` on PostgreSQL), ``indexed_text``
  the text full-text search sees (``NULL``: not searchable by words),
  ``vectors`` its embeddings (float32, ``dims`` per vector, one after another).
  ``expires_at`` / ``ttl_minutes`` hold a time to live; the access-tier
  columns (``memory_tier``, ``last_accessed``, ``access_count``) are those of
  sessions and layer items.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlmodel import Field, SQLModel

from . import fts
from .schema import utc_column

__all__ = ["DOCUMENT_INDEX", "DocumentRow", "document_table"]


def _bytewise() -> Any:
    # Prefix ranges must follow byte order: PostgreSQL's default collation may not.
    return sa.Text().with_variant(postgresql.TEXT(collation="C"), "postgresql")


_EXPIRING = sa.text("expires_at IS NOT NULL")


class DocumentRow(SQLModel, table=True):
    """One JSON document under a namespace and key."""

    __tablename__ = "tiermem_document"
    __table_args__ = (
        sa.Index("uq_tiermem_document_key", "project", "namespace", "key", unique=True),
        # Tier statistics and pruning read a project by access time.
        sa.Index("ix_tiermem_document_accessed", "project", "last_accessed"),
        # The TTL sweep reads the expiring documents only.
        sa.Index(
            "ix_tiermem_document_expires",
            "expires_at",
            sqlite_where=_EXPIRING,
            postgresql_where=_EXPIRING,
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    project: str = Field(max_length=255)
    namespace: str = Field(sa_type=_bytewise())
    key: str = Field(sa_type=_bytewise())
    value: Any = Field(sa_type=sa.JSON().with_variant(postgresql.JSONB(), "postgresql"))
    indexed_text: str | None = Field(default=None, sa_type=sa.Text)
    vectors: bytes | None = Field(default=None, sa_type=sa.LargeBinary)
    created_at: datetime = Field(sa_type=utc_column())
    updated_at: datetime = Field(sa_type=utc_column())
    expires_at: datetime | None = Field(default=None, sa_type=utc_column())
    ttl_minutes: float | None = Field(default=None, sa_type=sa.Float)
    last_accessed: datetime = Field(sa_type=utc_column())
    access_count: int = 0
    memory_tier: str = Field(default="active", max_length=16)


document_table: sa.Table = DocumentRow.__table__  # type: ignore[attr-defined]

#: Every document in one partition: a search spans namespaces, so it cannot narrow
#: the index by partition; it joins the matches with the namespace range instead.
DOCUMENT_INDEX = fts.FtsIndex(
    name="tiermem_document_fts",
    table=document_table,
    partition_sql="0",
    columns=(
        fts.FtsColumn(
            "indexed_text", f"coalesce(substr({{r}}indexed_text, 1, {fts.MAX_INDEXED_CHARS}), '')"
        ),
    ),
)
