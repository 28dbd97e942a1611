"""``forget``: erasing a person leaves no row of any tiermem table that names them or
holds their text, and on SQLite no byte of the file or its WAL; it is one
transaction (a failure half-way erases nothing), sends its signal and event only
once committed, and reports what it erased."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding
from sqlalchemy.engine import Engine
from tiermem_langgraph import TieredStore

from tiermem import ConversationMemory, MemoryConfig
from tiermem._core import messages as parse_cache
from tiermem._ops import recall as recall_ops
from tiermem._storage import failpoints as _failpoints
from tiermem._storage.cascade import SESSION_CHILDREN
from tiermem._storage.tables import TABLES
from tiermem.errors import InvalidArgument, StorageError
from tiermem.layers import LayeredMemory
from tiermem.testing import ManualClock, SignalRecorder
from tiermem.types import ForgetResult

from ..conftest import MemoryFactory, sqlite_engine
from ..reliability.dump import canonical_dump, tiermem_table_names

ADA = "user-ada-7f3"
NAMESPACE = ("users", "ada-7f3")
SECRET = "X93817264"
#: What must not remain anywhere (compared lower-cased: full-text indexes lower-case).
NEEDLES = (ADA.lower(), "ada-7f3", SECRET.lower())


def populate(memory: ConversationMemory) -> TieredStore:
    """Ada and Bob each with a compressed session, layer items in every stored
    layer and working memory, vectors, documents and events (with content)."""
    for person, secret in ((ADA, SECRET), ("user-bob", "B11122233")):
        for index in range(12):
            memory.add_user_message(person, f"{person} says: my passport is {secret}? no. {index}")
            memory.add_assistant_message(person, f"noted for {person} ({index})")
        memory.compress(person, force=True)
        layers = memory.layers(person)
        layers.append("episodic", f"{person} flew to Paris with passport {secret}")
        layers.learn("passport", f"{secret} of {person}")
        layers.add_rule(f"{person} asks for travel", f"quote passport {secret}")
        layers.append("working", f"{person} is booking with {secret}")
    embedder = memory.context.embedder
    assert embedder is not None
    embedder.queue.drain()  # the background embedding of the writes above
    memory.embed_missing()
    store = TieredStore(memory, index={"dims": 8, "embed": DeterministicFakeEmbedding(size=8)})
    store.put(NAMESPACE, "profile", {"name": ADA, "passport": SECRET})
    store.put((*NAMESPACE, "memories"), "trip", {"text": f"Paris with {SECRET}"})
    store.put(("users", "bob"), "profile", {"name": "user-bob", "passport": "B11122233"})
    return store


def memory_with_vectors(
    make_memory: MemoryFactory, *, event_content: bool = False
) -> ConversationMemory:
    """A memory that embeds (so entries and items have vectors)."""
    return make_memory(
        config=MemoryConfig(event_content=event_content),
        embeddings=DeterministicFakeEmbedding(size=8),
    )


def rows_naming_the_person(engine: Engine) -> dict[str, set[str]]:
    """For every tiermem table (and full-text shadow table, and view), the columns
    where a needle occurs (values as text; bytes as Latin-1)."""
    hits: dict[str, set[str]] = {}
    with engine.connect() as conn:
        for name in tiermem_table_names(engine):
            result = conn.execute(sa.text(f"SELECT * FROM {name}"))
            columns = list(result.keys())
            for row in result:
                for column, value in zip(columns, row, strict=True):
                    if isinstance(value, bytes | bytearray | memoryview):
                        text = bytes(value).decode("latin-1")
                    else:
                        text = str(value)
                    if any(needle in text.lower() for needle in NEEDLES):
                        hits.setdefault(name, set()).add(column)
    return hits


def forget_ada(
    memory: ConversationMemory, *, dry_run: bool = False, vacuum: bool = False
) -> ForgetResult:
    """Erase Ada: her session, her scope and her namespace."""
    return memory.forget(
        sessions=[ADA], scopes=[ADA], namespaces=[NAMESPACE], dry_run=dry_run, vacuum=vacuum
    )


def test_forget_leaves_no_row_naming_the_person(make_memory: MemoryFactory, engine: Engine) -> None:
    """Before: Ada's id or passport is in the sessions, entries, summaries, scopes,
    items, documents and events. After ``forget``: in no column of any table, while
    Bob's data is all there; the counts say what went."""
    memory = memory_with_vectors(make_memory, event_content=True)
    store = populate(memory)
    before = rows_naming_the_person(engine)
    for table in (
        "tiermem_session",
        "tiermem_entry",
        "tiermem_summary",
        "tiermem_layer_scope",
        "tiermem_layer_item",
        "tiermem_document",
        "tiermem_event",
    ):
        assert table in before, table  # the walk finds what is there
    bob_before = memory.get_entries("user-bob")

    result = forget_ada(memory)

    assert rows_naming_the_person(engine) == {}
    assert result.sessions == (ADA,) and result.scopes == (ADA,)
    assert result.namespaces == (NAMESPACE,)
    assert (result.entries, result.summaries, result.entry_vectors) == (24, 1, 24)
    assert (result.layer_items, result.item_vectors, result.documents) == (3, 3, 2)
    assert result.events > 24  # every entry's event at least, with its content
    assert dict(result.rows)["tiermem_session"] == 1
    assert dict(result.rows)["tiermem_layer_scope"] == 1
    assert result.scrubbed and not result.dry_run
    # Nothing of Bob's went.
    assert memory.get_entries("user-bob") == bob_before
    assert memory.layers("user-bob").recall("passport") is not None
    assert len(memory.layers("user-bob").recent("working", 10)) == 1
    assert store.get(("users", "bob"), "profile") is not None
    with engine.connect() as conn:
        bob_events = conn.execute(
            sa.text("SELECT count(*) FROM tiermem_event WHERE session_id = 'user-bob'")
        ).scalar_one()
    assert bob_events > 24
    # Ada's layers are empty, working memory included, and usable again.
    layers = memory.layers(ADA)
    assert layers.recall("passport") is None
    assert layers.recent("working", 10) == []
    layers.learn("city", "Oslo")
    assert layers.recall("city") is not None


