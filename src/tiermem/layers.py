"""``LayeredMemory``: working, episodic, semantic and procedural memory over one
scope of a project.

``mem.layers(scope)`` returns the scope's :class:`LayeredMemory` (one per scope
and memory, kept by the memory's :class:`LayerRegistry`, so every caller in the
process shares its working memory). Working memory lives in the process; the
episodic, semantic and procedural layers are rows of ``tiermem_layer_item`` with
access tiers, searchable through the full-text index of
:mod:`tiermem._storage.fts` and, when the memory has embeddings, by meaning
(:mod:`tiermem._storage.item_hybrid`).

:class:`LayeredMemory` is a facade: each public method and its ``a``-prefixed
async twin run the same operation of :mod:`tiermem._ops.layers` or
:mod:`tiermem._ops.compact` (one transaction per call, a summarizer called
outside any transaction) with :func:`~tiermem._core.runner.run` or
:func:`~tiermem._core.runner.arun`.

Stored items have access tiers with the rules of sessions: an item of a layer
that expires (``TierPolicy.expiring_layers``: the episodic layer by default; learned
facts and rules persist, ARCHIVED at most) last accessed strictly longer than
``expired_after`` ago is expired; searches,
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
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ._core.runner import arun, run
from ._ops import compact as compact_ops
from ._ops import layers as layer_ops
from ._ops.layer_base import DEFAULT_MAX_WORKING_ENTRIES, LayerScope, validate_scope
from ._ops.working import WorkingMemory
from ._storage.items import prune_expired_items, recalculate_item_tiers
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
    from ._core.context import MemoryContext

#: How many scopes holding nothing a :class:`LayerRegistry` keeps (see there).
MAX_IDLE_SCOPES = 256

__all__ = [
    "DEFAULT_MAX_WORKING_ENTRIES",
    "KnowledgeEntry",
    "LayerCompaction",
    "LayerHit",
    "LayerItem",
    "LayerRegistry",
    "LayerStats",
    "LayerType",
    "LayeredMemory",
    "MAX_IDLE_SCOPES",
    "Rule",
    "forget_scopes",
    "prune_expired_items",
    "recalculate_item_tiers",
]


class LayeredMemory:
    """Working, episodic, semantic and procedural memory of one scope.

    Get one with ``mem.layers(scope)``. Every method has an async twin with the
    ``a`` prefix. Episodic, semantic and procedural items persist in the
    memory's database, with access tiers; working items live in this process.

    Args:
        context: the context of the memory whose database, clock, token counter,
            summarizer and configuration the layers use.
        scope: the namespace inside the memory's project.
        max_working_entries: how many working items are kept (default 50).

    Raises:
        InvalidArgument: a bad scope name or ``max_working_entries``.
    """

    def __init__(
        self, context: MemoryContext, scope: str, *, max_working_entries: int | None = None
    ) -> None:
        name = validate_scope(scope)
        limit = DEFAULT_MAX_WORKING_ENTRIES if max_working_entries is None else max_working_entries
        self._state = LayerScope(context, name, WorkingMemory(name, limit))

    def __repr__(self) -> str:
        return f"LayeredMemory(project={self._state.context.project!r}, scope={self.scope!r})"

    @property
    def memory(self) -> Any:
        """The ``ConversationMemory`` these layers belong to (typed ``Any``: the
        memory imports this module)."""
        return self._state.context.owner

    @property
    def scope(self) -> str:
        """The namespace inside the memory's project."""
        return self._state.name

    @property
    def max_working_entries(self) -> int:
        """How many working items are kept; setting it trims at once."""
        return self._state.working.max_entries

    @max_working_entries.setter
    def max_working_entries(self, value: int) -> None:
        self._state.working.max_entries = value

    def erased(self, context: MemoryContext) -> None:
        """After ``forget`` erased this scope of ``context``'s project: when that is
        this scope's project and database, empty the working memory and drop the
        cached key of the deleted scope row (the next write makes a new row)."""
        mine = self._state.context
        if mine.project == context.project and (
            mine.database.engine.url == context.database.engine.url
        ):
            self._state.pk = None
            self._state.working.clear()

    def is_idle(self) -> bool:
        """Whether the scope holds nothing in this process (no working items, the
        default ``max_working_entries``), so that dropping this object loses nothing."""
        working = self._state.working
        return working.max_entries == DEFAULT_MAX_WORKING_ENTRIES and not working.snapshot()

    # ------------------------------------------------------------------ writing

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
        return run(layer_ops.append(self._state, type, content, metadata))

    async def aappend(
        self, type: LayerType | str, content: str, metadata: Mapping[str, Any] | None = None
    ) -> LayerItem:
        """Async :meth:`append`."""
        return await arun(layer_ops.append(self._state, type, content, metadata))

    def learn(
        self, key: str, value: str, metadata: Mapping[str, Any] | None = None
    ) -> KnowledgeEntry:
        """Store a semantic fact under ``key``, replacing an earlier value (an access)."""
        return run(layer_ops.learn(self._state, key, value, metadata))

    async def alearn(
        self, key: str, value: str, metadata: Mapping[str, Any] | None = None
    ) -> KnowledgeEntry:
        """Async :meth:`learn`."""
        return await arun(layer_ops.learn(self._state, key, value, metadata))

    def add_rule(
        self, condition: str, action: str, metadata: Mapping[str, Any] | None = None
    ) -> Rule:
        """Store a procedural rule: when ``condition`` holds, do ``action``."""
        return run(layer_ops.add_rule(self._state, condition, action, metadata))

    async def aadd_rule(
        self, condition: str, action: str, metadata: Mapping[str, Any] | None = None
    ) -> Rule:
        """Async :meth:`add_rule`."""
        return await arun(layer_ops.add_rule(self._state, condition, action, metadata))

    # ------------------------------------------------------------------ reading

    def search(self, type: LayerType | str, query: str, limit: int = 10) -> list[LayerHit]:
        """Items of a layer matching any word of ``query``, best first; each hit
        counts as an access. Expired items are never returned.

        The score is the text relevance (1.0 for the best match) plus the
        recency bonus (up to 0.5 in the first 24 hours) plus the tier boost.
        The query is plain text: quotes, operators and punctuation are never
        syntax. No match is an empty list.

        When the memory has embeddings, stored items (not working memory's) are
        also found by meaning: relevance fuses BM25 with the cosine similarity
        of every item of the scope's layer, as ``ConversationMemory.search``
        does, and the recency bonus is at most 0.1. An item not embedded yet is
        found by its words.

        Raises:
            InvalidArgument: unknown layer, a query that is not a str, limit < 1.
        """
        return run(layer_ops.search(self._state, type, query, limit))

    async def asearch(self, type: LayerType | str, query: str, limit: int = 10) -> list[LayerHit]:
        """Async :meth:`search`."""
        return await arun(layer_ops.search(self._state, type, query, limit))

    def match_rules(self, situation: str, limit: int = 5) -> list[Rule]:
        """The procedural rules whose condition or action best matches
        ``situation`` (by words, and by meaning given embeddings, as
        :meth:`search`), best first, with their scores; each is an access."""
        return run(layer_ops.match_rules(self._state, situation, limit))

    async def amatch_rules(self, situation: str, limit: int = 5) -> list[Rule]:
        """Async :meth:`match_rules`."""
        return await arun(layer_ops.match_rules(self._state, situation, limit))

    def recent(self, type: LayerType | str, n: int = 10) -> list[LayerItem]:
        """The ``n`` newest items of a layer that are not expired, oldest first (not
        counted as access)."""
        return run(layer_ops.recent(self._state, type, n))

    async def arecent(self, type: LayerType | str, n: int = 10) -> list[LayerItem]:
        """Async :meth:`recent`."""
        return await arun(layer_ops.recent(self._state, type, n))

    def recall(self, key: str) -> KnowledgeEntry | None:
        """The semantic fact stored under ``key`` (an access), or ``None`` when there is
        none or it is expired (an expired fact is not revived by asking for it)."""
        return run(layer_ops.recall(self._state, key))

    async def arecall(self, key: str) -> KnowledgeEntry | None:
        """Async :meth:`recall`."""
        return await arun(layer_ops.recall(self._state, key))

    def get_stats(self) -> LayerStats:
        """Sizes of the scope's layers; working tokens are counted with tiktoken.
        Expired items are counted until ``prune_expired`` deletes them."""
        return run(layer_ops.stats(self._state))

    async def aget_stats(self) -> LayerStats:
        """Async :meth:`get_stats`."""
        return await arun(layer_ops.stats(self._state))

    # ------------------------------------------------------------------ clearing

    def clear(self, type: LayerType | str | None = None) -> int:
        """Delete every item of one layer (or of all); returns how many went."""
        return run(layer_ops.clear(self._state, type))

    async def aclear(self, type: LayerType | str | None = None) -> int:
        """Async :meth:`clear`."""
        return await arun(layer_ops.clear(self._state, type))

    def compact(
        self, type: LayerType | str, keep_last: int = 10, summarize_older: bool = True
    ) -> LayerCompaction:
        """Keep the newest ``keep_last`` items of a layer and fold the older ones.

        Working and episodic memory summarize the older items into one summary
        item (through the memory's summarizer) that takes the oldest one's
        place. Without a summarizer (or when it fails and ``heuristic_fallback``
        is set) the item is a digest instead (metadata ``digest: True``) that
        holds every folded item's text verbatim, one per line, so nothing is
        lost and search still finds every word; items too long to share one
        indexed text (100,000 characters) are left as they are. With
        ``summarize_older=False`` the older items are dropped. Procedural
        memory keeps the newest ``keep_last`` rules. Semantic memory is left
        alone (facts are replaced by key, never summarized). At most
        ``max_summarizer_input_tokens`` go to one summarizer call; larger
        backlogs are folded in several calls.

        The model is called outside any transaction, and the items are replaced
        only if they are unchanged when it answers: if it fails, nothing is
        deleted.

        Raises:
            SummarizationError: the summarizer failed (and no heuristic fallback
                is configured) or its summary is not shorter than the items.
            CompressionConflict: the items changed while the summarizer ran.
        """
        return run(compact_ops.compact(self._state, type, keep_last, summarize_older))

    async def acompact(
        self, type: LayerType | str, keep_last: int = 10, summarize_older: bool = True
    ) -> LayerCompaction:
        """Async :meth:`compact`."""
        return await arun(compact_ops.compact(self._state, type, keep_last, summarize_older))


