"""The ``TieredStore`` LangGraph's store tests build in place of their own stores,
and the databases they live in.

Each test module gets a fresh SQLite file and a fresh PostgreSQL schema; every store
a peer test builds is a new tiermem project there, so stores never see each other's
items (TieredStore keeps to its project), and the schema is created once per module
rather than for each of the hundreds of small peer tests.

Peer tests that wait for a time to live to pass sleep for seconds; with
:func:`skip_sleeps` their sleeps return at once and move the stores' clock (the wall
clock plus every skipped sleep) instead, so they run in milliseconds and their
timings hold exactly on a loaded machine.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any, ClassVar, cast

import pytest
import sqlalchemy as sa
from langgraph.store.base import IndexConfig, TTLConfig
from sqlalchemy.engine import Engine
from tiermem_langgraph import TieredStore

from tiermem import ConversationMemory
from tiermem._storage.document_schema import document_table
from tiermem.testing import check_invariants

from ..conftest import MemoryFactory, _create_schema, _drop_schema, pg_engine_for, sqlite_engine

#: Keys of the SQLite and PostgreSQL stores' index configurations that only choose
#: how those stores compute a score (TieredStore scores by cosine similarity).
_SCORING_KEYS = frozenset({"distance_type", "ann_index_config"})


def index_config(index: Mapping[str, Any] | None) -> IndexConfig | None:
    """LangGraph's ``IndexConfig`` for an index configuration of any LangGraph store:
    the SQLite and PostgreSQL stores name the embedded fields ``text_fields``."""
    if index is None:
        return None
    config = {key: value for key, value in index.items() if key not in _SCORING_KEYS}
    if "text_fields" in config:
        config["fields"] = config.pop("text_fields")
    return cast(IndexConfig, config)


class ConformanceStore(TieredStore):
    """``TieredStore`` built the way the peer tests build their stores.

    Each instance is a store on a new tiermem project of the test's database, on the
    database's clock (as a deployed store); ``index=`` and ``ttl=`` are the
    configurations LangGraph's stores take.
    """

    make_memory: ClassVar[MemoryFactory | None] = None
    #: The stores' clock; ``None``: the database's (set by :func:`skip_sleeps`).
    clock: ClassVar[Callable[[], datetime] | None] = None
    _projects: ClassVar[Iterator[int]] = itertools.count()

    def __init__(
        self,
        *,
        index: Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        **_: Any,
    ) -> None:
        # Read from the class: a function stored on it would bind to the instance.
        make_memory = ConformanceStore.make_memory
        assert make_memory is not None
        memory = make_memory(project=f"peer-{next(self._projects)}", clock=ConformanceStore.clock)
        super().__init__(memory, index=index_config(index), ttl=ttl)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, _conn_string: str, *, index: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Iterator[ConformanceStore]:
        """A new store on the test's database, whatever connection string the peer
        names (its stores' own constructor); its sweeper stops on exit."""
        store = cls(index=index, **kwargs)
        try:
            yield store
        finally:
            store.stop_ttl_sweeper()


class AsyncConformanceStore:
    """A ``ConformanceStore`` as the peers' async stores (``AsyncSqliteStore``,
    ``AsyncPostgresStore``) are used: built with ``async with from_conn_string(...)``,
    with ``setup``, ``sweep_ttl``, ``start_ttl_sweeper`` and ``stop_ttl_sweeper`` as
    coroutines. ``TieredStore`` is one class for sync and async code: those are plain
    methods there (``asetup`` and ``asweep_ttl`` are the awaitable setup and sweep).
    Everything else is the store's own.
    """

    def __init__(self, *, index: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.store = ConformanceStore(index=index, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def setup(self) -> None:
        """The store's ``asetup``."""
        await self.store.asetup()

    async def sweep_ttl(self) -> int:
        """The store's ``asweep_ttl``."""
        return await self.store.asweep_ttl()

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Any:
        """The store's ``start_ttl_sweeper``."""
        return self.store.start_ttl_sweeper(sweep_interval_minutes)

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """The store's ``stop_ttl_sweeper``, off the event loop (it joins a thread)."""
        return await asyncio.to_thread(self.store.stop_ttl_sweeper, timeout)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, _conn_string: str, *, index: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> AsyncIterator[AsyncConformanceStore]:
        """A new store on the test's database, whatever connection string the peer
        names; its sweeper stops on exit."""
        store = cls(index=index, **kwargs)
        try:
            yield store
        finally:
            await store.stop_ttl_sweeper()


class SkippedTimeClock:
    """The wall clock (UTC) plus every sleep skipped so far."""

    def __init__(self) -> None:
        self._skipped = timedelta()
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return datetime.now(UTC) + self._skipped

    def skip(self, seconds: float) -> None:
        """Move the clock ``seconds`` ahead."""
        with self._lock:
            self._skipped += timedelta(seconds=seconds)


class _SkippingModule(ModuleType):
    """``module`` with ``sleep`` replaced by ``sleep``; everything else is the module's."""

    def __init__(self, module: ModuleType, sleep: Callable[..., Any]) -> None:
        super().__init__(module.__name__)
        self._module = module
        self.sleep = sleep

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


def skip_sleeps(peer: ModuleType, monkeypatch: pytest.MonkeyPatch) -> SkippedTimeClock:
    """Stores built from now on use a :class:`SkippedTimeClock`, and ``peer``'s
    ``time.sleep`` and ``asyncio.sleep`` move that clock instead of sleeping (the
    async one still yields to the event loop once)."""
    clock = SkippedTimeClock()
    monkeypatch.setattr(ConformanceStore, "clock", clock)

    def sleep(seconds: float) -> None:
        clock.skip(seconds)

    async def asleep(seconds: float, result: Any = None) -> Any:
        clock.skip(seconds)
        return await asyncio.sleep(0, result)

    for name, module, fake in (("time", time, sleep), ("asyncio", asyncio, asleep)):
        if getattr(peer, name, None) is module:
            monkeypatch.setattr(peer, name, _SkippingModule(module, fake))
    return clock


def _row(store: Any, namespace: tuple[str, ...], key: str) -> sa.ColumnElement[bool]:
    columns = document_table.c
    return sa.and_(
        columns.project == store.memory.project,
        columns.namespace == ".".join(namespace),
        columns.key == key,
    )


def expire_now(store: Any, namespace: tuple[str, ...], key: str) -> None:
    """Move an item's expiry a minute into the past without deleting it (the peers'
    helper does this with SQL on their own table)."""
    past = store.memory.now() - timedelta(minutes=1)
    with store.memory.engine.begin() as conn:
        conn.execute(
            sa.update(document_table).where(_row(store, namespace, key)).values(expires_at=past)
        )


def row_exists(store: Any, namespace: tuple[str, ...], key: str) -> bool:
    """Whether the item's row is in the table, expired or not."""
    with store.memory.engine.connect() as conn:
        query = sa.select(sa.func.count()).where(_row(store, namespace, key))
        count: int = conn.execute(query).scalar_one()
        return count == 1


def stored_expires_at(store: Any, namespace: tuple[str, ...], key: str) -> datetime | None:
    """The item's stored expiry."""
    with store.memory.engine.connect() as conn:
        query = sa.select(document_table.c.expires_at).where(_row(store, namespace, key))
        value: datetime | None = conn.execute(query).scalar_one()
        return value


@pytest.fixture(name="store_engine", scope="module", params=["sqlite", "postgres"])
def fixture_store_engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """An engine on a fresh SQLite file or a fresh PostgreSQL schema, for one module;
    tiermem's invariants are checked over everything the module's tests left there."""
    if request.param == "sqlite":
        engine = sqlite_engine(tmp_path_factory.mktemp("langgraph") / "tiermem.db")
        yield engine
        check_invariants(engine)
        engine.dispose()
        return
    schema = _create_schema()
    engine = pg_engine_for(schema)
    try:
        yield engine
        check_invariants(engine)
    finally:
        engine.dispose()
        _drop_schema(schema)


@pytest.fixture(name="substitute_stores")
def fixture_substitute_stores(
    store_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """``ConformanceStore`` builds its memories on ``store_engine`` during the test;
    they are closed after it."""
    made: list[ConversationMemory] = []

    def make(**kwargs: Any) -> ConversationMemory:
        memory = ConversationMemory(engine=store_engine, **kwargs)
        made.append(memory)
        return memory

    monkeypatch.setattr(ConformanceStore, "make_memory", make)
    yield
    for memory in made:
        memory.close()