def test_forget_after_clear_session_still_erases_the_events(
    make_memory: MemoryFactory, engine: Engine
) -> None:
    """The issue's case: ``clear_session`` first leaves the events with every
    message's text (``event_content=True``); ``forget`` of that session id erases
    them although the session is gone, and of a scope and namespace whose items and
    documents were already deleted, their events."""
    memory = memory_with_vectors(make_memory, event_content=True)
    store = populate(memory)
    memory.clear_session(ADA)
    memory.layers(ADA).clear()
    store.delete(NAMESPACE, "profile")
    store.delete((*NAMESPACE, "memories"), "trip")
    assert "tiermem_event" in rows_naming_the_person(engine)
    result = forget_ada(memory)
    assert (result.sessions, result.namespaces, result.entries, result.documents) == (
        (),
        (),
        0,
        0,
    )
    assert result.events > 24
    assert rows_naming_the_person(engine) == {}


def test_forget_leaves_no_erased_text_in_the_process_caches(make_memory: MemoryFactory) -> None:
    """The parsed-message cache and recall's word cache, which every memory of the
    process shares and which are keyed by stored text, hold none of the erased text
    afterwards (a read and a recalling read filled both first)."""
    memory = make_memory(config=MemoryConfig(max_tokens=300))
    for index in range(30):
        memory.add_user_message(ADA, f"my passport is {SECRET}, trip {index}")
        memory.add_assistant_message(ADA, f"noted, trip {index}")
    memory.get_messages(ADA, query=f"passport {SECRET}")
    assert any(SECRET in parse_cache.full_json(key) for key in list(parse_cache._CACHE))
    assert recall_ops._cached_words.cache_info().currsize > 0
    forget_ada(memory)
    assert not any(SECRET in parse_cache.full_json(key) for key in list(parse_cache._CACHE))
    assert recall_ops._cached_words.cache_info().currsize == 0


def test_forget_twice_finds_nothing(make_memory: MemoryFactory) -> None:
    memory = memory_with_vectors(make_memory)
    populate(memory)
    forget_ada(memory)
    again = forget_ada(memory)
    assert again.counts() == dict.fromkeys(again.counts(), 0)


def test_a_dry_run_counts_and_deletes_nothing(make_memory: MemoryFactory, engine: Engine) -> None:
    """``dry_run`` returns the counts the erasure then reports, changes no row and
    sends no signal."""
    memory = memory_with_vectors(make_memory, event_content=True)
    populate(memory)
    dump = canonical_dump(engine)
    with SignalRecorder(memory).recording() as recorder:
        planned = forget_ada(memory, dry_run=True)
    assert recorder.events == []
    assert canonical_dump(engine) == dump
    assert planned.dry_run and not planned.scrubbed
    done = forget_ada(memory)
    assert planned.counts() == done.counts() and planned.rows == done.rows
    assert planned.entries == 24 and planned.documents == 2


