"""The results of the MCP tools: one pydantic model per tool (its output schema),
and the conversions from tiermem's values."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from ..layer_models import KnowledgeEntry, LayerItem, Rule
from ..types import MemoryEntry, TierStats

__all__ = [
    "EXPIRED_HINT_SHARE",
    "AddMessageOut",
    "AddRuleOut",
    "AppendOut",
    "CompactOut",
    "ContextOut",
    "EntryOut",
    "ExpandOut",
    "FactOut",
    "ItemOut",
    "LayerHitOut",
    "LayerSearchOut",
    "LayerStatsOut",
    "LearnOut",
    "LoadContextOut",
    "LoadedOut",
    "MemoryStatsOut",
    "PruneOut",
    "RecalculateOut",
    "RecallOut",
    "RuleOut",
    "RulesOut",
    "SearchHitOut",
    "SearchOut",
    "entry_line",
    "entry_out",
    "fact_out",
    "item_out",
    "memory_stats",
    "plural",
    "rule_out",
]

#: ``get_memory_stats`` recommends a prune once this share of sessions or items is expired.
EXPIRED_HINT_SHARE = 0.10


class MemoryStatsOut(BaseModel):
    """Tier distribution of a project's sessions and layer items, with health hints."""

    project: str
    total: int
    active: int
    recent: int
    archived: int
    expired: int
    items: int
    active_items: int
    recent_items: int
    archived_items: int
    expired_items: int
    expired_share: float = Field(description="Share of the sessions that are expired.")
    prune_recommended: bool
    hints: list[str]


class RecalculateOut(BaseModel):
    """How many sessions and layer items changed stored tier."""

    project: str
    updated: int


class PruneOut(BaseModel):
    """How many expired sessions, layer items and documents were (or would be) deleted."""

    project: str
    deleted: int = Field(description="Deleted, or with dry_run, that would be.")
    dry_run: bool


class LoadedOut(BaseModel):
    """A loaded session, with its context as a model would get it."""

    session_id: str
    tier: str = Field(description="The tier it was loaded from.")
    last_accessed: datetime
    access_count: int
    total_entries: int
    context_tokens: int
    context: str


class LoadContextOut(BaseModel):
    """Sessions, most relevant first (ACTIVE, RECENT, ARCHIVED, then recency)."""

    project: str
    sessions: list[LoadedOut]


class EntryOut(BaseModel):
    """A stored conversation entry."""

    id: int
    session_id: str
    seq: int
    type: str
    role: str
    content: str
    timestamp: datetime
    token_count: int
    compressed: bool
    summary_id: int | None
    pinned: bool
    metadata: dict[str, Any]


class AddMessageOut(BaseModel):
    """The stored message."""

    entry: EntryOut


class ContextOut(BaseModel):
    """The budgeted context of a session: summaries, then recent entries."""

    session_id: str
    context: str


class SearchHitOut(BaseModel):
    """A matching entry and its score."""

    score: float
    entry: EntryOut


class SearchOut(BaseModel):
    """Matching entries, best first."""

    hits: list[SearchHitOut]


class ExpandOut(BaseModel):
    """The original entries a summary covers."""

    summary_id: int
    entries: list[EntryOut]


class ItemOut(BaseModel):
    """A layer item."""

    id: int
    scope: str
    type: str
    content: str
    key: str | None
    metadata: dict[str, Any]
    token_count: int
    created_at: datetime
    updated_at: datetime
    last_accessed: datetime
    access_count: int
    memory_tier: str


class AppendOut(BaseModel):
    """The stored item."""

    item: ItemOut


class LayerHitOut(BaseModel):
    """A matching layer item and its score."""

    score: float
    item: ItemOut


class LayerSearchOut(BaseModel):
    """Matching items of a layer, best first."""

    hits: list[LayerHitOut]


class FactOut(BaseModel):
    """A semantic fact."""

    key: str
    value: str
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    last_accessed: datetime
    access_count: int
    memory_tier: str


class LearnOut(BaseModel):
    """The stored fact."""

    fact: FactOut


