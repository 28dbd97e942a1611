"""``copy_project`` and ``tiermem copy``, SQLite to PostgreSQL and back: everything of
the project arrives (sessions with their summaries, counters and token counts, layer
items, documents, change-feed events), the doctor finds nothing wrong in the target,
a second run copies nothing, an interrupted copy resumes without duplicates, and a
target that differs is refused before anything is written."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from sqlalchemy.engine import Engine
from tiermem_langgraph import TieredStore
from typer.testing import CliRunner

from tiermem import ConversationMemory, CopyResult, cli, copy_project
from tiermem._core.clock import as_utc
from tiermem._storage import copying as sql
from tiermem._storage import failpoints as _failpoints
from tiermem._storage.event_schema import event_table
from tiermem.copying import CopyProgress
from tiermem.doctor import find_violations
from tiermem.errors import CopyConflict, InvalidArgument
from tiermem.testing import FakeSummarizer

from ..conftest import PG_URL
from ..reliability.dump import canonical_dump

PROJECT = "proj"
SESSIONS = ("chat-a", "chat-b")
SCOPES = ("ada", "bob")
NAMESPACE = ("users", "ada")

runner = CliRunner()


@pytest.fixture(
    name="urls", params=[("sqlite", "postgres"), ("postgres", "sqlite")], ids=["to-pg", "to-sqlite"]
)
def fixture_urls(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """The source's URL and the target's: a fresh SQLite file and a fresh schema."""
    schema = request.getfixturevalue("pg_schema")
    by_backend = {
        "sqlite": f"sqlite:///{tmp_path / 'copy.db'}",
        "postgres": f"{PG_URL}?options=-csearch_path%3D{schema}",
    }
    source, target = request.param
    return by_backend[source], by_backend[target]


def engine_for(url: str) -> Iterator[Engine]:
    engine = sa.create_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture(name="target_engine")
def fixture_target_engine(urls: tuple[str, str]) -> Iterator[Engine]:
    yield from engine_for(urls[1])


def populate(url: str) -> None:
    """Two compressed sessions (a tool call pending, a pinned entry, metadata), two
    layer scopes over the three stored layers, documents with vectors, their events;
    and another project that a copy of ``PROJECT`` leaves behind."""
    embeddings = DeterministicFakeEmbedding(size=8)
    with ConversationMemory(
        url, project=PROJECT, summarizer=FakeSummarizer(), embeddings=embeddings
    ) as memory:
        for session in SESSIONS:
            for index in range(8):
                memory.add_user_message(session, f"{session} question {index}")
                memory.add_assistant_message(session, f"{session} answer {index} ünïcode")
            memory.compress(session, force=True)
        memory.add_message("chat-a", HumanMessage("weather?", id="m-1"))
        memory.add_context("chat-a", "the user is in Oslo", "profile", pinned=True)
        call = {"id": "call-1", "name": "weather", "args": {"city": "Oslo"}}
        memory.add_message("chat-a", AIMessage("", tool_calls=[call]))
        memory.add_message("chat-a", ToolMessage("rain", tool_call_id="call-1"))
        memory.add_message(
            "chat-b", AIMessage("", tool_calls=[{**call, "id": "call-2"}]), metadata={"k": 1}
        )
        for scope in SCOPES:
            layers = memory.layers(scope)
            layers.append("episodic", f"{scope} flew to Paris")
            layers.learn("city", f"{scope} lives in Oslo")
        memory.layers("ada").add_rule("asks for travel", "quote the passport")
        embedder = memory.context.embedder
        assert embedder is not None
        embedder.queue.drain()  # the background embedding of the writes above
        memory.embed_missing()
        store = TieredStore(memory, index={"dims": 8, "embed": DeterministicFakeEmbedding(size=8)})
        store.put(NAMESPACE, "profile", {"name": "Ada", "langs": ["no", "en"], "age": 36})
        store.put((*NAMESPACE, "notes"), "trip", {"text": "Paris in May"})
    with ConversationMemory(url, project="other") as memory:
        memory.add_user_message("elsewhere", "not copied")


def events(url: str, project: str = PROJECT) -> list[tuple[Any, ...]]:
    """The project's events in delivery order, without their positions (all that
    committed: the feed would wait for transactions of other tests on the server)."""
    column = event_table.c
    query = (
        sa.select(column.kind, column.session_id, column.payload, column.created_at)
        .where(column.project == project)
        .order_by(column.xid, column.id)
    )
    for engine in engine_for(url):
        with engine.connect() as conn:
            return [
                (kind, session_id, json.loads(payload), as_utc(created_at))
                for kind, session_id, payload, created_at in conn.execute(query)
            ]
    raise AssertionError("unreachable")


def token_counts(conn: sa.Connection) -> list[tuple[Any, ...]]:
    """Every counter of the project's sessions and the token count of each entry."""
    counters = sa.text(
        "SELECT session_id, last_seq, entry_count, entry_tokens, active_count, active_tokens,"
        " summary_count, summary_tokens, encoding, pending_calls, memory_tier"
        " FROM tiermem_session WHERE project = :p ORDER BY session_id"
    )
    entries = sa.text(
        "SELECT s.session_id, e.seq, e.token_count FROM tiermem_entry e"
        " JOIN tiermem_session s ON s.pk = e.session_pk WHERE s.project = :p"
        " ORDER BY s.session_id, e.seq"
    )
    return [
        *(tuple(row) for row in conn.execute(counters, {"p": PROJECT})),
        *(tuple(row) for row in conn.execute(entries, {"p": PROJECT})),
    ]


