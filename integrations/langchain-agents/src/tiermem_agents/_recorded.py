"""A bounded, thread-safe record of message ids already stored, per session."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["RecordedIds"]


class RecordedIds:
    """Which message ids this process has stored, for the most recent sessions.

    Only an optimization: the agent state is re-sent on every hook, and skipping the
    ids known here saves serializing and counting them again. Whatever is not known
    (another process, an evicted session) is still deduplicated by tiermem's
    ``skip_existing``.
    """

    def __init__(self, max_sessions: int = 1024) -> None:
        self._ids: OrderedDict[str, frozenset[str]] = OrderedDict()
        self._lock = threading.Lock()
        self._max_sessions = max_sessions

    def known(self, session_id: str) -> frozenset[str]:
        """The ids recorded for ``session_id`` (empty if unknown)."""
        with self._lock:
            ids = self._ids.get(session_id, frozenset())
            if session_id in self._ids:
                self._ids.move_to_end(session_id)
            return ids

    def remember(self, session_id: str, ids: Iterable[str]) -> None:
        """Replace the ids recorded for ``session_id``, evicting the oldest session."""
        with self._lock:
            self._ids[session_id] = frozenset(ids)
            self._ids.move_to_end(session_id)
            while len(self._ids) > self._max_sessions:
                self._ids.popitem(last=False)
