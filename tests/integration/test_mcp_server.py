"""``tiermem mcp`` as a real subprocess, through the MCP SDK's own client, over stdio
and streamable HTTP, on SQLite and PostgreSQL: every tool with good and bad input,
checked against the Python API on the same database.

One server per backend and transport serves the whole module (started with
``--all-projects``); each test works in a project of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from tiermem import ConversationMemory, MemoryTier, calculate_tier
from tiermem._storage.schema import session_table
from tiermem.mcp import READING_TOOLS, WRITING_TOOLS
from tiermem.testing import ManualClock

from ..conftest import PG_URL, _create_schema, _drop_schema
from .mcp_client import HttpServer, McpClient, ok, stdio, text

S = session_table.c

#: Session id -> age of its last access, as in test_load_context.
AGES = {
    "active-new": timedelta(minutes=5),
    "active-old": timedelta(minutes=40),
    "recent": timedelta(hours=3),
    "archived-new": timedelta(days=2),
    "archived-old": timedelta(days=20),
    "expired-new": timedelta(days=40),
    "expired-mid": timedelta(days=50),
    "expired-old": timedelta(days=60),
}
LOADABLE = ["active-new", "active-old", "recent", "archived-new", "archived-old"]
EXPIRED_OLDEST_FIRST = ["expired-old", "expired-mid", "expired-new"]


@dataclass
class Served:
    """A running server, its client and the database URL it serves."""

    url: str
    client: McpClient

    def memory(
        self, project: str, clock: Callable[[], datetime] | None = None
    ) -> ConversationMemory:
        """A memory of ``project`` on the server's database, in this process."""
        return ConversationMemory(self.url, project=project, clock=clock)


@pytest.fixture(name="db_url", scope="module", params=["sqlite", "postgres"])
def fixture_db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A database for the module: a SQLite file or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('mcp') / 'mcp.db'}"
        return
    schema = _create_schema()
    yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    _drop_schema(schema)


@pytest.fixture(name="served", scope="module", params=["stdio", "http"])
def fixture_served(request: pytest.FixtureRequest, db_url: str) -> Iterator[Served]:
    """The module's server on ``db_url``, over stdio or HTTP, with --all-projects."""
    args = ("--url", db_url, "--all-projects")
    if request.param == "stdio":
        client = McpClient(stdio(*args))
        yield Served(db_url, client)
        client.close()
        return
    server = HttpServer(*args)
    client = McpClient(server.connect)
    yield Served(db_url, client)
    client.close()
    assert server.alive()
    server.stop()


@pytest.fixture(name="project")
def fixture_project() -> str:
    """A project of the test's own."""
    return f"p-{uuid.uuid4().hex[:12]}"


def seed(served: Served, project: str) -> datetime:
    """One message per session of AGES, written at its age; returns the seeding's now."""
    now = datetime.now(UTC)
    clock = ManualClock(now)
    with served.memory(project, clock) as memory:
        for session_id, age in AGES.items():
            clock.set(now - age)
            memory.add_user_message(session_id, f"about {session_id}")
    return now


def stored(served: Served, project: str) -> dict[str, tuple[str, int]]:
    """session_id -> (stored tier, access_count) of a project's sessions."""
    engine = sa.create_engine(served.url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.select(S.session_id, S.memory_tier, S.access_count).where(S.project == project)
            ).all()
    finally:
        engine.dispose()
    return {row.session_id: (row.memory_tier, row.access_count) for row in rows}


# ------------------------------------------------------------------ listing


def test_lists_every_tool_with_schemas_and_annotations(served: Served) -> None:
    """Every tool is listed with an input and an output schema; reading tools are marked
    read-only, pruning and compaction destructive."""
    tools = {tool.name: tool for tool in served.client.tools()}
    assert sorted(tools) == sorted(READING_TOOLS + WRITING_TOOLS)
    for name, tool in tools.items():
        assert tool.input_schema["type"] == "object", name
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", name
        assert tool.description, name
        assert tool.annotations is not None, name
        assert tool.annotations.read_only_hint is (name in READING_TOOLS), name
    for name in ("prune_expired_contexts", "compact_layer"):
        annotations = tools[name].annotations
        assert annotations is not None and annotations.destructive_hint is True
    prune = tools["prune_expired_contexts"].input_schema["properties"]
    assert {"limit", "dry_run", "project"} <= set(prune)


# ------------------------------------------------------------------ access tiers


def test_memory_stats_match_the_python_api(served: Served, project: str) -> None:
    """get_memory_stats reports the counts get_tier_stats gives, with health hints."""
    seed(served, project)
    out = ok(served.client.call("get_memory_stats", {"project": project}))
    with served.memory(project) as memory:
        tiers = memory.get_tier_stats()
    assert out["project"] == project
    assert (out["total"], out["active"], out["recent"], out["archived"], out["expired"]) == (
        tiers.total,
        tiers.active,
        tiers.recent,
        tiers.archived,
        tiers.expired,
    )
    assert (out["total"], out["expired"]) == (len(AGES), 3)
    assert out["expired_share"] == pytest.approx(3 / len(AGES))
    assert out["prune_recommended"] is True
    assert any("expired" in hint for hint in out["hints"])