def vectors(conn: sa.Connection) -> list[tuple[Any, ...]]:
    """The project's entry vectors (by session and seq) and item vectors (by scope and
    item text), with their models."""
    by_entry = sa.text(
        "SELECT s.session_id, e.seq, v.model, v.vector FROM tiermem_entry_vector v"
        " JOIN tiermem_entry e ON e.id = v.entry_id JOIN tiermem_session s ON s.pk = e.session_pk"
        " WHERE s.project = :p ORDER BY s.session_id, e.seq"
    )
    by_item = sa.text(
        "SELECT c.scope, i.layer, i.content, v.model, v.vector FROM tiermem_layer_item_vector v"
        " JOIN tiermem_layer_item i ON i.id = v.item_id AND i.scope_pk = v.scope_pk"
        " AND i.layer = v.layer JOIN tiermem_layer_scope c ON c.pk = i.scope_pk"
        " WHERE c.project = :p ORDER BY c.scope, i.layer, i.content"
    )
    return [
        (*row[:-1], bytes(row[-1]))
        for query in (by_entry, by_item)
        for row in conn.execute(query, {"p": PROJECT})
    ]


def read_scope(conn: sa.Connection, scope: str) -> sql.StoredScope | None:
    return sql.read_scope(conn, PROJECT, scope)


def snapshot(url: str) -> dict[str, Any]:
    """What the project holds, as its user sees it, plus the stored layer items."""
    with ConversationMemory(url, project=PROJECT) as memory:
        store = TieredStore(memory)
        database = memory.context.database
        return {
            "sessions": {sid: memory.export_session(sid).to_json() for sid in SESSIONS},
            "sessions listed": sorted(memory.list_sessions(), key=lambda info: info.session_id),
            "tokens": database.run(token_counts, write=False),
            "vectors": database.run(vectors, write=False),
            "scopes": {
                scope: database.run(functools.partial(read_scope, scope=scope), write=False)
                for scope in SCOPES
            },
            "documents": sorted(
                (
                    (item.namespace, item.key, item.value, item.created_at, item.updated_at)
                    for item in store.search(("users",), limit=100)
                ),
                key=lambda document: document[:2],
            ),
            "events": events(url),
        }


