"""Background compression: one worker thread per memory, started on first use.

An append that triggers compression in background mode queues its session and
returns; the worker runs the compression after it. A session is queued at most
once at a time.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["BackgroundQueue"]

logger = logging.getLogger(__name__)


class BackgroundQueue:
    """Runs one job per queued key on a single worker thread, in order."""

    def __init__(self, name: str = "compress") -> None:
        self._name = name
        self.after_fork()
        _QUEUES.add(self)

    def after_fork(self) -> None:
        """Start empty, with no worker and a new lock (the state of a new queue, and
        of every queue in a forked child)."""
        self._worker: ThreadPoolExecutor | None = None
        self._queued: set[str] = set()
        self._lock = threading.Lock()

    def submit(self, key: str, job: Callable[[], None]) -> None:
        """Run ``job`` on the worker unless ``key`` is queued already."""
        with self._lock:
            if key in self._queued:
                return
            self._queued.add(key)
            if self._worker is None:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix=f"tiermem-{self._name}")
            self._worker.submit(self._run, key, job)

    def _run(self, key: str, job: Callable[[], None]) -> None:
        with self._lock:
            self._queued.discard(key)
        try:
            job()
        except Exception:
            logger.exception("background %s of %r failed", self._name, key)

    def drain(self) -> None:
        """Wait for every queued job, then stop the worker (a later submit starts one)."""
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=True)


#: Every queue, so that a forked child can reset them.
_QUEUES: weakref.WeakSet[BackgroundQueue] = weakref.WeakSet()


def _reset_after_fork() -> None:
    """Reset every queue in a forked child.

    The parent's worker thread does not exist in the child, yet its executor
    counts it as idle and would never start another; keys queued in the parent
    would stay marked as queued; the lock may have been held by a thread of the
    parent. Done at the fork, before any thread of the child runs, rather than
    by a pid check on each submit, which two threads of the child could race.
    """
    for background in list(_QUEUES):
        background.after_fork()


os.register_at_fork(after_in_child=_reset_after_fork)
