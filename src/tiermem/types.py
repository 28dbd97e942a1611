"""Public value types: configuration, entries, summaries, results and statistics."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from langchain_core.messages import BaseMessage

from ._core.settings import KeywordChecked, check_field_names
from .errors import InvalidArgument
from .tiers import MemoryTier, TierPolicy

__all__ = [
    "MAX_DURATION_SECONDS",
    "CompressionResult",
    "ContextMessages",
    "EntryType",
    "ForgetResult",
    "LoadedSession",
    "MemoryConfig",
    "MemoryEntry",
    "MemorySummary",
    "SearchHit",
    "SessionInfo",
    "SessionStats",
    "SessionView",
]


class EntryType(enum.StrEnum):
    """What an entry holds (five types)."""

    MESSAGE = "message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    CONTEXT = "context"
    SUMMARY = "summary"


def _positive_int(name: str, value: object, *, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgument(f"{name} must be an int >= {minimum}, got {value!r}")


#: The longest ``claim_ttl``, ``backoff_base`` and ``backoff_max`` (10 years of 365
#: days, in seconds): these are added to the clock's time, which must stay a datetime.
MAX_DURATION_SECONDS = 10 * 365 * 86_400


def _positive_number(
    name: str, value: object, *, allow_none: bool = False, maximum: float = math.inf
) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidArgument(f"{name} must be a number > 0, got {value!r}")
    if value > maximum:
        raise InvalidArgument(f"{name} must be at most {maximum:,.0f}, got {value!r}")


@dataclass(frozen=True, slots=True)
class MemoryConfig(KeywordChecked):
    """How a :class:`~tiermem.ConversationMemory` budgets and compresses.

    Attributes:
        max_tokens: the hard limit of every context handed to a model, and the
            high-water mark: compress when the context (active entries plus
            summaries) exceeds this many tokens.
        compress_to: the low-water mark, a share of ``max_tokens``: an automatic
            compression summarizes only the oldest entries it must for the context
            to fall to about ``compress_to * max_tokens``, so the context keeps as
            many verbatim entries as fit there (never fewer than ``recent_window``)
            and compressions are rare and deep.
        max_entries: also compress when more entries than this are active (down to
            ``compress_to`` of it); ``None`` (the default): only tokens count.
        recent_window: the newest active entries never compressed.
        recall_share: the share of ``max_tokens`` a read may give to recalled
            entries (more when the context leaves more unused; 0: never recall).
        recall_window: the neighbouring entries a recalled hit brings on each side
            (0: the hits alone, which leaves room for more of them).
        recall_scope: ``"session"`` recalls compressed entries of the session read;
            ``"project"`` also the project's other sessions.
        recall_layers: layers whose items a read also recalls (``"episodic"``,
            ``"semantic"``), from the scope ``recall_layer_scope``; ``()``: none.
        recall_layer_scope: the layer scope ``recall_layers`` recalls from (a user's,
            say: ``memory.with_config(recall_layer_scope=user_id)``).
        min_entries_to_compress: an automatic compression needs at least this many.
        auto_compress: compress automatically after ``add_*``.
        compression_ratio: target summary length as a share of its input.
        summary_share: merge the summaries into one higher-level summary when
            they pass this share of ``max_tokens``.
        summarizer_timeout: seconds before a summarizer call is abandoned
            (``None``: wait forever).
        embedding_timeout: seconds before a call of the embedding model is
            abandoned (``None``: wait forever): a search then ranks by words, and
            the rows wait for a backfill.
        heuristic_fallback: when the summarizer fails, store the heuristic
            summary instead of leaving the entries uncompressed.
        background: compress on a worker thread; ``add_*`` returns at once.
        claim_ttl: seconds a compression claim lives, so a killed worker
            never blocks a session forever; at most ``MAX_DURATION_SECONDS``
            (10 years).
        backoff_base / backoff_max: seconds automatic compression pauses after
            a failure, doubling per consecutive failure up to the maximum; each
            at most ``MAX_DURATION_SECONDS`` (10 years).
        max_entry_chars: largest accepted entry: the JSON characters of its message
            and its metadata together, for ``add_*`` and for imported entries alike.
        max_summarizer_input_tokens: most tokens one summarizer call receives.
        summary_prompt: a custom prompt with a ``{conversation}`` placeholder and
            optionally ``{target_tokens}``. Only these two are replaced; any other
            brace is kept as written (a JSON example needs no escaping, and
            ``{{`` stays ``{{``).
        tier_policy: the access-tier thresholds.
        change_feed: write every change's event to the durable change feed
            (:mod:`tiermem.feed`) in the change's own transaction.
        event_retention: events older than this are deleted by ``prune_expired``
            and ``tiermem events prune``; at most 10 years.
        event_content: include an entry's text in its ``entry:added`` event.

    Raises:
        InvalidArgument: for a value out of range and for a keyword that names no
            field (``max_token=``), which raises ``InvalidArgument`` (a ``ValueError``)
            rather than a constructor's usual ``TypeError``, as every bad setting does.
    """

    max_tokens: int = 50_000
    compress_to: float = 0.6
    max_entries: int | None = None
    recent_window: int = 10
    recall_share: float = 0.3
    recall_window: int = 0
    recall_scope: str = "session"
    recall_layers: tuple[str, ...] = ()
    recall_layer_scope: str = "default"
    min_entries_to_compress: int = 5
    auto_compress: bool = True
    compression_ratio: float = 0.3
    summary_share: float = 0.2
    summarizer_timeout: float | None = 60.0
    embedding_timeout: float | None = 30.0
    heuristic_fallback: bool = False
    background: bool = False
    claim_ttl: float = 120.0
    backoff_base: float = 5.0
    backoff_max: float = 300.0
    max_entry_chars: int = 16_000_000
    max_summarizer_input_tokens: int = 100_000
    summary_prompt: str | None = None
    tier_policy: TierPolicy = field(default_factory=TierPolicy)
    change_feed: bool = True
    event_retention: timedelta = timedelta(days=7)
    event_content: bool = False

    def __post_init__(self) -> None:
        _positive_int("max_tokens", self.max_tokens)
        if self.max_entries is not None:
            _positive_int("max_entries", self.max_entries)
        _positive_int("recent_window", self.recent_window, minimum=0)
        _positive_int("min_entries_to_compress", self.min_entries_to_compress)
        _positive_int("recall_window", self.recall_window, minimum=0)
        if self.recall_window > 50:
            raise InvalidArgument(f"recall_window must be at most 50, got {self.recall_window}")
        share = self.recall_share
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share < 1:
            raise InvalidArgument(f"recall_share must be a number in [0, 1), got {share!r}")
        if self.recall_scope not in ("session", "project"):
            raise InvalidArgument(
                f"recall_scope must be 'session' or 'project', got {self.recall_scope!r}"
            )
        layers = self.recall_layers
        if not isinstance(layers, tuple) or not set(layers) <= {"episodic", "semantic"}:
            raise InvalidArgument(
                f"recall_layers must be a tuple of 'episodic' and 'semantic', got {layers!r}"
            )
        scope = self.recall_layer_scope
        if not isinstance(scope, str) or not 0 < len(scope) <= 255:
            raise InvalidArgument(
                f"recall_layer_scope must be a str of 1-255 characters, got {scope!r}"
            )
        _positive_int("max_entry_chars", self.max_entry_chars)
        _positive_int("max_summarizer_input_tokens", self.max_summarizer_input_tokens)
        for name in ("compression_ratio", "summary_share", "compress_to"):
            value = getattr(self, name)
            _positive_number(name, value)
            if value >= 1:
                raise InvalidArgument(f"{name} must be below 1, got {value!r}")
        _positive_number("summarizer_timeout", self.summarizer_timeout, allow_none=True)
        _positive_number("embedding_timeout", self.embedding_timeout, allow_none=True)
        for name in ("claim_ttl", "backoff_base", "backoff_max"):
            _positive_number(name, getattr(self, name), maximum=MAX_DURATION_SECONDS)
        if self.summary_prompt is not None and "{conversation}" not in self.summary_prompt:
            raise InvalidArgument("summary_prompt needs a {conversation} placeholder")
        if not isinstance(self.tier_policy, TierPolicy):
            raise InvalidArgument("tier_policy must be a TierPolicy")
        for name in ("change_feed", "event_content"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgument(f"{name} must be a bool, got {getattr(self, name)!r}")
        retention = self.event_retention
        if not isinstance(retention, timedelta) or not (
            timedelta(0) < retention <= timedelta(seconds=MAX_DURATION_SECONDS)
        ):
            raise InvalidArgument(
                "event_retention must be a positive timedelta of at most 10 years, "
                f"got {retention!r}"
            )

    def replace(self, **changes: Any) -> MemoryConfig:
        """A copy with ``changes`` applied and validated."""
        check_field_names(type(self), changes)
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One stored entry of a session, in ``seq`` order.

    ``retired_at`` is set once the entry is no longer current: a graph's checkpoint
    (``TieredSaver``) revised its message (same id, new content) or removed it. A
    retired entry is kept, for the checkpoints that hold it, but no context,
    compression, search or recall sees it.
    """

    id: int
    session_id: str
    seq: int
    type: EntryType
    role: str
    content: str
    timestamp: datetime
    token_count: int
    compressed: bool
    summary_id: int | None
    metadata: Mapping[str, Any]
    pinned: bool
    message: BaseMessage = field(repr=False, compare=False)
    retired_at: datetime | None = None

    def to_message(self) -> BaseMessage:
        """The LangChain message exactly as it was added (a copy)."""
        return self.message.model_copy(deep=True)


@dataclass(frozen=True, slots=True)
class MemorySummary:
    """A summary of a contiguous run of entries; the originals stay stored.

    ``original_entry_ids`` lists the entries it covers, as ``get_summaries()``
    returns it; the merged summary in a merge's :class:`CompressionResult` leaves it
    empty, since a merge covers the whole conversation so far and reading every id
    would make each merge cost grow with it (``expand_summary(id)`` and
    ``get_summaries()`` list them).
    """

    id: int
    session_id: str
    content: str
    original_entry_ids: tuple[int, ...]
    token_count: int
    original_token_count: int
    compression_ratio: float
    created_at: datetime
    time_range: tuple[datetime, datetime]
    level: int
    first_seq: int
    last_seq: int
    parent_id: int | None = None


@dataclass(frozen=True, slots=True)
class CompressionResult:
    """What one compression did; sent with the ``compressed`` signal."""

    session_id: str
    summary: MemorySummary
    entries_compressed: int
    tokens_before: int
    tokens_after: int
    tokens_saved: int
    ratio: float
    merged_summaries: int = 0


@dataclass(frozen=True, slots=True)
class SessionStats:
    """Counters of one session, read from its row (no scan of its entries).

    ``total_tokens`` counts every stored entry, ``active_tokens`` the entries not
    compressed, ``context_tokens`` what the model is handed (active entries plus
    top-level summaries).
    """

    total_entries: int
    active_entries: int
    compressed_entries: int
    summaries: int
    total_tokens: int
    active_tokens: int
    summary_tokens: int
    context_tokens: int
    memory_tier: str
    last_accessed: datetime
    access_count: int


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One row of :meth:`~tiermem.ConversationMemory.list_sessions`."""

    session_id: str
    project: str
    created_at: datetime
    last_accessed: datetime
    access_count: int
    memory_tier: str
    total_entries: int
    context_tokens: int


class ContextMessages(list[BaseMessage]):
    """The context a read hands a model: a ``list`` of messages, plus the
    ``version`` of the session it shows.

    ``version`` is an opaque string that changes with every append to the session
    and when the session is cleared (or does not exist yet). Pass it as
    ``add_and_get_messages(..., expected_version=context.version)`` to store a
    turn answered from this context only if nobody changed the session since.
    """

    __slots__ = ("version",)

    def __init__(self, messages: Iterable[BaseMessage] = (), version: str = "0:0") -> None:
        super().__init__(messages)
        self.version = version


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A search result: the entry and its relevance score (higher is better).

    Attributes:
        window: with ``search(..., window=n)``, the entries of the hit's session
            from ``n`` before it to ``n`` after it, in order, the hit included
            (empty otherwise).
    """

    entry: MemoryEntry
    score: float
    window: tuple[MemoryEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class TierStats:
    """How many sessions, and how many stored layer items, of a project are in each
    tier, by their current ``last_accessed``.

    Attributes:
        total: every session of the project.
        active: accessed within ``active_within`` (default 1 h), or in the future.
        recent: older than that, within ``recent_within`` (24 h).
        archived: older than that, but not more than ``expired_after`` (30 d).
        expired: last accessed strictly longer ago than ``expired_after`` (30 d).
        items / active_items / recent_items / archived_items / expired_items: the
            same for the project's episodic, semantic and procedural items (every
            scope; working memory is not stored). Expired items are counted until
            ``prune_expired`` deletes them, though no read returns them.
        documents: the same for the project's stored JSON documents
            (``tiermem-langgraph``), with ``active_documents``, ``recent_documents``,
            ``archived_documents`` and ``expired_documents``; a document is expired
            only once its time to live has passed, never by age.
    """

    total: int
    active: int
    recent: int
    archived: int
    expired: int
    items: int = 0
    active_items: int = 0
    recent_items: int = 0
    archived_items: int = 0
    expired_items: int = 0
    documents: int = 0
    active_documents: int = 0
    recent_documents: int = 0
    archived_documents: int = 0
    expired_documents: int = 0


@dataclass(frozen=True, slots=True)
class LoadedSession:
    """A session ``load_context`` loaded.

    Attributes:
        session: the session as stored after this load (tier ACTIVE, the access
            counted).
        tier: the tier it was loaded from: the one its ``last_accessed`` gave
            before this load (ACTIVE, RECENT or ARCHIVED; never EXPIRED).
    """

    session: SessionInfo
    tier: MemoryTier


@dataclass(frozen=True, slots=True)
class ForgetResult:
    """What :meth:`ConversationMemory.forget` erased (with ``dry_run``: would erase).

    Attributes:
        sessions: the ids of the sessions found (of those named), in order.
        scopes: the layer scopes found, in order.
        namespaces: the namespace prefixes given that held documents.
        entries / summaries / entry_vectors: rows of those sessions.
        layer_items / item_vectors: episodic, semantic and procedural items of
            those scopes and their vectors (working memory is not stored: the
            process's own is emptied).
        documents: stored JSON documents under those namespaces.
        events: change-feed events that named those sessions, scopes or namespaces.
        rows: rows per table, every table the erasure touches (tables added to
            the session cascade later included).
        dry_run: nothing was deleted; the counts are what would be.
        scrubbed: after the commit, the database files were cleared too (SQLite:
            the WAL checkpointed and truncated; see ``docs/reliability.md``);
            ``False`` for a dry run, when a reader kept the WAL busy, or when
            scrubbing failed (logged; the rows are gone all the same).
    """

    sessions: tuple[str, ...]
    scopes: tuple[str, ...]
    namespaces: tuple[tuple[str, ...], ...]
    entries: int
    summaries: int
    entry_vectors: int
    layer_items: int
    item_vectors: int
    documents: int
    events: int
    rows: tuple[tuple[str, int], ...]
    dry_run: bool
    scrubbed: bool

    def counts(self) -> dict[str, int]:
        """How many of each kind: sessions, scopes, namespaces, entries, summaries,
        entry_vectors, layer_items, item_vectors, documents, events (no names)."""
        return {
            "sessions": len(self.sessions),
            "scopes": len(self.scopes),
            "namespaces": len(self.namespaces),
            "entries": self.entries,
            "summaries": self.summaries,
            "entry_vectors": self.entry_vectors,
            "layer_items": self.layer_items,
            "item_vectors": self.item_vectors,
            "documents": self.documents,
            "events": self.events,
        }


@dataclass(frozen=True, slots=True)
class SessionView:
    """A session as :meth:`~tiermem.ConversationMemory.peek` saw it, from one snapshot.

    Attributes:
        context: the context text (as ``get_context_for_llm`` renders it).
        stats: the session's counters; its access record is as it was.
    """

    context: str
    stats: SessionStats