def test_recalculate_returns_the_number_updated(served: Served, project: str) -> None:
    """recalculate_memory_tiers stores every session's tier by its age and returns how
    many changed; a second run changes none."""
    now = seed(served, project)
    result = served.client.call("recalculate_memory_tiers", {"project": project})
    stale = sum(calculate_tier(now - age, now) != MemoryTier.ACTIVE for age in AGES.values())
    assert ok(result) == {"project": project, "updated": stale}
    assert str(stale) in text(result)
    again = ok(served.client.call("recalculate_memory_tiers", {"project": project}))
    assert again["updated"] == 0
    tiers = {name: tier for name, (tier, _) in stored(served, project).items()}
    assert tiers == {name: calculate_tier(now - age, now).value for name, age in AGES.items()}


def test_load_context_orders_by_tier_and_records_accesses(served: Served, project: str) -> None:
    """load_context returns ACTIVE, RECENT, then ARCHIVED sessions, newest first, never
    EXPIRED ones, each with its context; each load counts one access and makes the
    session ACTIVE."""
    seed(served, project)
    served.client.call("recalculate_memory_tiers", {"project": project})
    before = stored(served, project)
    out = ok(served.client.call("load_context", {"project": project, "limit": 100}))
    sessions = out["sessions"]
    assert [s["session_id"] for s in sessions] == LOADABLE
    assert [s["tier"] for s in sessions] == ["active", "active", "recent", "archived", "archived"]
    for session in sessions:
        assert f"about {session['session_id']}" in session["context"]
    after = stored(served, project)
    for name in LOADABLE:
        assert after[name] == ("active", before[name][1] + 1)
    for name in EXPIRED_OLDEST_FIRST:
        assert after[name] == before[name] == ("expired", 1)
    # Loaded again: every loadable session is ACTIVE now; two more accesses recorded.
    again = ok(served.client.call("load_context", {"project": project, "limit": 2}))
    assert [s["tier"] for s in again["sessions"]] == ["active", "active"]
    latest = stored(served, project)
    for session in again["sessions"]:
        name = session["session_id"]
        assert latest[name][1] == session["access_count"] == before[name][1] + 2


def test_load_context_matches_the_python_api(served: Served, project: str) -> None:
    """The tool loads the sessions, in the order, that ConversationMemory.load_context
    loads from a twin project seeded alike on the same database."""
    seed(served, project)
    seed(served, f"{project}-twin")
    with served.memory(f"{project}-twin") as memory:
        expected = [item.session.session_id for item in memory.load_context(3)]
    out = ok(served.client.call("load_context", {"project": project, "limit": 3}))
    assert [s["session_id"] for s in out["sessions"]] == expected == LOADABLE[:3]


def test_prune_deletes_only_expired_respecting_limit_and_dry_run(
    served: Served, project: str
) -> None:
    """A dry run counts the EXPIRED sessions and changes nothing; a limit deletes that
    many, oldest first; the rest go next; a further run deletes nothing; every session
    that is not expired survives."""
    seed(served, project)
    before = stored(served, project)
    dry = served.client.call(
        "prune_expired_contexts", {"project": project, "dry_run": True, "limit": 10}
    )
    assert ok(dry) == {"project": project, "deleted": 3, "dry_run": True}
    assert "would delete 3" in text(dry)
    assert stored(served, project) == before
    one = ok(served.client.call("prune_expired_contexts", {"project": project, "limit": 1}))
    assert one["deleted"] == 1
    assert set(before) - set(stored(served, project)) == {EXPIRED_OLDEST_FIRST[0]}
    rest = ok(served.client.call("prune_expired_contexts", {"project": project}))
    assert rest["deleted"] == 2
    assert ok(served.client.call("prune_expired_contexts", {"project": project}))["deleted"] == 0
    assert sorted(stored(served, project)) == sorted(LOADABLE)


# ------------------------------------------------------------------ conversation


def test_conversation_tools_match_the_python_api(served: Served, project: str) -> None:
    """Messages added through MCP are the entries the Python API reads; get_context,
    search_memory and expand_summary give what their Python methods give."""
    call = served.client.call
    for role, content in [
        ("user", "the harbour opens at nine"),
        ("assistant", "noted: nine at the harbour"),
        ("system", "be brief"),
        ("user", "and the museum closes at six"),
        *(("assistant", f"filler {index}") for index in range(4)),
    ]:
        added = ok(
            call(
                "add_message",
                {
                    "project": project,
                    "session_id": "s",
                    "content": content,
                    "role": role,
                    "metadata": {"n": 1},
                },
            )
        )
        assert added["entry"]["content"] == content
    with served.memory(project) as memory:
        entries = memory.get_entries("s")
        assert [e.content for e in entries][:4] == [
            "the harbour opens at nine",
            "noted: nine at the harbour",
            "be brief",
            "and the museum closes at six",
        ]
        assert [e.role for e in entries][:4] == ["user", "assistant", "system", "user"]
        assert all(e.metadata == {"n": 1} for e in entries)
        context = ok(call("get_context", {"project": project, "session_id": "s"}))
        assert context["context"] == memory.get_context_for_llm("s")
        hits = ok(call("search_memory", {"project": project, "query": "harbour", "limit": 5}))
        expected = memory.search("harbour", limit=5)
        assert [h["entry"]["id"] for h in hits["hits"]] == [h.entry.id for h in expected]
        assert memory.compress("s", force=True, keep=1) is not None
        summary = memory.get_summaries("s")[0]
        originals = memory.expand_summary(summary.id)
    expanded = ok(call("expand_summary", {"project": project, "summary_id": summary.id}))
    assert [e["id"] for e in expanded["entries"]] == [e.id for e in originals]
    assert all(e["compressed"] for e in expanded["entries"])


