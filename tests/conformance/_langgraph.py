"""The ``TieredStore`` LangGraph's store tests build in place of their own stores,
and the databases they live in.

Each test module gets a fresh SQLite file and a fresh PostgreSQL schema; every store
a peer test builds is a new tiermem project there, so stores never see each other's
items (TieredStore keeps to its project), and the schema is created once per module
rather than for each of the hundreds of small peer tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, cast

import pytest
from langgraph.store.base import IndexConfig, TTLConfig
from sqlalchemy.engine import Engine
from tiermem_langgraph import TieredStore

from tiermem import ConversationMemory
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
        memory = make_memory(project=f"peer-{next(self._projects)}", clock=None)
        super().__init__(memory, index=index_config(index), ttl=ttl)

    def setup(self) -> None:
        """Nothing to do: the memory created tiermem's schema."""

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, _conn_string: str, *, index: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Iterator[ConformanceStore]:
        """A new store on the test's database, whatever connection string the peer
        names (its stores' own constructor)."""
        yield cls(index=index, **kwargs)


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
