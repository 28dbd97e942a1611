"""Shared fixtures: a SQLite file and a fresh PostgreSQL schema per test.

PostgreSQL comes from ``TIERMEM_TEST_PG_URL`` (default: the local server with
trust auth). An unreachable server fails the PostgreSQL tests; they never skip.
The suite runs offline: a Python socket that connects anywhere but loopback
raises :class:`NetworkBlocked` at once.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem.testing import FakeSummarizer, ManualClock, check_invariants

PG_URL = os.environ.get(
    "TIERMEM_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)

settings.register_profile(
    "default", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("soak", max_examples=1000, deadline=None)
# CI gates a change on the examples it explores: the same ones on every run, so a
# change is judged by what it changed. Exploration is for the default and soak
# profiles, run by hand (HYPOTHESIS_PROFILE=soak).
settings.register_profile(
    "ci",
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") == "true" else "default")
)


class NetworkBlocked(RuntimeError):
    """A test tried to reach a non-loopback address (the suite must run offline)."""


#: Host names that always mean this machine.
_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def is_loopback(family: int, address: Any) -> bool:
    """Whether connecting a socket of ``family`` to ``address`` stays on this machine:
    a Unix socket, ``localhost``, 127.0.0.0/8 or ::1 (IPv4-mapped too). Host names are
    not resolved, so any other name counts as the network."""
    if family not in (socket.AF_INET, socket.AF_INET6):
        return True  # AF_UNIX paths, netlink, ...: not the network
    host = address[0] if isinstance(address, tuple) and address else address
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host.lower().rstrip(".") in _LOCAL_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])  # drop an IPv6 zone
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


@pytest.fixture(name="no_network", scope="session", autouse=True)
def fixture_no_network() -> Iterator[None]:
    """Make every Python socket refuse non-loopback addresses for the whole run, so an
    accidental network call fails at once instead of hanging or passing by luck.
    libpq (psycopg) connects in C and is not affected; the PostgreSQL server is local."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def check(sock: socket.socket, address: Any) -> None:
        if not is_loopback(sock.family, address):
            raise NetworkBlocked(f"tests must not use the network: connect to {address!r}")

    def connect(self: socket.socket, address: Any) -> None:
        check(self, address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(self, address)
        return real_connect_ex(self, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        yield


def sqlite_engine(path: Path) -> Engine:
    """An engine on a SQLite file (tiermem adds WAL, busy_timeout, BEGIN IMMEDIATE)."""
    return sa.create_engine(f"sqlite:///{path}", connect_args={"check_same_thread": False})


def pg_admin() -> Engine:
    """An engine for creating and dropping test schemas."""
    return sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT", pool_pre_ping=True)


def pg_engine_for(schema: str) -> Engine:
    """An engine whose connections use ``schema`` and a recognizable application name."""
    return sa.create_engine(
        PG_URL,
        pool_pre_ping=True,
        connect_args={
            "options": f"-csearch_path={schema}",
            "application_name": f"tiermem-test-{os.getpid()}",
        },
    )


def _create_schema() -> str:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    admin = pg_admin()
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    except sa.exc.OperationalError as exc:
        pytest.fail(f"PostgreSQL at {PG_URL} is unreachable: {exc}", pytrace=False)
    finally:
        admin.dispose()
    return schema


def _drop_schema(schema: str) -> None:
    admin = pg_admin()
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    admin.dispose()


@pytest.fixture(name="pg_schema")
def fixture_pg_schema() -> Iterator[str]:
    """A fresh PostgreSQL schema, dropped after the test."""
    schema = _create_schema()
    yield schema
    _drop_schema(schema)


def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A URL (as an operator passes ``--url``) on a fresh SQLite file or, for
    ``postgres``, the test's fresh schema."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'cli.db'}"
    return f"{PG_URL}?options=-csearch_path%3D{request.getfixturevalue('pg_schema')}"


@pytest.fixture(name="backend", params=["sqlite", "postgres"])
def fixture_backend(request: pytest.FixtureRequest) -> str:
    """The storage backend under test."""
    return str(request.param)


@pytest.fixture(name="engine")
def fixture_engine(backend: str, tmp_path: Path) -> Iterator[Engine]:
    """An engine on a fresh SQLite file or a fresh PostgreSQL schema."""
    if backend == "sqlite":
        engine = sqlite_engine(tmp_path / "tiermem.db")
        yield engine
        engine.dispose()
        return
    schema = _create_schema()
    engine = pg_engine_for(schema)
    yield engine
    engine.dispose()
    _drop_schema(schema)


@pytest.fixture(name="clock")
def fixture_clock() -> ManualClock:
    """A manual clock starting 2026-01-01 12:00 UTC."""
    return ManualClock()


MemoryFactory = Callable[..., ConversationMemory]


@pytest.fixture(name="make_memory")
def fixture_make_memory(engine: Engine, clock: ManualClock) -> Iterator[MemoryFactory]:
    """Build memories on the test engine; each is closed and checked after the test."""
    made: list[ConversationMemory] = []

    def make(**kwargs: Any) -> ConversationMemory:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("config", MemoryConfig())
        memory = ConversationMemory(engine=engine, **kwargs)
        made.append(memory)
        return memory

    yield make
    for memory in made:
        memory.close()
    if made:
        check_invariants(engine)


@pytest.fixture(name="memory")
def fixture_memory(make_memory: MemoryFactory) -> ConversationMemory:
    """A memory with a small budget and the deterministic fake summarizer."""
    return make_memory(
        config=MemoryConfig(
            max_tokens=400, max_entries=40, recent_window=4, min_entries_to_compress=2
        ),
        summarizer=FakeSummarizer(),
    )
