"""Typed rows of the conversation and layer tables, as the storage statements return them.

The SQLModel classes in :mod:`tiermem._storage.schema` define the tables; these
records are what reading them gives back: plain frozen dataclasses, built from a
row by keyword (``cls(**row)``), which costs a few microseconds on the path of
every turn where a validating model would cost far more. Their fields follow the
columns of their table in order, so a whole-table row also builds one by position.
A change is a new record (:func:`dataclasses.replace`), never an update in place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["EntryRecord", "ItemRecord", "SessionRecord", "SummaryRecord"]


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A row of ``tiermem_session``: a session with its counters, tier and claim
    (see :class:`tiermem._storage.schema.SessionRow` for what each column means)."""

    pk: int
    project: str
    session_id: str
    created_at: datetime
    last_accessed: datetime
    access_count: int
    memory_tier: str
    last_seq: int
    entry_count: int
    entry_tokens: int
    active_count: int
    active_tokens: int
    summary_count: int
    summary_tokens: int
    encoding: str
    pending_calls: str
    claim_token: str | None
    claim_expires_at: datetime | None
    failures: int
    backoff_until: datetime | None
    compressed_seq: int = 0

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> SessionRecord:
        """The record of a row with exactly the table's columns, keyed by name."""
        return cls(**row)

    @property
    def context_tokens(self) -> int:
        """What ``get_messages`` hands the model: active entries and top-level summaries."""
        return self.active_tokens + self.summary_tokens


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """A row of ``tiermem_summary`` (see :class:`tiermem._storage.schema.SummaryRow`)."""

    id: int
    session_pk: int
    content: str
    level: int
    first_seq: int
    last_seq: int
    entry_count: int
    token_count: int
    original_token_count: int
    created_at: datetime
    start_time: datetime
    end_time: datetime
    parent_id: int | None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> SummaryRecord:
        """The record of a row with exactly the table's columns, keyed by name."""
        return cls(**row)


@dataclass(frozen=True, slots=True)
class EntryRecord:
    """A row of ``tiermem_entry`` (see :class:`tiermem._storage.schema.EntryRow`)."""

    id: int
    session_pk: int
    seq: int
    type: str
    role: str
    content: str
    message: str
    message_id: str | None
    timestamp: datetime
    token_count: int
    pinned: bool
    meta: str
    summary_id: int | None
    retired_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ItemRecord:
    """A row of ``tiermem_layer_item``: one episodic event, semantic fact or
    procedural rule of a scope (see :class:`tiermem._storage.layer_schema.LayerItemRow`)."""

    id: int
    scope_pk: int
    layer: str
    item_key: str | None
    content: str
    meta: str
    token_count: int
    byte_size: int
    created_at: datetime
    updated_at: datetime
    last_accessed: datetime
    access_count: int
    memory_tier: str

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> ItemRecord:
        """The record of a row with exactly the table's columns, keyed by name."""
        return cls(**row)
