"""Typed change events: one frozen class per kind of committed change.

An operation that changes something builds its events in its transaction; the
change feed writes each event's :meth:`~Event.rows` there, and after the commit
:mod:`tiermem.signals` sends each event's :attr:`~Event.signal` (when it has one)
with the event's fields as keyword arguments. A kind's wire name (:attr:`Event.kind`)
and JSON payload are the change feed's schema (:mod:`tiermem.feed`).

A new kind of change is one more frozen dataclass deriving from :class:`Event`,
with its ``kind``, its ``signal`` (or none) and its ``rows``; the feed and the
signals need nothing else.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from blinker import NamedSignal

from . import signals
from ._storage.events import NewEvent
from .errors import TiermemError
from .types import CompressionResult, ForgetResult, MemoryEntry

__all__ = [
    "KINDS",
    "Compressed",
    "CompressionFailed",
    "DocumentDeleted",
    "DocumentPut",
    "EntryAdded",
    "Event",
    "Forgotten",
    "LayerAppended",
    "LayerCleared",
    "LayerCompacted",
    "Pruned",
    "Recorded",
    "SessionCleared",
    "SessionImported",
    "TierChanged",
]


def _dump(payload: Mapping[str, Any]) -> str:
    """A payload as the feed stores it: compact JSON, keys sorted."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


class Event(ABC):
    """A committed change.

    Attributes:
        kind: the wire name of the change feed's events (and of the signal).
        signal: the blinker signal sent after the commit, with the event's fields as
            keyword arguments; ``None``: the change has events but no signal.
    """

    __slots__ = ()

    kind: str
    signal: NamedSignal | None = None

    def arguments(self) -> dict[str, Any]:
        """The signal's keyword arguments: the event's fields."""
        names = [field.name for field in fields(self)]  # type: ignore[arg-type]
        return {name: getattr(self, name) for name in names}

    @abstractmethod
    def rows(self, content: bool) -> Iterator[NewEvent]:
        """The change feed's rows of this event (``content``: whether entries' text
        goes into their payloads, ``MemoryConfig.event_content``)."""


@dataclass(frozen=True, slots=True)
class EntryAdded(Event):
    """An entry was stored. Payload: ``entry_id``, ``seq``, ``type``, ``role``,
    ``token_count``, ``pinned`` (and ``content`` when asked)."""

    kind = "entry:added"
    signal = signals.entry_added

    session_id: str
    entry: MemoryEntry

    @staticmethod
    def payload(entry: MemoryEntry, content: bool) -> dict[str, Any]:
        """The payload of ``entry``'s event."""
        payload: dict[str, Any] = {
            "entry_id": entry.id,
            "seq": entry.seq,
            "type": entry.type.value,
            "role": entry.role,
            "token_count": entry.token_count,
            "pinned": entry.pinned,
        }
        if content:
            payload["content"] = entry.content
        return payload

    @staticmethod
    def parts(entry: MemoryEntry, content: bool) -> tuple[str, str]:
        """The payload of ``entry``'s event split around the value of its ``entry_id``
        (which is not read): an append writes ``head + str(id) + tail`` with the id
        its insert gives, in the same statement."""
        payload = EntryAdded.payload(entry, content)
        payload["entry_id"] = 0
        # One dump cut at the key: no string value can hold it, since a quote inside
        # a JSON string is escaped.
        head, _, tail = _dump(payload).partition('"entry_id":0')
        return head + '"entry_id":', tail

    def rows(self, content: bool) -> Iterator[NewEvent]:
        yield NewEvent(self.kind, self.session_id, _dump(self.payload(self.entry, content)))


@dataclass(frozen=True, slots=True)
class Compressed(Event):
    """Entries (or summaries) were summarized. Payload: ``summary_id``, ``level``,
    ``first_seq``, ``last_seq``, ``entries_compressed``, ``merged_summaries``,
    ``tokens_before``, ``tokens_after``."""

    kind = "compressed"
    signal = signals.compressed

    session_id: str
    result: CompressionResult

    def rows(self, content: bool) -> Iterator[NewEvent]:
        result, summary = self.result, self.result.summary
        payload = {
            "summary_id": summary.id,
            "level": summary.level,
            "first_seq": summary.first_seq,
            "last_seq": summary.last_seq,
            "entries_compressed": result.entries_compressed,
            "merged_summaries": result.merged_summaries,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
        }
        yield NewEvent(self.kind, self.session_id, _dump(payload))


@dataclass(frozen=True, slots=True)
class CompressionFailed(Event):
    """A compression attempt failed; nothing changed. Payload: ``error`` (the
    exception's class name), ``message``."""

    kind = "compression_failed"
    signal = signals.compression_failed

    session_id: str
    error: TiermemError

    def rows(self, content: bool) -> Iterator[NewEvent]:
        payload = {"error": type(self.error).__name__, "message": str(self.error)}
        yield NewEvent(self.kind, self.session_id, _dump(payload))