def test_everything_arrives_and_the_doctor_passes(
    urls: tuple[str, str], target_engine: Engine
) -> None:
    source, target = urls
    populate(source)
    steps: list[CopyProgress] = []
    result = copy_project(source, target, project=PROJECT, progress=steps.append)
    expected = snapshot(source)
    assert snapshot(target) == expected
    assert len(expected["documents"]) == 2 and len(expected["events"]) > 40
    assert len(expected["vectors"]) == 37 + 5
    assert result == CopyResult(
        projects=(PROJECT,),
        sessions=2,
        entries=37,
        summaries=2,
        scopes=2,
        layer_items=5,
        vectors=42,
        documents=2,
        events=len(expected["events"]),
    )
    assert find_violations(target_engine, deep=True) == []
    assert events(target, "other") == []  # another project is not copied
    assert steps[0] == CopyProgress(PROJECT, "sessions", 1, 2)
    assert steps[-1] == CopyProgress(PROJECT, "events", result.events, result.events)
    # Vectors travel with their model's id: the same embeddings need none made again.
    embeddings = DeterministicFakeEmbedding(size=8)
    with ConversationMemory(target, project=PROJECT, embeddings=embeddings) as memory:
        assert memory.embed_missing() == 0
    # A document's vectors travel with it: the target finds it by meaning.
    with ConversationMemory(target, project=PROJECT) as memory:
        store = TieredStore(memory, index={"dims": 8, "embed": DeterministicFakeEmbedding(size=8)})
        assert [hit.key for hit in store.search(NAMESPACE, query="Ada", limit=1)] != []


def test_every_project_is_copied(urls: tuple[str, str]) -> None:
    source, target = urls
    populate(source)
    result = copy_project(source, target, project=None)
    assert result.projects == ("other", PROJECT)
    assert result.sessions == 3
    with ConversationMemory(target, project="other") as memory:
        assert [entry.content for entry in memory.get_entries("elsewhere")] == ["not copied"]


def test_a_second_run_copies_nothing(urls: tuple[str, str], target_engine: Engine) -> None:
    source, target = urls
    populate(source)
    first = copy_project(source, target, project=PROJECT)
    # Reading the target changes its access bookkeeping, not what it holds.
    with ConversationMemory(target, project=PROJECT) as memory:
        memory.get_messages("chat-a")
    before = canonical_dump(target_engine)
    second = copy_project(source, target, project=PROJECT)
    assert canonical_dump(target_engine) == before
    assert second == CopyResult(
        projects=(PROJECT,),
        sessions_present=2,
        scopes_present=2,
        documents_present=2,
        events_present=first.events,
    )