# ------------------------------------------------------------------ layers


def test_layer_tools_match_the_python_api(served: Served, project: str) -> None:
    """Episodes, facts and rules stored through MCP are what the layers read; searches,
    recall, rule matching, compaction and statistics agree with the Python API."""
    call = served.client.call
    scope = {"project": project, "scope": "trip"}
    for index in range(4):
        ok(call("append_episode", {**scope, "content": f"visited the harbour, day {index}"}))
    ok(call("learn", {**scope, "key": "city", "value": "Lisbon"}))
    ok(
        call(
            "add_rule",
            {**scope, "condition": "user asks about weather", "action": "check the forecast"},
        )
    )
    with served.memory(project) as memory:
        layers = memory.layers("trip")
        hits = ok(call("search_layer", {**scope, "layer": "episodic", "query": "harbour"}))
        assert [h["item"]["id"] for h in hits["hits"]] == [
            h.item.id for h in layers.search("episodic", "harbour")
        ]
        recalled = ok(call("recall", {**scope, "key": "city"}))
        assert recalled["found"] is True and recalled["fact"]["value"] == "Lisbon"
        assert ok(call("recall", {**scope, "key": "country"})) == {"found": False, "fact": None}
        rules = ok(call("match_rules", {**scope, "situation": "what is the weather"}))
        assert (
            [r["action"] for r in rules["rules"]]
            == [r.action for r in layers.match_rules("what is the weather")]
            == ["check the forecast"]
        )
        compacted = ok(call("compact_layer", {**scope, "layer": "episodic", "keep_last": 1}))
        twin = memory.layers("trip-twin")
        for index in range(4):
            twin.append("episodic", f"visited the harbour, day {index}")
        expected = twin.compact("episodic", keep_last=1)
        assert (compacted["removed"], compacted["kept"]) == (expected.removed, expected.kept)
        assert compacted["removed"] > 0
        assert compacted["summary"] is not None
        stats = ok(call("layer_stats", scope))
        python = layers.get_stats()
        assert (
            (stats["episodic_entry_count"], stats["semantic_entry_count"])
            == (
                python.episodic_entry_count,
                python.semantic_entry_count,
            )
            == (2, 1)
        )
        assert stats["procedural_rule_count"] == python.procedural_rule_count == 1


# ------------------------------------------------------------------ bad input

BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("load_context", {"limit": -1}, "greater than or equal"),
    ("load_context", {"limit": "many"}, "integer"),
    ("prune_expired_contexts", {"limit": -5}, "greater than or equal"),
    ("prune_expired_contexts", {"dry_run": "maybe"}, "bool"),
    ("add_message", {"content": "no session"}, "session_id"),
    ("add_message", {"session_id": "", "content": "x"}, "InvalidSessionId"),
    ("add_message", {"session_id": "s", "content": "x", "role": "robot"}, "role"),
    ("add_message", {"session_id": "s", "content": "x", "metadata": "not an object"}, "metadata"),
    ("get_context", {"session_id": "x" * 300}, "InvalidSessionId"),
    ("search_memory", {"query": "x", "limit": 0}, "greater than or equal"),
    ("expand_summary", {"summary_id": 987654}, "SessionNotFound"),
    ("expand_summary", {"summary_id": "one"}, "integer"),
    ("search_layer", {"layer": "dreams", "query": "x"}, "layer"),
    ("learn", {"key": "", "value": "x"}, "InvalidContent: key must not be empty"),
    ("recall", {}, "key"),
    ("add_rule", {"condition": "only a condition"}, "action"),
    ("compact_layer", {"layer": "episodic", "keep_last": -1}, "greater than or equal"),
    ("layer_stats", {"scope": ""}, "InvalidArgument"),
    ("get_memory_stats", {"project": ""}, "InvalidSessionId"),
    ("no_such_tool", {}, "Unknown tool"),
]


def test_bad_input_is_a_tool_error(served: Served, project: str) -> None:
    """Every bad call is a tool error naming the problem, and the server serves the
    next call."""
    for name, arguments, expected in BAD_CALLS:
        if name != "get_memory_stats":
            arguments = {"project": project, **arguments}
        result = served.client.call(name, arguments)
        assert result.is_error, (name, arguments)
        assert expected in text(result), (name, arguments, text(result))
    assert ok(served.client.call("get_memory_stats", {"project": project}))["total"] == 0
