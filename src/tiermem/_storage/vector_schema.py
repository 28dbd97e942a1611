"""The tables of embeddings (``ConversationMemory(embeddings=...)``).

* ``tiermem_entry_vector``: at most one vector per entry (``entry_id``, deleted
  with its entry), the entry's session (``session_pk``: a session's vectors are
  one range of the index, read together by a search), the id of the model that
  made it (``model``: vectors of another model are ignored and replaced by a
  backfill) and the vector itself (L2-normalized float32 bytes). Row ids are
  never reused, so a process can read a session's new vectors incrementally.
* ``tiermem_layer_item_vector``: the same for the stored layer items (episodic,
  semantic, procedural): at most one vector per item (``item_id``, deleted with
  its item, and in the transaction that changes its text), the item's scope and
  layer (a search reads the vectors of one scope's layer together), the model's
  id and the vector.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from .layer_schema import item_table

__all__ = ["EntryVectorRow", "ItemVectorRow", "entry_vector_table", "item_vector_table"]


class EntryVectorRow(SQLModel, table=True):
    """The embedding of one conversation entry."""

    __tablename__ = "tiermem_entry_vector"
    __table_args__ = (
        sa.Index("ix_tiermem_entry_vector_session", "session_pk", "model", "id"),
        {"sqlite_autoincrement": True},
    )

    id: int | None = Field(default=None, primary_key=True)
    entry_id: int = Field(
        sa_column=sa.Column(
            sa.Integer,
            sa.ForeignKey("tiermem_entry.id", ondelete="CASCADE"),
            nullable=False,
            unique=True,
        )
    )
    session_pk: int
    model: str = Field(max_length=255)
    vector: bytes = Field(sa_type=sa.LargeBinary)


class ItemVectorRow(SQLModel, table=True):
    """The embedding of one stored layer item."""

    __tablename__ = "tiermem_layer_item_vector"
    __table_args__ = (
        sa.Index("ix_tiermem_layer_item_vector_scope", "scope_pk", "layer", "model", "id"),
        {"sqlite_autoincrement": True},
    )

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(
        sa_column=sa.Column(
            sa.Integer,
            sa.ForeignKey(f"{item_table.name}.id", ondelete="CASCADE"),
            nullable=False,
            unique=True,
        )
    )
    scope_pk: int
    layer: str = Field(max_length=16)
    model: str = Field(max_length=255)
    vector: bytes = Field(sa_type=sa.LargeBinary)


entry_vector_table: sa.Table = EntryVectorRow.__table__  # type: ignore[attr-defined]
item_vector_table: sa.Table = ItemVectorRow.__table__  # type: ignore[attr-defined]
