"""Working memory: one scope's scratch pad, in this process only.

Items live in a bounded deque (the newest ``max_entries``) under a lock, so
threads (and event loops running in several threads) can share a scope. Search
scores with BM25 and ranks with the same functions as the SQL layers
(:mod:`tiermem._storage.search`), the working items being the collection; its
words are not stemmed (a working scope is small and short-lived).
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from .._storage import fts
from .._storage.ranking import Candidate, bm25, epoch, rank
from ..errors import CompressionConflict, InvalidArgument
from ..layer_models import LayerItem, LayerType
from ..tiers import MemoryTier, TierPolicy

__all__ = ["WorkingMemory"]


class WorkingMemory:
    """The working layer of one scope.

    Args:
        scope: the scope's name (stamped on every item).
        max_entries: how many of the newest items are kept.
    """

    def __init__(self, scope: str, max_entries: int) -> None:
        self.scope = scope
        self._lock = threading.Lock()
        _WORKING.add(self)
        self._ids = itertools.count(1)
        self._items: deque[LayerItem] = deque()
        self.max_entries = max_entries

    def after_fork(self) -> None:
        """Take a new lock in a forked child (a thread of the parent may have held
        the old one at the fork); the items stay."""
        self._lock = threading.Lock()

    @property
    def max_entries(self) -> int:
        """How many items are kept (the oldest are dropped first)."""
        return self._max

    @max_entries.setter
    def max_entries(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgument(f"max_working_entries must be an int >= 1, got {value!r}")
        with self._lock:
            self._max = value
            while len(self._items) > value:
                self._items.popleft()

    def snapshot(self) -> list[LayerItem]:
        """Every item, oldest first."""
        with self._lock:
            return list(self._items)

    def add(
        self, content: str, metadata: Mapping[str, Any], token_count: int, now: datetime
    ) -> LayerItem:
        """Store an item, dropping the oldest past ``max_entries``."""
        with self._lock:
            item = LayerItem(
                id=next(self._ids),
                scope=self.scope,
                type=LayerType.WORKING,
                content=content,
                key=None,
                metadata=dict(metadata),
                token_count=token_count,
                created_at=now,
                updated_at=now,
                last_accessed=now,
                access_count=0,
                memory_tier=MemoryTier.ACTIVE.value,
            )
            self._items.append(item)
            while len(self._items) > self._max:
                self._items.popleft()
            return item

    def recent(self, n: int) -> list[LayerItem]:
        """The ``n`` newest items, oldest first."""
        with self._lock:
            return list(self._items)[-n:] if n else []

    def search(
        self, words: Sequence[str], limit: int, now: datetime, policy: TierPolicy
    ) -> list[tuple[LayerItem, float]]:
        """The best ``limit`` items matching any of ``words``, best first; each hit's
        access is recorded."""
        with self._lock:
            wanted, matched, frequencies, lengths = set(words), [], [], []
            every = 0
            for item in self._items:
                present = fts.words(item.content[: fts.MAX_INDEXED_CHARS])
                every += len(present)
                counts: dict[str, int] = {}
                for word in present:
                    if word in wanted:
                        counts[word] = counts.get(word, 0) + 1
                if counts:
                    matched.append(item)
                    frequencies.append(counts)
                    lengths.append(float(len(present)))
            average = every / max(len(self._items), 1)
            scores = bm25(frequencies, lengths, len(self._items), average)
            candidates = [
                Candidate(item.id, epoch(item.created_at), epoch(item.last_accessed), score)
                for item, score in zip(matched, scores, strict=True)
            ]
            ranked = rank(candidates, now, policy, limit)
            by_id = {item.id: item for item in self._items}
            hits = [(by_id[candidate.id], score) for candidate, score in ranked]
            touched = {
                item.id: replace(
                    item,
                    last_accessed=now,
                    access_count=item.access_count + 1,
                    memory_tier=MemoryTier.ACTIVE.value,
                )
                for item, _ in hits
            }
            self._items = deque(touched.get(item.id, item) for item in self._items)
            return [(touched[item.id], score) for item, score in hits]

    def clear(self) -> int:
        """Drop every item; returns how many there were."""
        with self._lock:
            count = len(self._items)
            self._items.clear()
            return count

    def drop(self, ids: Iterable[int]) -> int:
        """Drop the items with these ids; returns how many were found."""
        wanted = set(ids)
        with self._lock:
            before = len(self._items)
            self._items = deque(item for item in self._items if item.id not in wanted)
            return before - len(self._items)

    def replace_oldest(
        self, older: Sequence[LayerItem], build: Callable[[int], LayerItem]
    ) -> LayerItem:
        """Swap the items ``older`` (still the oldest, unchanged in number) for one item
        made by ``build(new_id)``.

        Raises:
            CompressionConflict: the oldest items are no longer ``older``.
        """
        with self._lock:
            current = [item.id for item in itertools.islice(self._items, len(older))]
            if current != [item.id for item in older]:
                raise CompressionConflict(
                    "working memory changed while the summarizer ran; nothing was written"
                )
            summary = build(next(self._ids))
            for _ in older:
                self._items.popleft()
            self._items.appendleft(summary)
            return summary


#: Every working memory, so that a forked child can give each a new lock.
_WORKING: weakref.WeakSet[WorkingMemory] = weakref.WeakSet()


def _reset_after_fork() -> None:
    """In a forked child, each working memory keeps its items (they belong to the
    process, which the child copied) but gets a new lock: a thread of the parent may
    have held the old one at the fork."""
    for working in list(_WORKING):
        working.after_fork()


os.register_at_fork(after_in_child=_reset_after_fork)
