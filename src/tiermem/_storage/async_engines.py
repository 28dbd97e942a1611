"""The async engines a PostgreSQL :class:`~tiermem._storage.database.Database` awaits
its transactions on: one per event loop.

An ``AsyncEngine``'s pool belongs to the event loop that used it: the pool waits for a
free connection on an asyncio queue, and each connection's lock is an asyncio lock,
both bound to the first loop they wait on. A memory used from several loops (one
``asyncio.run`` after another, or at once from threads that each run one) therefore
gets an engine per loop, made on the loop's first transaction. The engines of loops
that have closed are disposed (their connections closed) on the next async
transaction, and all of them by :meth:`AsyncEngines.dispose`.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

__all__ = ["AsyncEngines"]


class AsyncEngines:
    """The async engines on ``url`` (a ``postgresql+psycopg`` URL), one per loop."""

    def __init__(self, url: sa.URL) -> None:
        self._url = url
        self._by_loop: dict[asyncio.AbstractEventLoop, AsyncEngine] = {}
        self._lock = threading.Lock()

    async def current(self) -> AsyncEngine:
        """The running loop's engine, made on first use."""
        loop = asyncio.get_running_loop()
        engine = self._by_loop.get(loop)
        if engine is not None:
            return engine
        with self._lock:
            closed = [other for other in self._by_loop if other.is_closed()]
            retired = [self._by_loop.pop(other) for other in closed]
            # psycopg's async mode for the URL's psycopg driver; the pre-ping finds
            # connections the server dropped, as the sync engine's does.
            # TIERMEM_POOL (JSON pool arguments): a benchmark switch, temporary.
            pool = json.loads(os.environ.get("TIERMEM_POOL") or "{}")
            engine = self._by_loop[loop] = create_async_engine(
                self._url, pool_pre_ping=True, **pool
            )
        # Closing a pooled psycopg connection sends nothing on its socket, so the
        # connections of a closed loop close on this one.
        await _dispose(retired)
        return engine

    def dispose(self) -> None:
        """Close every engine's pooled connections (callable from any thread, with or
        without a running loop: the closing runs on a loop of its own)."""
        with self._lock:
            engines = list(self._by_loop.values())
            self._by_loop.clear()
        if not engines:
            return
        failure: list[BaseException] = []

        def close_all() -> None:
            try:
                asyncio.run(_dispose(engines))
            except BaseException as error:  # re-raised in the caller's thread
                failure.append(error)

        closer = threading.Thread(target=close_all, name="tiermem-dispose")
        closer.start()
        closer.join()
        if failure:
            raise failure[0]

    def forget(self) -> None:
        """Drop every engine without closing its connections (they are a parent
        process's, after a fork)."""
        self._lock = threading.Lock()
        for engine in self._by_loop.values():
            engine.sync_engine.dispose(close=False)
        self._by_loop.clear()


async def _dispose(engines: Sequence[AsyncEngine]) -> None:
    for engine in engines:
        await engine.dispose()
