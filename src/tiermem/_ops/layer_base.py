"""What every layer operation shares: one scope's state, argument checks, row
conversion and the scope's transactions.

A :class:`LayerScope` is the state of one scope of one memory: the memory's
:class:`~tiermem._core.context.MemoryContext`, the scope's name, its working
memory and the cached key of its scope row. The operations in
:mod:`tiermem._ops.layers` and :mod:`tiermem._ops.compact` take it as their first
argument; :func:`write` and :func:`read` yield their database work as transactions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .._core.clock import as_utc
from .._core.messages import load_text, serialize_metadata, validate_session_id
from .._storage import items as layer_store
from .._storage.items import NewItem
from ..errors import (
    EntryTooLarge,
    InvalidArgument,
    InvalidContent,
    InvalidSessionId,
    StorageError,
)
from ..events import Event
from ..layer_models import KnowledgeEntry, LayerItem, LayerType, Rule
from . import feed
from .working import WorkingMemory

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from .._core.context import MemoryContext
    from .._core.runner import Op
    from .._storage.rows import ItemRecord

__all__ = [
    "DEFAULT_MAX_WORKING_ENTRIES",
    "LayerScope",
    "check_count",
    "check_key",
    "check_metadata",
    "check_text",
    "parse_layer",
    "prepare",
    "read",
    "to_item",
    "to_knowledge",
    "to_rule",
    "totals",
    "validate_scope",
    "write",
]

T = TypeVar("T")

#: Working memory keeps this many of the newest items unless told otherwise.
DEFAULT_MAX_WORKING_ENTRIES = 50
_MAX_KEY_CHARS = 512


# --------------------------------------------------------------------------- checks


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


# --------------------------------------------------------------------------- conversion


def to_item(scope: str, row: ItemRecord) -> LayerItem:
    """The public item of a ``tiermem_layer_item`` row."""
    return LayerItem(
        id=row.id,
        scope=scope,
        type=LayerType(row.layer),
        content=load_text(row.content),
        key=None if row.item_key is None else load_text(row.item_key),
        metadata=json.loads(row.meta),
        token_count=row.token_count,
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
        last_accessed=as_utc(row.last_accessed),
        access_count=row.access_count,
        memory_tier=row.memory_tier,
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


# --------------------------------------------------------------------------- state


@dataclass(eq=False, slots=True)
class LayerScope:
    """The state of one scope of one memory, passed to every layer operation.

    Attributes:
        context: the memory's database, clock, token counter, summarizer and
            configuration.
        name: the scope's name inside the memory's project.
        working: the scope's working memory (in this process).
        pk: the key of the scope's row, once a committed transaction has read or
            made it (only ``forget`` deletes scope rows, and then resets it).
    """

    context: MemoryContext
    name: str
    working: WorkingMemory
    pk: int | None = None


#: Describes a layer change for the change feed: its event, or ``None`` when nothing
#: changed.
Change = Callable[[T], Event | None]


def _record(scope: LayerScope, conn: Connection, result: T, change: Change[T] | None) -> None:
    """Write the change-feed event of a layer change in its transaction (layer changes
    have events but no signals)."""
    event = None if change is None else change(result)
    if event is not None:
        feed.record(scope.context, conn, [event])


def write(
    scope: LayerScope, work: Callable[[Connection, int], T], change: Change[T] | None = None
) -> Op[T]:
    """Run ``work(conn, scope_pk)`` in one write transaction, making the scope row
    (and recording the event ``change`` describes)."""
    context = scope.context
    now, project, name = context.now(), context.project, scope.name

    def run(conn: Connection) -> tuple[T, int]:
        pk = scope.pk or layer_store.ensure_scope_pk(conn, project, name, now)
        result = work(conn, pk)
        _record(scope, conn, result, change)
        return result, pk

    try:
        result, pk = yield from context.transact(run)
    except StorageError as error:
        # A cached key of a scope row that ``forget`` deleted (in another process)
        # breaks the items' foreign key: look the scope up again, once.
        if scope.pk is None or type(error) is not StorageError:
            raise
        scope.pk = None
        result, pk = yield from context.transact(run)
    scope.pk = pk  # cached only once committed
    return result


def read(
    scope: LayerScope,
    work: Callable[[Connection, int], T],
    empty: T,
    *,
    write: bool = False,
    change: Change[T] | None = None,
) -> Op[T]:
    """Run ``work(conn, scope_pk)`` in one transaction; ``empty`` without a scope row
    (nothing was ever stored in the scope, so there is nothing to read or change).
    ``change`` describes a write's event."""
    project, name = scope.context.project, scope.name

    def run(conn: Connection) -> tuple[T, int | None]:
        pk = scope.pk or layer_store.get_scope_pk(conn, project, name)
        if pk is None:
            return empty, pk
        result = work(conn, pk)
        _record(scope, conn, result, change)
        return result, pk

    result, pk = yield from scope.context.transact(run, write=write)
    if pk is not None:
        scope.pk = pk
    return result


def totals(scope: LayerScope) -> Op[dict[str, tuple[int, int]]]:
    """Per stored layer: (items, bytes)."""
    empty: dict[str, tuple[int, int]] = {}
    return (yield from read(scope, layer_store.layer_totals, empty))


def prepare(
    scope: LayerScope, layer: LayerType, key: str | None, content: str, metadata: Mapping[str, Any]
) -> NewItem:
    """Check, serialize and count an item before any transaction opens."""
    context = scope.context
    text = check_text("content", content, context.config.max_entry_chars)
    meta = serialize_metadata(metadata)
    size = len(text.encode()) + len(meta.encode()) + len((key or "").encode())
    return NewItem(
        layer=layer.value,
        key=key,
        content=text,
        meta=meta,
        token_count=context.counter.count_text(text),
        byte_size=size,
    )