def test_signal_and_event_come_after_the_commit_and_name_nobody(
    make_memory: MemoryFactory, engine: Engine
) -> None:
    """The ``forgotten`` signal is sent once the rows are gone for every connection;
    the feed has one ``forgotten`` event with the counts and no id or text."""
    memory = memory_with_vectors(make_memory)
    populate(memory)
    seen: list[tuple[int, object]] = []

    def receiver(_sender: object, **kwargs: object) -> None:
        with engine.connect() as conn:
            left = conn.execute(
                sa.text("SELECT count(*) FROM tiermem_session WHERE session_id = :s"), {"s": ADA}
            ).scalar_one()
        seen.append((left, kwargs["result"]))

    memory.on("forgotten", receiver)
    result = forget_ada(memory)
    assert seen == [(0, result)]
    with engine.connect() as conn:  # read directly: the feed waits for other transactions
        events = conn.execute(
            sa.text("SELECT session_id, payload FROM tiermem_event WHERE kind = 'forgotten'")
        ).all()
    assert len(events) == 1
    assert events[0].session_id is None
    payload = json.loads(events[0].payload)
    assert payload == result.counts()
    assert payload["sessions"] == 1 and payload["entries"] == 24


@pytest.mark.parametrize("failpoint", ["forget.after_sessions", "transaction.before_commit"])
def test_a_failure_half_way_erases_nothing(
    make_memory: MemoryFactory, engine: Engine, monkeypatch: pytest.MonkeyPatch, failpoint: str
) -> None:
    """A database failure after the sessions were deleted, or at the commit: a
    ``StorageError``, every row as before, no signal; the next call erases all."""
    memory = memory_with_vectors(make_memory, event_content=True)
    populate(memory)
    dump = canonical_dump(engine)
    monkeypatch.setitem(_failpoints._POINTS, failpoint, "raise:OperationalError")
    with SignalRecorder(memory).recording() as recorder, pytest.raises(StorageError):
        forget_ada(memory)
    monkeypatch.delitem(_failpoints._POINTS, failpoint)
    assert recorder.events == []
    assert canonical_dump(engine) == dump
    assert memory.layers(ADA).recall("passport") is not None
    assert forget_ada(memory).entries == 24
    assert rows_naming_the_person(engine) == {}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "name at least one"),
        ({"sessions": ADA}, "not one string"),
        ({"scopes": ["ok", " padded "]}, "scope"),
        ({"sessions": [""]}, "session id"),
        ({"namespaces": ["users.ada"]}, "tuple of labels"),
        ({"namespaces": [()]}, "tuple of labels"),
        ({"namespaces": [("users", "a.b")]}, "without '.'"),
        ({"namespaces": [("users", 5)]}, "without '.'"),
        ({"sessions": [ADA], "dry_run": "yes"}, "dry_run"),
    ],
)
def test_bad_requests_raise_invalid_argument_and_erase_nothing(
    make_memory: MemoryFactory, engine: Engine, kwargs: dict[str, object], message: str
) -> None:
    memory = memory_with_vectors(make_memory)
    populate(memory)
    dump = canonical_dump(engine)
    with pytest.raises(InvalidArgument, match=message):
        memory.forget(**kwargs)  # type: ignore[arg-type]
    assert canonical_dump(engine) == dump


def test_another_memory_of_the_process_drops_its_working_memory(
    make_memory: MemoryFactory,
) -> None:
    """A second memory on the same database and project holding the scope: its
    working memory is emptied and its next write makes a new scope row."""
    first, second = make_memory(), make_memory()
    held = second.layers(ADA)
    held.append("working", f"booking with {SECRET}")
    held.learn("passport", SECRET)
    first.forget(scopes=[ADA])
    assert held.recent("working", 10) == []
    assert held.recall("passport") is None
    held.learn("passport", "renewed")
    renewed = first.layers(ADA).recall("passport")
    assert renewed is not None and renewed.value == "renewed"


