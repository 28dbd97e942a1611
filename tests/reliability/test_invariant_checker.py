"""The invariant checker itself: each kind of damage is reported under its invariant."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from sqlalchemy.engine import Connection

from tiermem import ConversationMemory, MemoryConfig, TierPolicy
from tiermem._storage import statements
from tiermem._storage.coverage import SUMMARY_OF
from tiermem._storage.schema import entry_table, session_table, summary_table
from tiermem.doctor import find_violations, provider_shape_problems
from tiermem.testing import FakeSummarizer, ManualClock

from ..conftest import MemoryFactory

E, S, M = entry_table.c, session_table.c, summary_table.c
Damage = Callable[[Connection], object]


def _session(sid: str) -> sa.ColumnElement[bool]:
    return S.session_id == sid


def _pk(conn: Connection, sid: str) -> int:
    return int(conn.execute(sa.select(S.pk).where(_session(sid))).scalar_one())


def _orphan(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL session_replication_role = replica")  # no FK triggers
    else:
        conn.exec_driver_sql("PRAGMA defer_foreign_keys = ON")
    conn.execute(sa.update(entry_table).where(E.seq == 1).values(session_pk=999_999))


def _unlink(conn: Connection) -> None:
    """The compressed prefix forgotten: the summaries' entries no longer covered."""
    conn.execute(sa.update(session_table).values(compressed_seq=0))


def _stub(conn: Connection) -> None:
    conn.execute(sa.update(summary_table).values(content="Error generating summary: 429"))


def _pin_compressed(conn: Connection) -> None:
    """Compressed entries pinned, still naming their summary (a pinned entry within
    the prefix is otherwise active)."""
    conn.execute(
        sa.update(entry_table)
        .where(statements.COMPRESSED)
        .values(pinned=True, summary_id=SUMMARY_OF)
    )


def _half_claim(conn: Connection) -> None:
    conn.execute(sa.update(session_table).values(claim_token="x", claim_expires_at=None))


def _unknown_tier(conn: Connection) -> None:
    conn.execute(sa.update(session_table).values(memory_tier="frozen"))


def _ghost_pending(conn: Connection) -> None:
    conn.execute(sa.update(session_table).values(pending_calls='{"ghost": "f"}'))


def _tampered_text(conn: Connection) -> None:
    # seq 7 is the tool call: its JSON is whole, its text column renders the call.
    conn.execute(sa.update(entry_table).where(E.seq == 7).values(content="tampered"))


def _tampered_kept_text(conn: Connection) -> None:
    # seq 2's text is kept once (its JSON has a hole for it): the message read back
    # changes with it, and no longer has the tokens counted for it.
    conn.execute(sa.update(entry_table).where(E.seq == 2).values(content="tampered"))


def _miscounted(conn: Connection) -> None:
    conn.execute(sa.update(entry_table).where(E.seq == 2).values(token_count=E.token_count + 1))
    conn.execute(
        sa.update(session_table).values(
            entry_tokens=S.entry_tokens + 1, active_tokens=S.active_tokens + 1
        )
    )


def _split_pair(conn: Connection) -> None:
    result_seq = conn.execute(
        sa.select(sa.func.max(E.seq)).where(E.type == "tool_result")
    ).scalar_one()
    conn.execute(sa.update(entry_table).where(E.seq == result_seq).values(seq=result_seq + 50))
    conn.execute(sa.update(session_table).values(last_seq=S.last_seq + 50))


def _accessed(conn: Connection) -> datetime:
    value: datetime = conn.execute(sa.select(S.last_accessed)).scalar_one()
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _future_access(conn: Connection) -> None:
    later = _accessed(conn) + timedelta(days=400)
    conn.execute(sa.update(session_table).values(last_accessed=later))


def _long_claim(conn: Connection) -> None:
    later = _accessed(conn) + timedelta(days=2)
    conn.execute(sa.update(session_table).values(claim_token="x", claim_expires_at=later))


def _stale_backwards_tier(conn: Connection) -> None:
    conn.execute(sa.update(session_table).values(memory_tier="expired"))


def _overlap(conn: Connection) -> None:
    row = conn.execute(sa.select(summary_table)).mappings().one()
    values = {k: v for k, v in row.items() if k != "id"}
    conn.execute(sa.insert(summary_table).values(**values))


CASES: dict[str, tuple[Damage, str]] = {
    "orphan": (_orphan, "I2 a row of tiermem_entry points at the missing tiermem_session.pk"),
    "unlinked": (_unlink, "covers no entry"),
    "error-stub": (_stub, "is an error stub"),
    "pinned-compressed": (_pin_compressed, "pinned entries are never compressed"),
    "half-claim": (_half_claim, "I12 session 's' has a half-recorded compression claim"),
    "unknown-tier": (_unknown_tier, "I11 session 's' has unknown tier 'frozen'"),
    "ghost-pending": (_ghost_pending, "pending_calls"),
    "tampered-text": (_tampered_text, "I7 session 's' seq 7: content column"),
    "tampered-kept-text": (_tampered_kept_text, "I4 session 's' seq 2: stores"),
    "miscounted": (_miscounted, "I4 session 's' seq 2: stores"),
    "split-pair": (_split_pair, "I3 session 's'"),
    "future-access": (_future_access, "I8 session 's' accessed in the future"),
    "long-claim": (_long_claim, "I12 session 's' holds a claim that outlives its lease"),
    "tier-older-than-access": (_stale_backwards_tier, "I11 session 's' is stored expired"),
    "overlap": (_overlap, "summary ranges overlap"),
}


