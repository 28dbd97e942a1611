"""The values of the document store (:mod:`tiermem.documents`): the operations a
batch runs, what they return, a document's access state and time-to-live settings.

Each operation checks its own arguments when it is made, so a bad one is
:class:`~tiermem.errors.InvalidArgument` before any batch runs and nothing is
written. A namespace is a tuple of labels (stored joined with ``.``), a key and
every label is text both backends store.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from ._storage.document_values import check_text, check_value
from .errors import InvalidArgument
from .tiers import MemoryTier

__all__ = [
    "DEFAULT_VECTOR_CANDIDATES",
    "MAX_COUNT",
    "MAX_TTL_MINUTES",
    "Document",
    "DocumentOp",
    "DocumentResult",
    "DocumentState",
    "GetDocument",
    "ListNamespaces",
    "NamespaceMatch",
    "PutDocument",
    "SearchDocuments",
    "TimeToLive",
]

#: With embeddings, a query scores at most this many of the most recently updated
#: documents that pass the namespace and filter, plus every word match among the same
#: number of best word matches.
DEFAULT_VECTOR_CANDIDATES = 1_000

#: The largest limit or offset: what a 64-bit SQL integer holds.
MAX_COUNT = 2**63 - 1

#: The longest time to live, in minutes (a thousand years): every expiry is then a
#: date both backends and Python hold.
MAX_TTL_MINUTES = 1000 * 366 * 24 * 60

#: The longest sweep interval, in minutes: the longest wait a thread can make.
MAX_SWEEP_MINUTES = threading.TIMEOUT_MAX / 60


def check_minutes(name: str, value: object, maximum: float) -> float | None:
    """``value`` as a number of minutes > 0 and <= ``maximum``, or ``None``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= maximum:
        raise InvalidArgument(
            f"{name} must be a number of minutes > 0 and <= {maximum:g}, or None; got {value!r}"
        )
    return float(value)