class RecallOut(BaseModel):
    """The fact stored under a key, if any (expired facts are not returned)."""

    found: bool
    fact: FactOut | None


class RuleOut(BaseModel):
    """A procedural rule: when ``condition`` holds, do ``action``."""

    id: int
    condition: str
    action: str
    metadata: dict[str, Any]
    created_at: datetime
    last_accessed: datetime
    access_count: int
    memory_tier: str
    score: float


class AddRuleOut(BaseModel):
    """The stored rule."""

    rule: RuleOut


class RulesOut(BaseModel):
    """Matching rules, best first."""

    rules: list[RuleOut]


class CompactOut(BaseModel):
    """What a layer compaction did."""

    layer: str
    removed: int
    kept: int
    summary: ItemOut | None


class LayerStatsOut(BaseModel):
    """Sizes of a scope's layers."""

    scope: str
    working_memory_tokens: int
    episodic_entry_count: int
    semantic_entry_count: int
    procedural_rule_count: int
    total_storage_bytes: int


# ---------------------------------------------------------------- conversions


def entry_out(entry: MemoryEntry) -> EntryOut:
    return EntryOut(
        id=entry.id,
        session_id=entry.session_id,
        seq=entry.seq,
        type=entry.type.value,
        role=entry.role,
        content=entry.content,
        timestamp=entry.timestamp,
        token_count=entry.token_count,
        compressed=entry.compressed,
        summary_id=entry.summary_id,
        pinned=entry.pinned,
        metadata=dict(entry.metadata),
    )


def item_out(item: LayerItem) -> ItemOut:
    return ItemOut(
        id=item.id,
        scope=item.scope,
        type=item.type.value,
        content=item.content,
        key=item.key,
        metadata=dict(item.metadata),
        token_count=item.token_count,
        created_at=item.created_at,
        updated_at=item.updated_at,
        last_accessed=item.last_accessed,
        access_count=item.access_count,
        memory_tier=item.memory_tier,
    )


def fact_out(fact: KnowledgeEntry) -> FactOut:
    return FactOut(
        key=fact.key,
        value=fact.value,
        metadata=dict(fact.metadata),
        created_at=fact.created_at,
        updated_at=fact.updated_at,
        last_accessed=fact.last_accessed,
        access_count=fact.access_count,
        memory_tier=fact.memory_tier,
    )


def rule_out(rule: Rule) -> RuleOut:
    return RuleOut(
        id=rule.id,
        condition=rule.condition,
        action=rule.action,
        metadata=dict(rule.metadata),
        created_at=rule.created_at,
        last_accessed=rule.last_accessed,
        access_count=rule.access_count,
        memory_tier=rule.memory_tier,
        score=rule.score,
    )


def entry_line(entry: EntryOut) -> str:
    return f"[{entry.session_id} #{entry.seq}] {entry.role}: {entry.content}"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 hit``, ``2 hits`` (``nouns``: an irregular plural, ``1 entry``, ``2 entries``)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def _share(count: int, total: int) -> float:
    return count / total if total else 0.0


def memory_stats(project: str, tiers: TierStats) -> MemoryStatsOut:
    """``TierStats`` with the health indicators ``get_memory_stats`` adds."""
    hints: list[str] = []
    prune = False
    for expired, total, what in (
        (tiers.expired, tiers.total, "session"),
        (tiers.expired_items, tiers.items, "layer item"),
    ):
        if expired and expired >= EXPIRED_HINT_SHARE * total:
            prune = True
            verb = "is" if expired == 1 else "are"
            hints.append(
                f"{plural(expired, what)} ({_share(expired, total):.1%}) {verb} expired: "
                "prune_expired_contexts deletes them"
            )
    if not tiers.total and not tiers.items:
        hints.append("no sessions in this project yet")
    elif tiers.total and not tiers.active:
        hints.append("no active sessions: none was read or written within the active window")
    return MemoryStatsOut(
        project=project,
        expired_share=_share(tiers.expired, tiers.total),
        prune_recommended=prune,
        hints=hints,
        **{name: getattr(tiers, name) for name in TierStats.__dataclass_fields__},
    )