def test_an_interrupted_copy_resumes_without_duplicates(
    urls: tuple[str, str], target_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped inside the first session's transaction (nothing of it stays), then after
    the first session and after the second page of events: each run goes on from where
    the last one stopped, and the end is the copy of an uninterrupted run."""
    source, target = urls
    populate(source)
    monkeypatch.setitem(_failpoints._POINTS, "import.mid_batch", "raise:RuntimeError")
    with pytest.raises(RuntimeError, match="import.mid_batch"):
        copy_project(source, target, project=PROJECT)
    with ConversationMemory(target, project=PROJECT) as memory:
        assert memory.list_sessions() == []
    monkeypatch.delitem(_failpoints._POINTS, "import.mid_batch")

    monkeypatch.setitem(_failpoints._POINTS, "copy.after_session", "raise:RuntimeError")
    with pytest.raises(RuntimeError, match="copy.after_session"):
        copy_project(source, target, project=PROJECT)
    monkeypatch.delitem(_failpoints._POINTS, "copy.after_session")
    with ConversationMemory(target, project=PROJECT) as memory:
        assert [info.session_id for info in memory.list_sessions()] == ["chat-a"]

    monkeypatch.setattr(sql, "EVENT_PAGE", 7)
    passed: list[str] = []
    original = _failpoints.hit

    def stop_after_two_pages(name: str) -> None:
        passed.append(name)
        if passed.count("copy.after_events") == 2:
            raise RuntimeError("stopped after two pages of events")
        original(name)

    monkeypatch.setattr(_failpoints, "hit", stop_after_two_pages)
    with pytest.raises(RuntimeError, match="two pages"):
        copy_project(source, target, project=PROJECT)
    assert len(events(target)) == 14
    monkeypatch.setattr(_failpoints, "hit", original)

    result = copy_project(source, target, project=PROJECT)
    expected = snapshot(source)
    assert (result.sessions, result.sessions_present) == (0, 2)
    assert (result.events_present, result.events) == (14, len(expected["events"]) - 14)
    assert snapshot(target) == expected
    assert find_violations(target_engine, deep=True) == []


def _conflicting_session(memory: ConversationMemory) -> None:
    memory.add_user_message("chat-b", "something else")


def _conflicting_scope(memory: ConversationMemory) -> None:
    memory.layers("bob").learn("city", "Bergen")


def _conflicting_document(memory: ConversationMemory) -> None:
    TieredStore(memory).put((*NAMESPACE, "notes"), "trip", {"text": "Rome in June"})


def _foreign_event(memory: ConversationMemory) -> None:
    memory.database.run(lambda conn: memory.feed.record(conn, "audit", {"note": "target's"}))


@pytest.mark.parametrize(
    ("conflict", "named"),
    [
        (_conflicting_session, "session 'chat-b'"),
        (_conflicting_scope, "layer scope 'bob'"),
        (_conflicting_document, "document 'trip' in 'users.ada.notes'"),
        (_foreign_event, "the change feed"),
    ],
)
def test_a_differing_target_is_refused_before_any_write(
    urls: tuple[str, str], target_engine: Engine, conflict: Any, named: str
) -> None:
    source, target = urls
    populate(source)
    with ConversationMemory(target, project=PROJECT) as memory:
        conflict(memory)
    before = canonical_dump(target_engine)
    with pytest.raises(CopyConflict, match=f"{named} of project 'proj' differs"):
        copy_project(source, target, project=PROJECT)
    assert canonical_dump(target_engine) == before


def test_every_project_is_compared_before_any_is_written(
    urls: tuple[str, str], target_engine: Engine
) -> None:
    """A conflict in the last project ('proj' after 'other') copies not even the first."""
    source, target = urls
    populate(source)
    with ConversationMemory(target, project=PROJECT) as memory:
        _conflicting_session(memory)
    before = canonical_dump(target_engine)
    with pytest.raises(CopyConflict, match="session 'chat-b' of project 'proj'"):
        copy_project(source, target, project=None)
    assert canonical_dump(target_engine) == before


def test_a_missing_source_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="no database at"):
        copy_project(f"sqlite:///{tmp_path / 'none.db'}", f"sqlite:///{tmp_path / 't.db'}")
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "t.db").exists()
    with pytest.raises(InvalidArgument, match="project"):
        copy_project(f"sqlite:///{tmp_path / 'none.db'}", "sqlite://", project="")


def test_the_command_prints_one_line_and_exits_as_the_others(
    urls: tuple[str, str], target_engine: Engine
) -> None:
    source, target = urls
    populate(source)
    args = ["copy", "--from", source, "--to", target]
    done = runner.invoke(cli.app, [*args, "--project", PROJECT])
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines() == [
        f"copied project 'proj': 2 sessions (37 entries, 2 summaries), 2 scopes "
        f"(5 layer items), 42 vectors, 2 documents, {len(events(source))} events; already in the "
        "target: 0 sessions, 0 scopes, 0 documents, 0 events"
    ]
    assert "proj: sessions 2/2" in done.stderr.splitlines()
    assert find_violations(target_engine, deep=True) == []
    again = runner.invoke(cli.app, [*args, "--project", PROJECT, "--quiet"])
    assert (again.exit_code, again.output) == (0, "")
    every = runner.invoke(cli.app, [*args, "--all-projects"])
    assert every.exit_code == 0, every.output
    assert every.stdout.startswith("copied projects 'other', 'proj': 1 sessions")

    with ConversationMemory(source, project=PROJECT) as memory:
        memory.add_user_message("chat-a", "one more")  # the target's chat-a now differs
    refused = runner.invoke(cli.app, [*args, "--project", PROJECT])
    assert refused.exit_code == 1
    assert "session 'chat-a' of project 'proj' differs" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
    assert "Traceback" not in refused.output


def test_the_command_refuses_bad_usage(tmp_path: Path) -> None:
    source, target = f"sqlite:///{tmp_path / 's.db'}", f"sqlite:///{tmp_path / 't.db'}"
    both = runner.invoke(
        cli.app, ["copy", "--from", source, "--to", target, "--project", "p", "--all-projects"]
    )
    assert both.exit_code == 2
    missing = runner.invoke(cli.app, ["copy", "--from", source, "--to", target])
    assert missing.exit_code == 1
    assert missing.output.strip().splitlines() == [f"error: no database at {tmp_path / 's.db'}"]