def _check_count(name: str, value: object, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise InvalidArgument(f"{name} must be an int from 0 to 2**63 - 1, got {value!r}")


def _check_labels(labels: tuple[Any, ...]) -> None:
    for label in labels:
        if isinstance(label, str):  # other types are the caller's namespace errors
            check_text(label, "a namespace label or key")


@dataclass(frozen=True, slots=True)
class TimeToLive:
    """Time-to-live settings of a store, checked.

    Attributes:
        default_minutes: the time to live of a put that names none (``None``: none).
        refresh_on_read: whether a read starts an item's time to live again.
        sweep_interval_minutes: how often a sweeper deletes expired items
            (``None``: no sweeper).
    """

    default_minutes: float | None = None
    refresh_on_read: bool = True
    sweep_interval_minutes: float | None = None

    def __post_init__(self) -> None:
        check_minutes("ttl", self.default_minutes, MAX_TTL_MINUTES)
        check_minutes("sweep_interval_minutes", self.sweep_interval_minutes, MAX_SWEEP_MINUTES)
        if not isinstance(self.refresh_on_read, bool):
            raise InvalidArgument("refresh_on_read must be a bool")


@dataclass(frozen=True, slots=True)
class Document:
    """A stored document as a read returns it.

    Attributes:
        namespace: its namespace's labels.
        key: its key in the namespace.
        value: the JSON object stored.
        created_at: when it was first put.
        updated_at: when it was last put.
        score: a search's relevance (``None`` for a get, or when not scored).
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None


@dataclass(frozen=True, slots=True)
class DocumentState:
    """tiermem's access state of a stored document.

    Attributes:
        tier: ACTIVE, RECENT or ARCHIVED by the last access (the memory's tier
            policy), EXPIRED once its time to live has passed.
        access_count: the writes and reads that returned it.
        last_accessed: the last of them.
        expires_at: when its time to live ends (``None``: never).
        ttl_minutes: its time to live in minutes (``None``: none).
    """

    tier: MemoryTier
    access_count: int
    last_accessed: datetime
    expires_at: datetime | None
    ttl_minutes: float | None


@dataclass(frozen=True, slots=True)
class GetDocument:
    """Read the live document at ``namespace``/``key`` (an access; ``refresh_ttl``
    starts its time to live again). Returns a :class:`Document` or ``None``."""

    namespace: tuple[str, ...]
    key: str
    refresh_ttl: bool = True

    def __post_init__(self) -> None:
        _check_labels((*self.namespace, self.key))


@dataclass(frozen=True, slots=True)
class PutDocument:
    """Store ``value`` at ``namespace``/``key`` (``None``: delete it).

    Attributes:
        namespace: its namespace's labels (not empty when storing).
        key: its key.
        value: a JSON object, or ``None`` to delete.
        fields: the field paths whose text full-text search (and embedding) sees,
            read by the store's path reader (``"$"``: every string and number);
            ``None``: not indexed.
        ttl: its time to live in minutes (``None``: none).

    Returns ``None``.
    """

    namespace: tuple[str, ...]
    key: str
    value: Mapping[str, Any] | None
    fields: tuple[str, ...] | None = ("$",)
    ttl: float | None = None

    def __post_init__(self) -> None:
        _check_labels((*self.namespace, self.key))
        if self.value is not None:
            self._check_value()
        check_minutes("ttl", self.ttl, MAX_TTL_MINUTES)

    def _check_value(self) -> None:
        if not isinstance(self.value, Mapping):
            raise InvalidArgument(
                f"a stored value must be a mapping, got {type(self.value).__name__}"
            )
        check_value(self.value, "a stored value")
        try:
            json.dumps(self.value, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise InvalidArgument(f"a stored value must be JSON: {error}") from error


@dataclass(frozen=True, slots=True)
class SearchDocuments:
    """Find live documents under ``namespace_prefix``: those matching ``filter``
    (field paths to values or ``$eq $ne $gt $gte $lt $lte`` operators, run in SQL),
    ranked by ``query`` (full-text, and by cosine similarity with embeddings), newest
    first without one. Each hit is an access. Returns a list of :class:`Document`."""

    namespace_prefix: tuple[str, ...]
    query: str | None = None
    filter: Mapping[str, Any] | None = None
    limit: int = 10
    offset: int = 0
    refresh_ttl: bool = True

    def __post_init__(self) -> None:
        _check_labels(self.namespace_prefix)
        _check_count("limit", self.limit)
        _check_count("offset", self.offset)


@dataclass(frozen=True, slots=True)
class NamespaceMatch:
    """Namespaces whose first (``"prefix"``) or last (``"suffix"``) labels are
    ``path`` (``"*"`` matches any label)."""

    match_type: Literal["prefix", "suffix"]
    path: tuple[str, ...]

    def __post_init__(self) -> None:
        _check_labels(self.path)
        if self.match_type not in ("prefix", "suffix"):
            raise InvalidArgument(f"unsupported namespace match type {self.match_type!r}")

    def matches(self, namespace: tuple[str, ...]) -> bool:
        """Whether ``namespace`` matches."""
        if len(namespace) < len(self.path):
            return False
        if self.match_type == "prefix":
            pairs = zip(namespace, self.path, strict=False)
        else:
            pairs = zip(reversed(namespace), reversed(self.path), strict=False)
        return all(label == wanted or wanted == "*" for label, wanted in pairs)


@dataclass(frozen=True, slots=True)
class ListNamespaces:
    """The namespaces holding live documents that pass every match, cut to
    ``max_depth`` labels, sorted; returns a list of label tuples."""

    match: tuple[NamespaceMatch, ...] = ()
    max_depth: int | None = None
    limit: int = 100
    offset: int = 0

    def __post_init__(self) -> None:
        _check_count("limit", self.limit)
        _check_count("offset", self.offset)
        _check_count("max_depth", self.max_depth, allow_none=True)


#: An operation of a batch.
DocumentOp = GetDocument | PutDocument | SearchDocuments | ListNamespaces

#: What an operation returns, in the batch's order.
DocumentResult = Document | list[Document] | list[tuple[str, ...]] | None
