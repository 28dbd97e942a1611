"""``LayeredMemory``: the seed's four memory layers over one scope of a project.

``mem.layers(scope)`` returns the scope's :class:`LayeredMemory` (one per scope
and memory, so every caller in the process shares its working memory).
Working memory lives in the process; the episodic, semantic and procedural
layers are rows of ``tiermem_layer_item`` with access tiers, searchable
through the full-text index of :mod:`tiermem.fts`.

Every public method is one operation generator (``_op_*``) run by the
memory's own runner, so the sync method and its ``a``-prefixed async twin
share one body: one transaction per call, a summarizer called outside any
transaction.

Stored items have access tiers with the rules of sessions: an item last
accessed strictly longer than ``expired_after`` ago is expired; searches,
``recent``, ``recall`` and ``compact`` never return it, and
``ConversationMemory.recalculate_tiers`` / ``prune_expired`` refresh the
tiers of the project's items and delete the expired ones together with its
sessions. :func:`recalculate_item_tiers` and :func:`prune_expired_items` do
the same in a transaction of the caller's. The layers' value types
(:class:`LayerType`, :class:`LayerItem`, ...) are importable from here too.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import RowMapping

from ._core.messages import serialize_metadata
from ._core.runner import Op
from ._ops.compact import CompactionMixin
from ._ops.layer_base import (
    DEFAULT_MAX_WORKING_ENTRIES,
    check_count,
    check_key,
    check_metadata,
    check_text,
    parse_layer,
    to_item,
    to_knowledge,
    to_rule,
    validate_scope,
)
from ._storage import fts
from ._storage import items as layer_store
from ._storage.items import prune_expired_items, recalculate_item_tiers
from .errors import InvalidArgument
from .layer_models import (
    KnowledgeEntry,
    LayerCompaction,
    LayerHit,
    LayerItem,
    LayerStats,
    LayerType,
    Rule,
)

if TYPE_CHECKING:
    from .memory import ConversationMemory

__all__ = [
    "DEFAULT_MAX_WORKING_ENTRIES",
    "KnowledgeEntry",
    "LayerCompaction",
    "LayerHit",
    "LayerItem",
    "LayerStats",
    "LayerType",
    "LayeredMemory",
    "Rule",
    "layered_memory",
    "prune_expired_items",
    "recalculate_item_tiers",
]

_registry_lock = threading.Lock()


def _reset_after_fork() -> None:
    """A forked child gets its own registry lock (a thread of the parent may have
    held it at the fork, and no thread of the child would ever release it)."""
    global _registry_lock
    _registry_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def layered_memory(
    memory: ConversationMemory, scope: str, *, max_working_entries: int | None = None
) -> LayeredMemory:
    """The :class:`LayeredMemory` of ``scope`` on ``memory`` (made on first use;
    ``max_working_entries`` resizes an existing one)."""
    validate_scope(scope)
    with _registry_lock:
        registry: dict[str, LayeredMemory] = vars(memory).setdefault("_tiermem_layers", {})
        layered = registry.get(scope)
        if layered is None:
            layered = LayeredMemory(memory, scope, max_working_entries=max_working_entries)
            registry[scope] = layered
        elif max_working_entries is not None:
            layered.max_working_entries = max_working_entries
        return layered


class LayeredMemory(CompactionMixin):
    """Working, episodic, semantic and procedural memory of one scope.

    Get one with ``mem.layers(scope)``. Every method has an async twin with the
    ``a`` prefix. Episodic, semantic and procedural items persist in the
    memory's database, with access tiers; working items live in this process.

    Args:
        memory: the memory whose database, clock, token counter, summarizer and
            configuration the layers use.
        scope: the namespace inside the memory's project.
        max_working_entries: how many working items are kept (default 50).
    """

    # ------------------------------------------------------------------ writing

    def _op_append(
        self, type: LayerType | str, content: str, metadata: Mapping[str, Any] | None
    ) -> Op[LayerItem]:
        layer, meta = parse_layer(type), check_metadata(metadata)
        key: str | None = None
        if layer is LayerType.SEMANTIC:
            key = check_key(meta.pop("key", None))
        elif layer is LayerType.PROCEDURAL:
            condition = meta.pop("condition", None)
            if condition is None:
                raise InvalidArgument(
                    'a procedural rule needs a condition (metadata={"condition": ...} '
                    "or add_rule())"
                )
            limit = self._memory.config.max_entry_chars
            key = check_text("condition", condition, limit, required=True)
        item = self._prepare(layer, key, content, meta)
        now = self._memory.now()
        if layer is LayerType.WORKING:
            return self._working.add(item.content, meta, item.token_count, now)
        policy = self._memory.config.tier_policy
        if layer is LayerType.SEMANTIC:
            row = self._write(lambda conn, pk: layer_store.upsert_fact(conn, pk, item, now, policy))
        else:
            row = self._write(lambda conn, pk: layer_store.insert_item(conn, pk, item, now))
        return to_item(self.scope, row)
        yield  # pragma: no cover - makes this a generator

    def append(
        self, type: LayerType | str, content: str, metadata: Mapping[str, Any] | None = None
    ) -> LayerItem:
        """Store an item in a layer.

        Args:
            type: ``working``, ``episodic``, ``semantic`` (``metadata["key"]``
                names the fact; storing a key again replaces its value) or
                ``procedural`` (``metadata["condition"]`` is the rule's
                condition, ``content`` its action).
            content: the text.
            metadata: JSON-serializable extras.

        Raises:
            InvalidArgument: unknown layer, missing key or condition.
            InvalidContent / EntryTooLarge: unusable content.
            StorageError: the database failed; nothing was stored.
        """
        return self._memory._run(self._op_append(type, content, metadata))

    async def aappend(
        self, type: LayerType | str, content: str, metadata: Mapping[str, Any] | None = None
    ) -> LayerItem:
        """Async :meth:`append`."""
        return await self._memory._arun(self._op_append(type, content, metadata))

    def learn(
        self, key: str, value: str, metadata: Mapping[str, Any] | None = None
    ) -> KnowledgeEntry:
        """Store a semantic fact under ``key``, replacing an earlier value (an access)."""
        meta = {**check_metadata(metadata), "key": key}
        return to_knowledge(self._memory._run(self._op_append(LayerType.SEMANTIC, value, meta)))

    async def alearn(
        self, key: str, value: str, metadata: Mapping[str, Any] | None = None
    ) -> KnowledgeEntry:
        """Async :meth:`learn`."""
        meta = {**check_metadata(metadata), "key": key}
        item = await self._memory._arun(self._op_append(LayerType.SEMANTIC, value, meta))
        return to_knowledge(item)

    def add_rule(
        self, condition: str, action: str, metadata: Mapping[str, Any] | None = None
    ) -> Rule:
        """Store a procedural rule: when ``condition`` holds, do ``action``."""
        meta = {**check_metadata(metadata), "condition": condition}
        return to_rule(self._memory._run(self._op_append(LayerType.PROCEDURAL, action, meta)))

    async def aadd_rule(
        self, condition: str, action: str, metadata: Mapping[str, Any] | None = None
    ) -> Rule:
        """Async :meth:`add_rule`."""
        meta = {**check_metadata(metadata), "condition": condition}
        item = await self._memory._arun(self._op_append(LayerType.PROCEDURAL, action, meta))
        return to_rule(item)

    # ------------------------------------------------------------------ reading

    def _op_search(
        self, type: LayerType | str, query: str, limit: int
    ) -> Op[list[tuple[LayerItem, float]]]:
        layer = parse_layer(type)
        if not isinstance(query, str):
            raise InvalidArgument(f"query must be a str, got {query.__class__.__name__}")
        check_count("limit", limit, 1)
        words = fts.tokenize(query)
        if not words:
            return []
        now, policy = self._memory.now(), self._memory.config.tier_policy
        if layer is LayerType.WORKING:
            return self._working.search(words, limit, now, policy)
        nothing: list[tuple[RowMapping, float]] = []
        hits = self._read(
            lambda conn, pk: layer_store.search_items(
                conn, pk, layer.value, words, limit, now, policy
            ),
            nothing,
            write=True,
        )
        return [(to_item(self.scope, row), score) for row, score in hits]
        yield  # pragma: no cover

    def search(self, type: LayerType | str, query: str, limit: int = 10) -> list[LayerHit]:
        """Items of a layer matching any word of ``query``, best first; each hit
        counts as an access. Expired items are never returned.

        The score is the text relevance (1.0 for the best match) plus the
        recency bonus (up to 0.5 in the first 24 hours) plus the tier boost.
        The query is plain text: quotes, operators and punctuation are never
        syntax. No match is an empty list.

        Raises:
            InvalidArgument: unknown layer, a query that is not a str, limit < 1.
        """
        hits = self._memory._run(self._op_search(type, query, limit))
        return [LayerHit(item=item, score=score) for item, score in hits]

    async def asearch(self, type: LayerType | str, query: str, limit: int = 10) -> list[LayerHit]:
        """Async :meth:`search`."""
        hits = await self._memory._arun(self._op_search(type, query, limit))
        return [LayerHit(item=item, score=score) for item, score in hits]

    def match_rules(self, situation: str, limit: int = 5) -> list[Rule]:
        """The procedural rules whose condition or action best matches
        ``situation``, best first, with their scores; each is an access."""
        hits = self._memory._run(self._op_search(LayerType.PROCEDURAL, situation, limit))
        return [to_rule(item, score) for item, score in hits]

    async def amatch_rules(self, situation: str, limit: int = 5) -> list[Rule]:
        """Async :meth:`match_rules`."""
        hits = await self._memory._arun(self._op_search(LayerType.PROCEDURAL, situation, limit))
        return [to_rule(item, score) for item, score in hits]

    def _op_recent(self, type: LayerType | str, n: int) -> Op[list[LayerItem]]:
        layer = parse_layer(type)
        check_count("n", n, 0)
        if layer is LayerType.WORKING:
            return self._working.recent(n)
        nothing: list[RowMapping] = []
        now, policy = self._memory.now(), self._memory.config.tier_policy
        rows = self._read(
            lambda conn, pk: layer_store.recent_items(conn, pk, layer.value, n, now, policy),
            nothing,
        )
        return [to_item(self.scope, row) for row in rows]
        yield  # pragma: no cover

    def recent(self, type: LayerType | str, n: int = 10) -> list[LayerItem]:
        """The ``n`` newest items of a layer that are not expired, oldest first (not
        counted as access)."""
        return self._memory._run(self._op_recent(type, n))

    async def arecent(self, type: LayerType | str, n: int = 10) -> list[LayerItem]:
        """Async :meth:`recent`."""
        return await self._memory._arun(self._op_recent(type, n))

    def _op_recall(self, key: str) -> Op[KnowledgeEntry | None]:
        checked, now, policy = check_key(key), self._memory.now(), self._memory.config.tier_policy
        row = self._read(
            lambda conn, pk: layer_store.recall_fact(conn, pk, checked, now, policy),
            None,
            write=True,
        )
        return None if row is None else to_knowledge(to_item(self.scope, row))
        yield  # pragma: no cover

    def recall(self, key: str) -> KnowledgeEntry | None:
        """The semantic fact stored under ``key`` (an access), or ``None`` when there is
        none or it is expired (an expired fact is not revived by asking for it)."""
        return self._memory._run(self._op_recall(key))

    async def arecall(self, key: str) -> KnowledgeEntry | None:
        """Async :meth:`recall`."""
        return await self._memory._arun(self._op_recall(key))

    def _op_stats(self) -> Op[LayerStats]:
        working = self._working.snapshot()
        totals = self._totals()
        working_bytes = sum(
            len(item.content.encode()) + len(serialize_metadata(item.metadata).encode())
            for item in working
        )
        return LayerStats(
            working_memory_tokens=sum(item.token_count for item in working),
            episodic_entry_count=totals.get(LayerType.EPISODIC.value, (0, 0))[0],
            semantic_entry_count=totals.get(LayerType.SEMANTIC.value, (0, 0))[0],
            procedural_rule_count=totals.get(LayerType.PROCEDURAL.value, (0, 0))[0],
            total_storage_bytes=working_bytes + sum(size for _, size in totals.values()),
        )
        yield  # pragma: no cover

    def get_stats(self) -> LayerStats:
        """Sizes of the scope's layers; working tokens are counted with tiktoken.
        Expired items are counted until ``prune_expired`` deletes them."""
        return self._memory._run(self._op_stats())

    async def aget_stats(self) -> LayerStats:
        """Async :meth:`get_stats`."""
        return await self._memory._arun(self._op_stats())

    # ------------------------------------------------------------------ clearing

    def _op_clear(self, type: LayerType | str | None) -> Op[int]:
        layer = None if type is None else parse_layer(type)
        removed = 0
        if layer is None or layer is LayerType.WORKING:
            removed += self._working.clear()
        if layer is not LayerType.WORKING:
            value = None if layer is None else layer.value
            removed += self._read(
                lambda conn, pk: layer_store.clear_items(conn, pk, value), 0, write=True
            )
        return removed
        yield  # pragma: no cover

    def clear(self, type: LayerType | str | None = None) -> int:
        """Delete every item of one layer (or of all); returns how many went."""
        return self._memory._run(self._op_clear(type))

    async def aclear(self, type: LayerType | str | None = None) -> int:
        """Async :meth:`clear`."""
        return await self._memory._arun(self._op_clear(type))
