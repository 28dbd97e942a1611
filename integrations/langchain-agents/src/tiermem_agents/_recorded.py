"""A bounded, thread-safe record of the messages already stored, per session."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from langchain_core.messages import BaseMessage

__all__ = ["RecordedMessages"]


class RecordedMessages:
    """Which messages this process has stored, for the most recent sessions: each
    message id with the content it was stored with.

    Only an optimization: the agent state is re-sent on every hook, and skipping the
    messages known here saves serializing and counting them again; a known id whose
    content changed (an edit through ``update_state``) is a revision to store.
    Whatever is not known (another process, an evicted session) is still
    deduplicated by tiermem's ``skip_existing``. The contents are the state's own
    objects (no copies), and only those of the newest state are kept.
    """

    def __init__(self, max_sessions: int = 1024) -> None:
        self._messages: OrderedDict[str, dict[str, object]] = OrderedDict()
        self._lock = threading.Lock()
        self._max_sessions = max_sessions

    def known(self, session_id: str) -> Mapping[str, object]:
        """The content recorded for each message id of ``session_id`` (empty if
        unknown)."""
        with self._lock:
            found = self._messages.get(session_id, {})
            if session_id in self._messages:
                self._messages.move_to_end(session_id)
            return found

    def remember(self, session_id: str, messages: Iterable[BaseMessage]) -> None:
        """Replace what is recorded for ``session_id``, evicting the oldest session."""
        recorded: dict[str, object] = {m.id: m.content for m in messages if m.id is not None}
        with self._lock:
            self._messages[session_id] = recorded
            self._messages.move_to_end(session_id)
            while len(self._messages) > self._max_sessions:
                self._messages.popitem(last=False)
