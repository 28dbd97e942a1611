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
from json.encoder import encode_basestring_ascii
from typing import Any, cast

from blinker import NamedSignal

from . import signals
from ._storage.events import NewEvent
from .errors import TiermemError
from .types import CompressionResult, EntryType, ForgetResult, MemoryEntry

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
    "SessionRenamed",
    "TierChanged",
    "load_payload",
]


def _dump(payload: Mapping[str, Any]) -> str:
    """A payload as the feed stores it: compact JSON, keys sorted."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


# A JSON string, as ``json.dumps`` writes it (ASCII, so a lone surrogate is escaped
# rather than failing the write), without the encoder's per-call set-up.
_text = encode_basestring_ascii


#: The codes an entry's stored payload gives its type and its most frequent roles, by
#: position: stored payloads keep them, so a value is only ever appended here.
_ENTRY_TYPES: tuple[str, ...] = (
    EntryType.MESSAGE.value,
    EntryType.TOOL_CALL.value,
    EntryType.TOOL_RESULT.value,
    EntryType.CONTEXT.value,
    EntryType.SUMMARY.value,
)
_ENTRY_ROLES: tuple[str, ...] = ("user", "assistant", "tool", "system")

# What an append writes for each: the code, or else the JSON string.
_TYPE_CODES = {value: str(code) for code, value in enumerate(_ENTRY_TYPES)}
_ROLE_CODES = {value: str(code) for code, value in enumerate(_ENTRY_ROLES)}


def _coded(value: str, codes: Mapping[str, str]) -> str:
    code = codes.get(value)
    return _text(value) if code is None else code


def _decoded(value: int | str, names: tuple[str, ...]) -> str:
    return names[value] if isinstance(value, int) else value


def load_payload(kind: str, stored: str) -> dict[str, Any]:
    """A stored payload as the feed delivers it: the JSON object, or an
    ``entry:added`` event's stored array (:meth:`EntryAdded.parts`) made an object
    again."""
    payload = json.loads(stored)
    if kind == EntryAdded.kind and isinstance(payload, list):
        return EntryAdded.expand(payload)
    return cast(dict[str, Any], payload)


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
        """The stored payload of ``entry``'s event split around the value of its
        ``entry_id`` (which is not read): an append writes ``head + str(id) + tail``
        with the id its insert gives, in the same statement.

        An append writes an event per entry, so its payload is stored as a JSON
        array of the values alone (``[entry_id, seq, token_count, pinned, type,
        role]``, then ``content`` when asked), not as an object that repeats every
        key; the type, and the role when it is ``user``, ``assistant``, ``tool`` or
        ``system``, are stored as their number in a fixed list (``[7,3,42,0,0,1]``
        is an assistant's message). :func:`load_payload` gives readers the object
        back; a type or role stored as a string (another role, or a payload written
        before these numbers) reads as that string.
        """
        tail = (
            f",{entry.seq},{entry.token_count},{int(entry.pinned)},"
            f"{_coded(entry.type.value, _TYPE_CODES)},{_coded(entry.role, _ROLE_CODES)}"
        )
        if content:
            tail += "," + _text(entry.content)
        return "[", tail + "]"

    @staticmethod
    def expand(values: list[Any]) -> dict[str, Any]:
        """The payload of a stored array (see :meth:`parts`), keys in the order of
        the object form's sorted JSON."""
        entry_id, seq, token_count, pinned, kind, role, *content = values
        payload: dict[str, Any] = {"content": content[0]} if content else {}
        payload.update(
            entry_id=entry_id,
            pinned=bool(pinned),
            role=_decoded(role, _ENTRY_ROLES),
            seq=seq,
            token_count=token_count,
            type=_decoded(kind, _ENTRY_TYPES),
        )
        return payload

    def rows(self, content: bool) -> Iterator[NewEvent]:
        head, tail = self.parts(self.entry, content)
        yield NewEvent(self.kind, self.session_id, f"{head}{self.entry.id}{tail}")


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
class SessionRenamed(Event):
    """A session took a new id (``session_id``); the feed's earlier events of the
    session carry it too. Payload: ``previous`` (the id it had)."""

    kind = "session:renamed"
    signal = signals.session_renamed

    session_id: str
    previous: str

    def rows(self, content: bool) -> Iterator[NewEvent]:
        yield NewEvent(self.kind, self.session_id, _dump({"previous": self.previous}))


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
        SessionRenamed,
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