class LayerRegistry:
    """The :class:`LayeredMemory` of each scope of one memory, made on first use.

    A ``ConversationMemory`` holds one, so every caller in the process that asks
    for a scope shares its working memory. Safe to use from several threads.

    Scopes are names a caller chooses (an MCP client, one per user), so the
    registry is bounded: beyond :data:`MAX_IDLE_SCOPES` it forgets the least
    recently used scopes that hold nothing (no working items, the default
    ``max_working_entries``); a forgotten scope is made anew, identical, on its
    next use, and one a caller still holds is found again rather than doubled.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scopes: OrderedDict[str, LayeredMemory] = OrderedDict()
        self._forgotten: weakref.WeakValueDictionary[str, LayeredMemory] = (
            weakref.WeakValueDictionary()
        )
        _REGISTRIES.add(self)

    def __len__(self) -> int:
        """How many scopes the registry keeps."""
        return len(self._scopes)

    def after_fork(self) -> None:
        """Take a new lock in a forked child; the scopes stay."""
        self._lock = threading.Lock()

    def get(
        self, context: MemoryContext, scope: str, max_working_entries: int | None = None
    ) -> LayeredMemory:
        """The :class:`LayeredMemory` of ``scope`` (made with ``context`` on first use;
        ``max_working_entries`` resizes an existing one).

        Raises:
            InvalidArgument: a bad scope name or ``max_working_entries``.
        """
        validate_scope(scope)
        with self._lock:
            layered = self._scopes.get(scope) or self._forgotten.pop(scope, None)
            if layered is None:
                layered = LayeredMemory(context, scope, max_working_entries=max_working_entries)
            elif max_working_entries is not None:
                layered.max_working_entries = max_working_entries
            self._scopes[scope] = layered
            self._scopes.move_to_end(scope)
            self._forget_idle()
            return layered

    def erased(self, context: MemoryContext, scopes: Iterable[str]) -> None:
        """Tell the :class:`LayeredMemory` of each of ``scopes`` that ``forget`` erased
        it in ``context``'s project (see :meth:`LayeredMemory.erased`)."""
        with self._lock:
            found = [
                layered
                for name in scopes
                for layered in (self._scopes.get(name), self._forgotten.get(name))
                if layered is not None
            ]
        for layered in found:
            layered.erased(context)

    def _forget_idle(self) -> None:
        """Forget the least recently used idle scopes beyond the bound (a scope that
        holds something is moved to the end instead, and checked once per call)."""
        skipped = 0
        while len(self._scopes) > MAX_IDLE_SCOPES and skipped < len(self._scopes):
            name, oldest = next(iter(self._scopes.items()))
            if not oldest.is_idle():
                self._scopes.move_to_end(name)
                skipped += 1
                continue
            del self._scopes[name]
            self._forgotten[name] = oldest


def forget_scopes(context: MemoryContext, scopes: Iterable[str]) -> None:
    """After ``forget`` erased ``scopes`` of ``context``'s project: the layers of
    those scopes of every memory of this process on that database forget what
    they hold in the process (working memory, the deleted scope row's key).
    Other processes keep theirs: their next write to such a scope makes a new row
    (``tiermem._ops.layer_base.write``; ``docs/reliability.md``, I19)."""
    names = list(scopes)
    for registry in list(_REGISTRIES):
        registry.erased(context, names)


#: Every registry, so that a forked child can give each a new lock.
_REGISTRIES: weakref.WeakSet[LayerRegistry] = weakref.WeakSet()


def _reset_after_fork() -> None:
    """In a forked child, each registry keeps its scopes but gets a new lock: a thread
    of the parent may have held the old one at the fork, and no thread of the child
    would ever release it."""
    for registry in list(_REGISTRIES):
        registry.after_fork()


os.register_at_fork(after_in_child=_reset_after_fork)
