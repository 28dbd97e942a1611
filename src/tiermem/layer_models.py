"""Public value types of the memory layers (``mem.layers(scope)``)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = [
    "KnowledgeEntry",
    "LayerCompaction",
    "LayerHit",
    "LayerItem",
    "LayerStats",
    "LayerType",
    "Rule",
]


class LayerType(enum.StrEnum):
    """The four memory layers.

    * ``working``: the current task's scratch pad, in this process only,
      trimmed to the newest ``max_working_entries``.
    * ``episodic``: events, in order, searchable.
    * ``semantic``: facts under a unique key (``learn`` / ``recall``).
    * ``procedural``: rules, a condition and an action (``add_rule`` / ``match_rules``).
    """

    WORKING = "working"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"


@dataclass(frozen=True, slots=True)
class LayerItem:
    """One item of a layer.

    Attributes:
        id: the item's id (working items are numbered per process).
        scope: the scope it belongs to.
        type: its layer.
        content: the text (a semantic value, a procedural action).
        key: a semantic item's key or a procedural rule's condition.
        metadata: the caller's metadata (``key`` and ``condition`` left out);
            a compaction summary carries ``summary: True`` and ``summarized_items``.
        token_count: tokens of ``content`` with the memory's encoding.
        created_at / updated_at: when it was stored and last changed.
        last_accessed / access_count / memory_tier: its access tier, as sessions
            have; a search hit or a ``recall`` counts as an access.
    """

    id: int
    scope: str
    type: LayerType
    content: str
    key: str | None
    metadata: Mapping[str, Any]
    token_count: int
    created_at: datetime
    updated_at: datetime
    last_accessed: datetime
    access_count: int
    memory_tier: str


@dataclass(frozen=True, slots=True)
class LayerHit:
    """A search result: the item (its access already recorded) and its score.

    ``score`` is the text relevance (1.0 for the best match, the others in
    proportion) plus the recency bonus (up to 0.5 for an item created in the
    last 24 hours, decaying linearly) plus the tier boost
    (:func:`tiermem.tiers.tier_boost` of the tier its last access gives).
    """

    item: LayerItem
    score: float


@dataclass(frozen=True, slots=True)
class KnowledgeEntry:
    """A semantic fact: ``value`` stored under ``key``."""

    key: str
    value: str
    metadata: Mapping[str, Any]
    created_at: datetime
    updated_at: datetime
    last_accessed: datetime
    access_count: int
    memory_tier: str


@dataclass(frozen=True, slots=True)
class Rule:
    """A procedural rule: when ``condition`` holds, do ``action``.

    ``score`` is the match score in :meth:`~tiermem.layers.LayeredMemory.match_rules`
    results and 0.0 elsewhere.
    """

    id: int
    condition: str
    action: str
    metadata: Mapping[str, Any]
    created_at: datetime
    last_accessed: datetime
    access_count: int
    memory_tier: str
    score: float = 0.0


@dataclass(frozen=True, slots=True)
class LayerStats:
    """Sizes of one scope's layers.

    Attributes:
        working_memory_tokens: tiktoken tokens of the working items.
        episodic_entry_count / semantic_entry_count / procedural_rule_count: items.
        total_storage_bytes: UTF-8 bytes of every item's content, key and
            metadata, working memory included.
    """

    working_memory_tokens: int
    episodic_entry_count: int
    semantic_entry_count: int
    procedural_rule_count: int
    total_storage_bytes: int


@dataclass(frozen=True, slots=True)
class LayerCompaction:
    """What :meth:`~tiermem.layers.LayeredMemory.compact` did.

    Attributes:
        type: the layer compacted.
        removed: items that are gone (summarized or dropped).
        kept: items left, the summary included.
        summary: the item that now summarizes the removed ones, if any.
    """

    type: LayerType
    removed: int
    kept: int
    summary: LayerItem | None = None
