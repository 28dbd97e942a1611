"""The message lists a process last wrote or read, per (thread, namespace, channel):
the base a checkpoint's next list is stored as a delta on (:mod:`tiermem._ops.threads`).
Only a shortcut: a list that is not known is stored whole."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter, is_

from langchain_core.messages import BaseMessage

__all__ = ["Known", "KnownLists"]

_CONTENT = attrgetter("content")


@dataclass(frozen=True, slots=True)
class Known:
    """A channel's message list as this process last wrote or read it: the message
    objects (the caller's, not copies: a graph passes the same objects on from step
    to step, so comparing is mostly an identity check) with the content each had
    then (a message whose content was reassigned since is no longer known)."""

    version: str
    messages: tuple[BaseMessage, ...]
    contents: tuple[object, ...]
    refs: tuple[int | str, ...]
    depth: int

    @classmethod
    def of(
        cls,
        version: str,
        messages: Sequence[BaseMessage],
        refs: Sequence[int | str],
        depth: int,
    ) -> Known:
        """The list ``messages`` as it is now."""
        contents = tuple(map(_CONTENT, messages))
        return cls(version, tuple(messages), contents, tuple(refs), depth)

    def same(self, position: int, message: BaseMessage) -> bool:
        """Whether ``message`` is the known message at ``position``, unchanged."""
        known = self.messages[position]
        if known.content is not self.contents[position]:
            return False  # edited in place since
        return message is known or message == known

    def starts(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether ``messages`` starts with this list: the same messages, unchanged."""
        count = len(self.messages)
        if len(messages) < count:
            return False
        head = messages[:count]
        # Mostly the very objects, their content never reassigned: checked in C.
        if all(map(is_, head, self.messages)) and all(
            map(is_, map(_CONTENT, self.messages), self.contents)
        ):
            return True
        return all(self.same(n, message) for n, message in enumerate(head))


class KnownLists:
    """The last message list of each recently used (thread, namespace, channel):
    the base a new version is stored as a delta on. Only a shortcut: a miss stores
    the list whole."""

    def __init__(self, size: int = 256) -> None:
        self._lists: OrderedDict[tuple[str, str, str], Known] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> Known | None:
        """The list known for ``key``, if any."""
        with self._lock:
            found = self._lists.get(key)
            if found is not None:
                self._lists.move_to_end(key)
            return found

    def set(self, key: tuple[str, str, str], known: Known) -> None:
        """Remember ``known`` for ``key``."""
        with self._lock:
            self._lists[key] = known
            self._lists.move_to_end(key)
            while len(self._lists) > self._size:
                self._lists.popitem(last=False)

    def forget_all(self) -> None:
        """Forget every list."""
        with self._lock:
            self._lists.clear()

    def forget(self, thread_ids: Sequence[str]) -> None:
        """Forget every list of these threads (their rows changed)."""
        doomed = set(thread_ids)
        with self._lock:
            for key in [key for key in self._lists if key[0] in doomed]:
                del self._lists[key]