@dataclass(frozen=True, slots=True)
class SessionCleared(Event):
    """A session was deleted. Payload: ``entries_removed``."""

    kind = "session:cleared"
    signal = signals.session_cleared

    session_id: str
    entries_removed: int

    def rows(self, content: bool) -> Iterator[NewEvent]:
        yield NewEvent(self.kind, self.session_id, _dump({"entries_removed": self.entries_removed}))


@dataclass(frozen=True, slots=True)
class TierChanged(Event):
    """Sessions moved to ``tier``. One row per session, payload ``tier``."""

    kind = "tier_changed"
    signal = signals.tier_changed

    session_ids: tuple[str, ...]
    tier: str
    project: str

    def rows(self, content: bool) -> Iterator[NewEvent]:
        payload = _dump({"tier": self.tier})
        for session_id in self.session_ids:
            yield NewEvent(self.kind, session_id, payload)


@dataclass(frozen=True, slots=True)
class Pruned(Event):
    """Expired sessions or layer items were deleted (one batch: one of the tuples is
    empty). One row per session with payload ``{}``, one row for the items with
    ``item_ids`` and no session."""

    kind = "pruned"
    signal = signals.pruned

    session_ids: tuple[str, ...]
    item_ids: tuple[int, ...]
    project: str

    def rows(self, content: bool) -> Iterator[NewEvent]:
        for session_id in self.session_ids:
            yield NewEvent(self.kind, session_id, "{}")
        if self.item_ids:
            yield NewEvent(self.kind, None, _dump({"item_ids": list(self.item_ids)}))


@dataclass(frozen=True, slots=True)
class Forgotten(Event):
    """A person's sessions, scopes or documents were erased. The row names nobody:
    its payload is the counts of :meth:`~tiermem.types.ForgetResult.counts`."""

    kind = "forgotten"
    signal = signals.forgotten

    project: str
    result: ForgetResult

    def rows(self, content: bool) -> Iterator[NewEvent]:
        yield NewEvent(self.kind, None, _dump(self.result.counts()))


@dataclass(frozen=True, slots=True)
class SessionImported(Event):
    """A session was imported (no signal). Payload: ``entries``, ``summaries``,
    ``overwrite``."""

    kind = "session:imported"

    session_id: str
    entries: int
    summaries: int
    overwrite: bool

    def rows(self, content: bool) -> Iterator[NewEvent]:
        payload = {"entries": self.entries, "summaries": self.summaries}
        yield NewEvent(self.kind, self.session_id, _dump({**payload, "overwrite": self.overwrite}))


class _Unnamed(Event):
    """An event of one row, naming no session, whose payload is all its fields."""

    __slots__ = ()

    def rows(self, content: bool) -> Iterator[NewEvent]:
        yield NewEvent(self.kind, None, _dump(self.arguments()))


@dataclass(frozen=True, slots=True)
class LayerAppended(_Unnamed):
    """A layer item was stored (no signal); ``key``: a fact's key or a rule's
    condition."""

    kind = "layer:appended"

    scope: str
    layer: str
    item_id: int
    key: str | None


@dataclass(frozen=True, slots=True)
class LayerCleared(_Unnamed):
    """A layer's items (``layer`` ``None``: every stored layer's) were deleted (no
    signal)."""

    kind = "layer:cleared"

    scope: str
    layer: str | None
    removed: int


@dataclass(frozen=True, slots=True)
class LayerCompacted(_Unnamed):
    """Items of a layer were folded into ``summary_id`` or dropped (no signal)."""

    kind = "layer:compacted"

    scope: str
    layer: str
    removed: int
    summary_id: int | None


@dataclass(frozen=True, slots=True)
class DocumentPut(_Unnamed):
    """A stored document (``namespace``, ``key``) was written (no signal)."""

    kind = "document:put"

    namespace: tuple[str, ...]
    key: str


@dataclass(frozen=True, slots=True)
class DocumentDeleted(_Unnamed):
    """A stored document (``namespace``, ``key``) was deleted (no signal)."""

    kind = "document:deleted"

    namespace: tuple[str, ...]
    key: str


@dataclass(frozen=True, slots=True)
class Recorded(Event):
    """An extension's own kind of change (no signal), as
    :meth:`tiermem.feed.ChangeFeed.record` writes it."""

    kind: str
    payload: Mapping[str, Any]
    session_id: str | None = None

    def rows(self, content: bool) -> Iterator[NewEvent]:
        yield NewEvent(self.kind, self.session_id, _dump(self.payload))


#: tiermem's own kinds by wire name.
KINDS: Mapping[str, type[Event]] = {
    kind.kind: kind
    for kind in (
        EntryAdded,
        Compressed,
        CompressionFailed,
        SessionCleared,
        TierChanged,
        Pruned,
        Forgotten,
        SessionImported,
        LayerAppended,
        LayerCleared,
        LayerCompacted,
        DocumentPut,
        DocumentDeleted,
    )
}
