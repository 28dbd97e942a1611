"""SQL of layer item embeddings: which items still need a vector, storing vectors,
forgetting the vector of an item whose text changed, and reading a scope's layer
vectors for a search (:mod:`tiermem._core.dense` scores them).

An item's text can change (a fact stored again under its key, an episodic item
turned into a summary by compaction), unlike an entry's. The transaction that
changes it deletes its vector after the change, and a vector is stored only if
the item still holds the text that was embedded: on PostgreSQL that check takes
a share lock on the item, so it waits for a transaction changing it and then
sees the new text, while a change that comes second waits for the vector's
transaction and then deletes its vector. SQLite serializes writers.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .layer_schema import in_project, item_table
from .vector_schema import item_vector_table

__all__ = [
    "ToEmbed",
    "forget_item_vectors",
    "layer_vectors",
    "layer_version",
    "store_item_vectors",
    "to_embed_items",
]

IC, V = item_table.c, item_vector_table.c


class ToEmbed(NamedTuple):
    """A stored item without a vector of the model: its id, scope and layer, and its
    key (or condition) and content as stored."""

    id: int
    scope_pk: int
    layer: str
    key: str | None
    content: str


def to_embed_items(
    conn: Connection,
    project: str,
    model: str,
    *,
    ids: Sequence[int] | None = None,
    limit: int = 256,
) -> list[ToEmbed]:
    """Items of ``project`` with no vector of ``model`` (all of them, or of ``ids``),
    oldest first."""
    has_vector = sa.exists().where(V.item_id == IC.id, V.model == model)
    query = (
        sa.select(IC.id, IC.scope_pk, IC.layer, IC.item_key, IC.content)
        .where(~has_vector)
        .order_by(IC.id)
        .limit(limit)
    )
    # By id, the items' own ids select them; a backfill walks the project's items.
    query = query.where(IC.id.in_(list(ids))) if ids is not None else query
    query = query.where(in_project(project, by_scope=ids is None))
    return [
        ToEmbed(int(row[0]), int(row[1]), str(row[2]), row[3], str(row[4]))
        for row in conn.execute(query)
    ]


@functools.cache
def _insert(dialect: str) -> sa.TextClause:
    lock = " FOR SHARE" if dialect == "postgresql" else ""
    # ON CONFLICT: another transaction (the background worker while embed_missing
    # runs) can store a vector for the same item meanwhile; its vector is kept.
    return sa.text(
        "INSERT INTO tiermem_layer_item_vector (item_id, scope_pk, layer, model, vector) "
        "SELECT :item_id, :scope_pk, :layer, :model, :vector WHERE EXISTS "
        f"(SELECT 1 FROM tiermem_layer_item WHERE id = :item_id AND content = :content{lock}) "
        "ON CONFLICT (item_id) DO NOTHING"
    ).bindparams(sa.bindparam("vector", type_=sa.LargeBinary))


def store_item_vectors(conn: Connection, model: str, rows: Sequence[tuple[ToEmbed, bytes]]) -> int:
    """Store the vectors of ``model`` of these items, replacing those of other
    models; an item deleted meanwhile, whose content is no longer the one embedded,
    or that another transaction stored a vector for, is skipped. Returns how many of
    them have a vector of ``model`` now."""
    if not rows:
        return 0
    ids = [item.id for item, _ in rows]
    conn.execute(sa.delete(item_vector_table).where(V.item_id.in_(ids), V.model != model))
    params: list[dict[str, Any]] = [
        {
            "item_id": item.id,
            "scope_pk": item.scope_pk,
            "layer": item.layer,
            "model": model,
            "vector": vector,
            "content": item.content,
        }
        for item, vector in rows
    ]
    conn.execute(_insert(conn.dialect.name), params)
    stored = conn.execute(
        sa.select(sa.func.count()).where(V.item_id.in_(ids), V.model == model)
    ).scalar_one()
    return int(stored)


def forget_item_vectors(conn: Connection, ids: Sequence[int]) -> None:
    """Delete the vectors of these items (their text changed in this transaction)."""
    if ids:
        conn.execute(sa.delete(item_vector_table).where(V.item_id.in_(list(ids))))


_IN_LAYER = (
    V.scope_pk == sa.bindparam("pk"),
    V.layer == sa.bindparam("layer"),
    V.model == sa.bindparam("model"),
)
# Built once: a search runs them on every call.
_VERSION = sa.select(sa.func.count(), sa.func.coalesce(sa.func.max(V.id), 0)).where(*_IN_LAYER)
_VECTORS = (
    sa.select(V.id, V.item_id, V.vector)
    .where(*_IN_LAYER, V.id > sa.bindparam("after"))
    .order_by(V.id)
)


def layer_version(conn: Connection, scope_pk: int, layer: str, model: str) -> tuple[int, int]:
    """How many vectors of ``model`` a scope's layer has, and their largest row id."""
    params = {"pk": scope_pk, "layer": layer, "model": model}
    count, last = conn.execute(_VERSION, params).one()
    return int(count), int(last)


def layer_vectors(
    conn: Connection, scope_pk: int, layer: str, model: str, after: int
) -> list[tuple[int, int, bytes]]:
    """A scope's layer's vectors of ``model`` with a row id above ``after``: (row id,
    item id, vector), in row id order."""
    params = {"pk": scope_pk, "layer": layer, "model": model, "after": after}
    return [(int(row[0]), int(row[1]), bytes(row[2])) for row in conn.execute(_VECTORS, params)]