def test_a_layer_whose_scope_was_erased_elsewhere_writes_again(
    make_memory: MemoryFactory,
) -> None:
    """Layers that are not in this process's registries (as in another process) keep
    the key of the scope row ``forget`` deleted: their next write makes a new row
    instead of failing."""
    first, second = make_memory(), make_memory()
    elsewhere = LayeredMemory(second.context, ADA)
    elsewhere.learn("passport", SECRET)
    first.forget(scopes=[ADA])
    elsewhere.learn("passport", "renewed")
    renewed = first.layers(ADA).recall("passport")
    assert renewed is not None and renewed.value == "renewed"


def test_namespaces_match_label_by_label(make_memory: MemoryFactory) -> None:
    """A prefix takes its namespace and those below it, never a namespace whose label
    merely starts with the prefix's last label."""
    memory = make_memory()
    store = TieredStore(memory)
    for namespace in (NAMESPACE, (*NAMESPACE, "deep", "er"), ("users", "ada-7f3x"), ("users",)):
        store.put(namespace, "k", {"v": 1})
    result = memory.forget(namespaces=[NAMESPACE])
    assert (result.documents, result.namespaces) == (2, (NAMESPACE,))
    assert store.get(("users", "ada-7f3x"), "k") is not None
    assert store.get(("users",), "k") is not None
    assert store.get(NAMESPACE, "k") is None


def test_every_table_of_a_session_is_in_the_cascade() -> None:
    """A table with a column naming a session's pk, or a foreign key to sessions,
    is deleted by the one cascade (so clear, prune, import and forget delete it)."""
    cascaded = {table.name for table, _ in SESSION_CHILDREN}
    referencing = {
        table.name
        for table in TABLES
        if "session_pk" in table.c
        or any(fk.column.table.name == "tiermem_session" for fk in table.foreign_keys)
    }
    assert referencing == cascaded


@pytest.mark.parametrize("written_without_secure_delete", [False, True])
def test_the_sqlite_file_and_wal_keep_no_byte_of_the_person(
    tmp_path: Path, written_without_secure_delete: bool
) -> None:
    """Before: the passport number and Ada's id are in the file or its WAL. After
    ``forget``: in neither (tiermem's connections zero what they delete or
    overwrite, forget merges the full-text indexes and truncates the WAL). A file
    written without ``secure_delete`` (by an older tiermem, or another program)
    keeps old copies of updated rows in free space: ``vacuum=True`` clears them."""
    path = tmp_path / "tiermem.db"
    engine = sqlite_engine(path)
    memory = ConversationMemory(
        engine=engine,
        clock=ManualClock(),
        config=MemoryConfig(event_content=True),
        embeddings=DeterministicFakeEmbedding(size=8),
    )
    if written_without_secure_delete:  # runs after tiermem's own connect settings
        sa.event.listen(
            engine, "connect", lambda dbapi, _: dbapi.execute("PRAGMA secure_delete = 0")
        )
    try:
        populate(memory)
        layers = memory.layers(ADA)
        layers.learn("old passport", "Z55500011")
        layers.learn("old passport", "expired")

        def on_disk() -> bytes:
            wal = path.with_name(path.name + "-wal")
            return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")

        assert SECRET.encode() in on_disk()
        assert ADA.encode() in on_disk()
        result = forget_ada(memory, vacuum=written_without_secure_delete)
        assert result.scrubbed
        data = on_disk().lower()
        for needle in (*NEEDLES, "z55500011"):
            assert needle.encode() not in data, needle
        assert b"user-bob" in data  # the others' data is still there
    finally:
        memory.close()
        engine.dispose()


def test_vacuum_rewrites_the_tables_after_the_erasure(
    make_memory: MemoryFactory, engine: Engine
) -> None:
    """``vacuum=True``: SQLite ``VACUUM``, PostgreSQL ``VACUUM FULL`` of the tables
    erased from, outside the erasing transaction; the result says it completed."""
    memory = memory_with_vectors(make_memory)
    populate(memory)

    def storage() -> object:
        """SQLite: the free pages; PostgreSQL: the entries' file (rewritten by VACUUM FULL)."""
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                return conn.exec_driver_sql("PRAGMA freelist_count").scalar_one()
            return conn.exec_driver_sql(
                "SELECT relfilenode FROM pg_class WHERE oid = 'tiermem_entry'::regclass"
            ).scalar_one()

    before = storage()
    result = forget_ada(memory, vacuum=True)
    assert result.scrubbed and result.entries == 24
    after = storage()
    assert after == 0 if engine.dialect.name == "sqlite" else after != before
    assert rows_naming_the_person(engine) == {}
    assert len(memory.get_entries("user-bob")) == 24