def test_checker_reports_each_kind_of_damage(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """Every damage, applied inside a transaction, is reported under the right invariant,
    and the undamaged store reports nothing."""
    memory: ConversationMemory = make_memory(
        config=MemoryConfig(auto_compress=False, recent_window=2), summarizer=FakeSummarizer()
    )
    for index in range(6):
        memory.add_user_message("s", f"message {index} with several words in it")
    memory.add_messages(
        "s",
        [
            AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
            ToolMessage("done", tool_call_id="c1", name="f"),
            HumanMessage("thanks"),
        ],
    )
    memory.compress("s", force=True, keep=3)
    options = {"now": clock(), "claim_ttl": 120.0, "policy": TierPolicy()}
    assert find_violations(memory.engine, **options) == []  # type: ignore[arg-type]
    for name, (damage, expected) in CASES.items():
        with memory.engine.connect() as conn:
            conn.begin()
            damage(conn)
            problems = find_violations(conn, **options)  # type: ignore[arg-type]
            conn.rollback()
        assert any(expected in problem for problem in problems), (name, problems)
    assert find_violations(memory.engine, **options) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([ToolMessage("r", tool_call_id="x")], "does not follow its call"),
        (
            [
                AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "a"}]),
                HumanMessage("interjection"),
                ToolMessage("r", tool_call_id="a"),
            ],
            "not answered in time",
        ),
        (
            [
                AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "a"}]),
                ToolMessage("r", tool_call_id="a"),
                AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "a"}]),
                ToolMessage("r", tool_call_id="a"),
            ],
            "appears 2 times",
        ),
    ],
    ids=["orphan-result", "interleaved", "duplicate-id"],
)
def test_provider_shape_rules(messages: list[object], problem: str) -> None:
    """The provider-shape validator rejects orphan results, interleaved turns and reused
    ids, for both providers."""
    for provider in ("openai", "anthropic"):
        found = provider_shape_problems(messages, provider)  # type: ignore[arg-type]
        assert any(problem in line for line in found), found


def test_provider_shape_allows_pending_calls() -> None:
    """A trailing call without results, or one known to be pending, is not a violation;
    with allow_pending_tail=False the trailing one is."""
    call = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "a"}])
    assert provider_shape_problems([HumanMessage("q"), call]) == []
    assert provider_shape_problems([call, HumanMessage("q")], pending={"a"}) == []
    assert provider_shape_problems([call], allow_pending_tail=False) != []


def test_checker_reports_a_merged_summary_that_miscounts_its_entries(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """A merge records its children's entry count without reading entry ids; a merged
    summary whose count differs from its children's is reported under I2."""
    config = MemoryConfig(
        max_tokens=300, recent_window=2, min_entries_to_compress=2, summary_share=0.05
    )
    memory: ConversationMemory = make_memory(config=config, summarizer=FakeSummarizer())
    for turn in range(25):
        memory.add_and_get_messages(
            "s",
            [
                HumanMessage(f"question {turn} about the weather in town {turn}"),
                AIMessage(f"answer {turn}: sunny in town {turn}, light wind from the west"),
            ],
        )
    assert any(summary.level > 1 for summary in memory.get_summaries("s"))
    options = {"now": clock(), "claim_ttl": 120.0, "policy": TierPolicy()}
    assert find_violations(memory.engine, **options) == []  # type: ignore[arg-type]
    with memory.engine.connect() as conn:
        conn.begin()
        conn.execute(
            sa.update(summary_table).where(M.level > 1).values(entry_count=M.entry_count + 1)
        )
        problems = find_violations(conn, **options)  # type: ignore[arg-type]
        conn.rollback()
    assert any("I2 merged summary" in p and "its children hold" in p for p in problems), problems


def test_checker_tells_sessions_of_two_projects_apart(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """Two projects each with a session ``chat-1`` using the same call id (answered in one,
    pending in the other) are healthy: tool calls are paired within each session row."""
    answered: ConversationMemory = make_memory(project="alpha")
    pending: ConversationMemory = make_memory(project="beta")
    answered.add_tool_call("chat-1", "search", {"q": "a"}, call_id="c1")
    answered.add_tool_result("chat-1", "search", "found", call_id="c1")
    pending.add_user_message("chat-1", "look it up")
    pending.add_tool_call("chat-1", "search", {"q": "b"}, call_id="c1")
    assert find_violations(answered.engine, now=clock()) == []


def test_checker_accepts_a_call_id_reused_once_answered(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """A call id reused after its call was answered (which add_tool_call and compression
    accept) is healthy, before and after a compression takes the first call."""
    memory: ConversationMemory = make_memory(
        config=MemoryConfig(auto_compress=False), summarizer=FakeSummarizer()
    )
    memory.add_tool_call("s", "lookup", {"n": 1}, call_id="call_0")
    memory.add_tool_result("s", "lookup", "first answer", call_id="call_0")
    memory.add_user_message("s", "and once more please, with the next number")
    memory.add_tool_call("s", "lookup", {"n": 2}, call_id="call_0")
    memory.add_tool_result("s", "lookup", "second answer", call_id="call_0")
    memory.add_assistant_message("s", "done")
    assert find_violations(memory.engine, now=clock()) == []
    assert memory.compress("s", force=True, keep=3) is not None
    assert find_violations(memory.engine, now=clock()) == []
