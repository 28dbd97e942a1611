"""Tables of the memory layers (episodic, semantic, procedural); working memory is
in-process and has none.

* ``tiermem_layer_scope``: one row per (project, scope); deleted only by
  ``forget`` (which erases the scope), so its ``pk`` can be cached by every process.
* ``tiermem_layer_item``: one row per item, with the access-tier columns of a
  session (``memory_tier``, ``last_accessed``, ``access_count``, indexed).
  ``item_key`` is a semantic item's key (unique per scope) or a procedural
  rule's condition; ``content`` is the text, the value or the action.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from . import fts
from .schema import utc_column

__all__ = [
    "ITEM_INDEX",
    "in_project",
    "LayerItemRow",
    "LayerScopeRow",
    "item_table",
    "item_partition",
    "scope_table",
]


class LayerScopeRow(SQLModel, table=True):
    """A namespace of layered memory inside a project (``mem.layers(scope)``)."""

    __tablename__ = "tiermem_layer_scope"
    __table_args__ = (sa.UniqueConstraint("project", "scope", name="uq_tiermem_layer_scope"),)

    pk: int | None = Field(default=None, primary_key=True)
    project: str = Field(max_length=255)
    scope: str = Field(max_length=255)
    created_at: datetime = Field(sa_type=utc_column())


_SEMANTIC = sa.text("layer = 'semantic'")


class LayerItemRow(SQLModel, table=True):
    """One episodic event, semantic fact or procedural rule."""

    __tablename__ = "tiermem_layer_item"
    __table_args__ = (
        # Covers a search's per-candidate reads: they stay inside one scope's range.
        sa.Index(
            "ix_tiermem_layer_item_scope",
            "scope_pk",
            "layer",
            "id",
            "token_count",
            "created_at",
            "last_accessed",
        ),
        # Semantic keys are unique per scope; rule conditions (long text) are not indexed.
        sa.Index(
            "uq_tiermem_layer_item_key",
            "scope_pk",
            "layer",
            "item_key",
            unique=True,
            sqlite_where=_SEMANTIC,
            postgresql_where=_SEMANTIC,
        ),
        sa.Index("ix_tiermem_layer_item_tier", "memory_tier"),
        sa.Index("ix_tiermem_layer_item_accessed", "last_accessed"),
    )

    id: int | None = Field(default=None, primary_key=True)
    scope_pk: int = Field(
        sa_column=sa.Column(
            sa.Integer,
            sa.ForeignKey("tiermem_layer_scope.pk", ondelete="CASCADE"),
            nullable=False,
        )
    )
    layer: str = Field(max_length=16)
    item_key: str | None = Field(default=None, sa_type=sa.Text)
    content: str = Field(sa_type=sa.Text)
    meta: str = Field(default="{}", sa_type=sa.Text)
    token_count: int
    #: UTF-8 bytes of content, key and metadata (summed by ``get_stats``).
    byte_size: int
    created_at: datetime = Field(sa_type=utc_column())
    updated_at: datetime = Field(sa_type=utc_column())
    last_accessed: datetime = Field(sa_type=utc_column())
    access_count: int = 0
    memory_tier: str = Field(default="active", max_length=16)


scope_table: sa.Table = LayerScopeRow.__table__  # type: ignore[attr-defined]
item_table: sa.Table = LayerItemRow.__table__  # type: ignore[attr-defined]

_LAYER_CODES = {"episodic": 1, "semantic": 2, "procedural": 3}

#: Layer items, partitioned by scope and layer; the key (or condition) and the
#: content are both searched.
ITEM_INDEX = fts.FtsIndex(
    name="tiermem_layer_item_fts",
    table=item_table,
    partition_sql=(
        "({r}scope_pk << 2) + CASE {r}layer "
        + " ".join(f"WHEN '{layer}' THEN {code}" for layer, code in _LAYER_CODES.items())
        + " ELSE 0 END"
    ),
    columns=(
        fts.FtsColumn("item_key", "coalesce({r}item_key, '')"),
        fts.FtsColumn("content", f"substr({{r}}content, 1, {fts.MAX_INDEXED_CHARS})"),
    ),
    positions=False,
)


def in_project(project: str | None, *, by_scope: bool = True) -> sa.ColumnElement[bool]:
    """Items of the scopes of ``project`` (``None``: every item).

    With ``by_scope=False`` the test is ``scope_pk + 0``, which no index serves: the
    planner then takes the id range or the ``last_accessed`` order of the statement,
    rather than reading every item of the project for each batch.
    """
    if project is None:
        return sa.true()
    column = item_table.c.scope_pk if by_scope else item_table.c.scope_pk + 0
    return column.in_(sa.select(scope_table.c.pk).where(scope_table.c.project == project))


def item_partition(scope_pk: int, layer: str) -> int:
    """The FTS5 partition of a scope's layer (see :data:`ITEM_INDEX`)."""
    return (scope_pk << 2) + _LAYER_CODES.get(layer, 0)
