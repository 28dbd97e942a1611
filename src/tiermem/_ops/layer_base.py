"""Private plumbing of :class:`~tiermem.layers.LayeredMemory`: argument checks,
row conversion and the per-scope transaction helpers."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.engine import Connection, RowMapping

from .._core.messages import load_text, serialize_metadata, validate_session_id
from .._storage import items as layer_store
from .._storage.items import NewItem
from .._storage.store import as_utc
from ..errors import EntryTooLarge, InvalidArgument, InvalidContent, InvalidSessionId
from ..layer_models import KnowledgeEntry, LayerItem, LayerType, Rule
from .working import WorkingMemory

if TYPE_CHECKING:
    from ..memory import ConversationMemory

__all__ = [
    "DEFAULT_MAX_WORKING_ENTRIES",
    "LayerBase",
    "check_count",
    "check_key",
    "check_metadata",
    "check_text",
    "parse_layer",
    "to_item",
    "to_knowledge",
    "to_rule",
    "validate_scope",
]

T = TypeVar("T")

#: Working memory keeps this many of the newest items unless told otherwise.
DEFAULT_MAX_WORKING_ENTRIES = 50
_MAX_KEY_CHARS = 512


def validate_scope(scope: object) -> str:
    """Return ``scope`` if it obeys the session-id rule (1-255 characters, no control
    characters, no outer whitespace).

    Raises:
        InvalidArgument: otherwise.
    """
    try:
        return validate_session_id(scope)
    except InvalidSessionId as exc:
        raise InvalidArgument(str(exc).replace("session id", "scope")) from exc


def parse_layer(value: object) -> LayerType:
    """The layer named by ``value`` (a :class:`LayerType` or its string).

    Raises:
        InvalidArgument: for anything else.
    """
    try:
        return LayerType(value)  # type: ignore[arg-type]
    except ValueError:
        names = ", ".join(layer.value for layer in LayerType)
        raise InvalidArgument(f"unknown memory layer {value!r}; use one of {names}") from None


def check_count(name: str, value: object, minimum: int) -> int:
    """``value`` if it is an int of at least ``minimum``; else ``InvalidArgument``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgument(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def check_text(name: str, value: object, limit: int, *, required: bool = False) -> str:
    """``value`` if it is storable text of at most ``limit`` characters.

    Raises:
        InvalidContent: not a str, empty when ``required`` or a lone surrogate
            (NUL is accepted, stored escaped as conversation entries store it).
        EntryTooLarge: longer than ``limit``.
    """
    if not isinstance(value, str):
        raise InvalidContent(f"{name} must be a str, got {type(value).__name__}")
    if required and not value.strip():
        raise InvalidContent(f"{name} must not be empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidContent(f"{name} is not valid Unicode (lone surrogate?)") from exc
    if len(value) > limit:
        raise EntryTooLarge(
            f"{name} of {len(value)} characters exceeds {limit}", size=len(value), limit=limit
        )
    return value


def check_key(value: object) -> str:
    """A semantic key: non-empty text of at most 512 characters."""
    if value is None:
        raise InvalidArgument('a semantic item needs a key (metadata={"key": ...} or learn())')
    return check_text("key", value, _MAX_KEY_CHARS, required=True)


def check_metadata(value: object) -> dict[str, Any]:
    """A copy of the metadata mapping (``None`` is empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"metadata must be a mapping, got {type(value).__name__}")
    return dict(value)


def to_item(scope: str, row: RowMapping) -> LayerItem:
    """The public item of a ``tiermem_layer_item`` row."""
    return LayerItem(
        id=row["id"],
        scope=scope,
        type=LayerType(row["layer"]),
        content=load_text(row["content"]),
        key=None if row["item_key"] is None else load_text(row["item_key"]),
        metadata=json.loads(row["meta"]),
        token_count=row["token_count"],
        created_at=as_utc(row["created_at"]),
        updated_at=as_utc(row["updated_at"]),
        last_accessed=as_utc(row["last_accessed"]),
        access_count=row["access_count"],
        memory_tier=row["memory_tier"],
    )


def to_knowledge(item: LayerItem) -> KnowledgeEntry:
    """A semantic item as a fact."""
    return KnowledgeEntry(
        key=item.key or "",
        value=item.content,
        metadata=item.metadata,
        created_at=item.created_at,
        updated_at=item.updated_at,
        last_accessed=item.last_accessed,
        access_count=item.access_count,
        memory_tier=item.memory_tier,
    )


def to_rule(item: LayerItem, score: float = 0.0) -> Rule:
    """A procedural item as a rule."""
    return Rule(
        id=item.id,
        condition=item.key or "",
        action=item.content,
        metadata=item.metadata,
        created_at=item.created_at,
        last_accessed=item.last_accessed,
        access_count=item.access_count,
        memory_tier=item.memory_tier,
        score=score,
    )


class LayerBase:
    """State and transaction helpers shared by the parts of ``LayeredMemory``.

    Args:
        memory: the memory whose database, clock, token counter, summarizer and
            configuration the layers use.
        scope: the namespace inside the memory's project.
        max_working_entries: how many working items are kept (default 50).
    """

    def __init__(
        self, memory: ConversationMemory, scope: str, *, max_working_entries: int | None = None
    ) -> None:
        self._memory = memory
        self.scope = validate_scope(scope)
        self._working = WorkingMemory(
            self.scope,
            DEFAULT_MAX_WORKING_ENTRIES if max_working_entries is None else max_working_entries,
        )
        self._scope_pk: int | None = None

    def __repr__(self) -> str:
        return f"LayeredMemory(project={self._memory.project!r}, scope={self.scope!r})"

    @property
    def memory(self) -> ConversationMemory:
        """The conversation memory these layers belong to."""
        return self._memory

    @property
    def max_working_entries(self) -> int:
        """How many working items are kept; setting it trims at once."""
        return self._working.max_entries

    @max_working_entries.setter
    def max_working_entries(self, value: int) -> None:
        self._working.max_entries = value

    def _write(self, work: Callable[[Connection, int], T]) -> T:
        """Run ``work(conn, scope_pk)`` in one write transaction, making the scope row."""
        now, project = self._memory.now(), self._memory.project

        def run(conn: Connection) -> tuple[T, int]:
            pk = self._scope_pk or layer_store.ensure_scope_pk(conn, project, self.scope, now)
            return work(conn, pk), pk

        result, pk = self._memory.database.run(run)
        self._scope_pk = pk  # cached once committed: scope rows are never deleted
        return result

    def _read(self, work: Callable[[Connection, int], T], empty: T, *, write: bool = False) -> T:
        """Run ``work(conn, scope_pk)`` in one transaction; ``empty`` without a scope row."""
        project = self._memory.project

        def run(conn: Connection) -> tuple[T, int | None]:
            pk = self._scope_pk or layer_store.get_scope_pk(conn, project, self.scope)
            return (empty, pk) if pk is None else (work(conn, pk), pk)

        result, pk = self._memory.database.run(run, write=write)
        if pk is not None:
            self._scope_pk = pk
        return result

    def _totals(self) -> dict[str, tuple[int, int]]:
        """Per stored layer: (items, bytes)."""
        empty: dict[str, tuple[int, int]] = {}
        return self._read(layer_store.layer_totals, empty)

    def _prepare(
        self, layer: LayerType, key: str | None, content: str, metadata: Mapping[str, Any]
    ) -> NewItem:
        """Check, serialize and count an item before any transaction opens."""
        text = check_text("content", content, self._memory.config.max_entry_chars)
        meta = serialize_metadata(metadata)
        size = len(text.encode()) + len(meta.encode()) + len((key or "").encode())
        return NewItem(
            layer=layer.value,
            key=key,
            content=text,
            meta=meta,
            token_count=self._memory.counter.count_text(text),
            byte_size=size,
        )
