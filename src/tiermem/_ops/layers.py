"""The layer operations behind :class:`~tiermem.layers.LayeredMemory`: storing,
searching, reading, counting and clearing the items of one scope.

Each is a generator over a :class:`~tiermem._ops.layer_base.LayerScope` that
yields its one transaction (working memory alone needs none) and returns the
public value, so the sync method and its async twin are one line each. Arguments
are checked and content is counted before the transaction opens.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._core.messages import serialize_metadata
from .._storage import fts
from .._storage import items as layer_store
from ..errors import InvalidArgument
from ..events import LayerAppended, LayerCleared
from ..layer_models import KnowledgeEntry, LayerHit, LayerItem, LayerStats, LayerType, Rule
from .embed import query_vector, queue_items
from .layer_base import (
    LayerScope,
    check_count,
    check_key,
    check_metadata,
    check_text,
    parse_layer,
    prepare,
    read,
    to_item,
    to_knowledge,
    to_rule,
    totals,
    write,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from .._core.runner import Op
    from .._storage.rows import ItemRecord

__all__ = [
    "add_rule",
    "append",
    "clear",
    "learn",
    "match_rules",
    "recall",
    "recent",
    "search",
    "stats",
]


# --------------------------------------------------------------------------- writing


def append(
    scope: LayerScope, type: LayerType | str, content: str, metadata: Mapping[str, Any] | None
) -> Op[LayerItem]:
    """Store an item in a layer (see :meth:`~tiermem.layers.LayeredMemory.append`)."""
    layer, meta = parse_layer(type), check_metadata(metadata)
    context = scope.context
    key: str | None = None
    if layer is LayerType.SEMANTIC:
        key = check_key(meta.pop("key", None))
    elif layer is LayerType.PROCEDURAL:
        condition = meta.pop("condition", None)
        if condition is None:
            raise InvalidArgument(
                'a procedural rule needs a condition (metadata={"condition": ...} or add_rule())'
            )
        key = check_text("condition", condition, context.config.max_entry_chars, required=True)
    item = prepare(scope, layer, key, content, meta)
    now = context.now()
    if layer is LayerType.WORKING:
        return scope.working.add(item.content, meta, item.token_count, now)
    policy = context.config.tier_policy

    def appended(row: ItemRecord) -> LayerAppended:
        return LayerAppended(scope.name, layer.value, row.id, key)

    if layer is LayerType.SEMANTIC:
        row = yield from write(
            scope, lambda conn, pk: layer_store.upsert_fact(conn, pk, item, now, policy), appended
        )
    else:
        row = yield from write(
            scope, lambda conn, pk: layer_store.insert_item(conn, pk, item, now), appended
        )
    queue_items(context, [row.id])  # committed: embedded in the background
    return to_item(scope.name, row)


def learn(
    scope: LayerScope, key: str, value: str, metadata: Mapping[str, Any] | None
) -> Op[KnowledgeEntry]:
    """Store a semantic fact under ``key`` (see :meth:`~tiermem.layers.LayeredMemory.learn`)."""
    meta = {**check_metadata(metadata), "key": key}
    return to_knowledge((yield from append(scope, LayerType.SEMANTIC, value, meta)))


def add_rule(
    scope: LayerScope, condition: str, action: str, metadata: Mapping[str, Any] | None
) -> Op[Rule]:
    """Store a procedural rule (see :meth:`~tiermem.layers.LayeredMemory.add_rule`)."""
    meta = {**check_metadata(metadata), "condition": condition}
    return to_rule((yield from append(scope, LayerType.PROCEDURAL, action, meta)))


# --------------------------------------------------------------------------- reading


def _hits(
    scope: LayerScope, type: LayerType | str, query: str, limit: int
) -> Op[list[tuple[LayerItem, float]]]:
    """The scored items of a layer matching any word of ``query`` or, given
    embeddings, close to it in meaning, best first (each an access)."""
    layer = parse_layer(type)
    if not isinstance(query, str):
        raise InvalidArgument(f"query must be a str, got {query.__class__.__name__}")
    check_count("limit", limit, 1)
    words = fts.query_words(query)
    context = scope.context
    now, policy = context.now(), context.config.tier_policy
    if layer is LayerType.WORKING:  # in this process: by words alone
        return scope.working.search(words, limit, now, policy) if words else []
    vector = yield from query_vector(context, query)
    embedder = context.embedder
    if vector is None or embedder is None:
        if not words:
            return []

        def search(conn: Connection, pk: int) -> list[tuple[ItemRecord, float]]:
            return layer_store.search_items(conn, pk, layer.value, words, limit, now, policy)
    else:
        from .._storage import hybrid, item_hybrid  # numpy: only for a memory with embeddings

        dense = hybrid.DenseQuery(vector, embedder.model, embedder.weight, embedder.cache)

        def search(conn: Connection, pk: int) -> list[tuple[ItemRecord, float]]:
            return item_hybrid.search_items(conn, pk, layer.value, words, limit, now, policy, dense)

    nothing: list[tuple[ItemRecord, float]] = []
    hits = yield from read(scope, search, nothing, write=True)  # a hit is an access
    return [(to_item(scope.name, row), score) for row, score in hits]


def search(scope: LayerScope, type: LayerType | str, query: str, limit: int) -> Op[list[LayerHit]]:
    """Search a layer (see :meth:`~tiermem.layers.LayeredMemory.search`)."""
    hits = yield from _hits(scope, type, query, limit)
    return [LayerHit(item=item, score=score) for item, score in hits]


def match_rules(scope: LayerScope, situation: str, limit: int) -> Op[list[Rule]]:
    """The rules best matching ``situation`` (see
    :meth:`~tiermem.layers.LayeredMemory.match_rules`)."""
    hits = yield from _hits(scope, LayerType.PROCEDURAL, situation, limit)
    return [to_rule(item, score) for item, score in hits]


def recent(scope: LayerScope, type: LayerType | str, n: int) -> Op[list[LayerItem]]:
    """The ``n`` newest live items of a layer, oldest first (not an access)."""
    layer = parse_layer(type)
    check_count("n", n, 0)
    if layer is LayerType.WORKING:
        return scope.working.recent(n)
    nothing: list[ItemRecord] = []
    context = scope.context
    now, policy = context.now(), context.config.tier_policy
    rows = yield from read(
        scope,
        lambda conn, pk: layer_store.recent_items(conn, pk, layer.value, n, now, policy),
        nothing,
    )
    return [to_item(scope.name, row) for row in rows]


def recall(scope: LayerScope, key: str) -> Op[KnowledgeEntry | None]:
    """The live fact under ``key`` (an access), or ``None``."""
    context = scope.context
    checked, now, policy = check_key(key), context.now(), context.config.tier_policy
    row = yield from read(
        scope,
        lambda conn, pk: layer_store.recall_fact(conn, pk, checked, now, policy),
        None,
        write=True,  # a recall is an access
    )
    return None if row is None else to_knowledge(to_item(scope.name, row))


def stats(scope: LayerScope) -> Op[LayerStats]:
    """Sizes of the scope's layers (see :meth:`~tiermem.layers.LayeredMemory.get_stats`)."""
    working = scope.working.snapshot()
    sizes = yield from totals(scope)
    working_bytes = sum(
        len(item.content.encode()) + len(serialize_metadata(item.metadata).encode())
        for item in working
    )
    return LayerStats(
        working_memory_tokens=sum(item.token_count for item in working),
        episodic_entry_count=sizes.get(LayerType.EPISODIC.value, (0, 0))[0],
        semantic_entry_count=sizes.get(LayerType.SEMANTIC.value, (0, 0))[0],
        procedural_rule_count=sizes.get(LayerType.PROCEDURAL.value, (0, 0))[0],
        total_storage_bytes=working_bytes + sum(size for _, size in sizes.values()),
    )


# --------------------------------------------------------------------------- clearing


def clear(scope: LayerScope, type: LayerType | str | None) -> Op[int]:
    """Delete every item of one layer (or of all); returns how many went."""
    layer = None if type is None else parse_layer(type)
    removed = 0
    if layer is None or layer is LayerType.WORKING:
        removed += scope.working.clear()
    if layer is not LayerType.WORKING:
        value = None if layer is None else layer.value

        def cleared(count: int) -> LayerCleared | None:
            return LayerCleared(scope.name, value, count) if count else None

        removed += yield from read(
            scope,
            lambda conn, pk: layer_store.clear_items(conn, pk, value),
            0,
            write=True,
            change=cleared,
        )
    return removed
