"""``add_and_get_messages``: a model turn's store and read, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from sqlalchemy.engine import Engine

from tiermem import MemoryConfig, is_summary_message
from tiermem._core.messages import SUMMARY_MARKER
from tiermem._ops import compress as compress_ops
from tiermem._ops import write as write_ops
from tiermem._ops.compress import Planned
from tiermem.errors import ContextReadFailed, InvalidContent, StorageError
from tiermem.testing import FakeSummarizer, SignalRecorder

from ..conftest import MemoryFactory
from .helpers import assert_provider_valid

SMALL = MemoryConfig(max_tokens=400, max_entries=40, recent_window=4, min_entries_to_compress=2)


def exchange(turn: int) -> list[BaseMessage]:
    return [
        HumanMessage(f"Question {turn}: what should I know about subject {turn}?"),
        AIMessage(f"Answer {turn}: subject {turn} has three parts, each explained in turn."),
    ]


@contextmanager
def commits(engine: Engine) -> Iterator[list[int]]:
    """Count the transactions committed on ``engine`` inside the block."""
    seen: list[int] = []

    def on_commit(_conn: object) -> None:
        seen.append(1)

    sa.event.listen(engine, "commit", on_commit)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "commit", on_commit)


def test_returns_what_get_messages_returns_across_compressions(
    make_memory: MemoryFactory,
) -> None:
    """Turn after turn, through several compressions, the returned context equals a
    separate get_messages and is provider-valid."""
    memory = make_memory(config=SMALL, summarizer=FakeSummarizer())
    with SignalRecorder(memory).recording() as recorder:
        for turn in range(30):
            context = memory.add_and_get_messages("s", exchange(turn))
            assert context == memory.get_messages("s")
            assert_provider_valid(context)
            assert context[-1].text.startswith(f"Answer {turn}:")
    assert len(recorder.of("compressed")) >= 3
    assert is_summary_message(memory.get_messages("s")[0])
    assert memory.get_stats("s").total_entries == 60


def test_one_transaction_when_no_compression_follows(
    engine: Engine, make_memory: MemoryFactory
) -> None:
    """Under budget, the store and the read commit together: one transaction, one
    recorded access. A compressing turn takes the claim in the append's transaction
    and reads the context in the summary commit, then recalls in a read of its own:
    three transactions, still one access."""
    memory = make_memory(config=SMALL, summarizer=FakeSummarizer())
    memory.add_and_get_messages("s", exchange(0))
    before = memory.list_sessions()[0].access_count
    with commits(engine) as seen:
        memory.add_and_get_messages("s", exchange(1))
    assert len(seen) == 1
    assert memory.list_sessions()[0].access_count == before + 1

    turn = 2
    while memory.get_stats("s").summaries == 0:
        accesses = memory.list_sessions()[0].access_count
        with commits(engine) as seen:
            context = memory.add_and_get_messages("s", exchange(turn))
        turn += 1
    # The append with the claim, the summary commit with the read, and (summaries now
    # standing for entries out of view) the recall's read.
    assert len(seen) == 3
    assert memory.list_sessions()[0].access_count == accesses + 1
    assert context == memory.get_messages("s") and is_summary_message(context[0])


def test_a_failed_append_drops_the_claim_it_took(
    engine: Engine, make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compressing append picks the entries and takes the claim in its own
    transaction: when that transaction fails, neither its entries nor the claim
    stay, and the next turn compresses at once (no lease to wait out)."""
    memory = make_memory(config=SMALL, summarizer=FakeSummarizer())
    plan = compress_ops.plan_compression
    planned: list[Planned] = []

    def plan_then_fail(*args: object, **kwargs: object) -> Planned:
        planned.append(plan(*args, **kwargs))  # type: ignore[arg-type]
        raise sa.exc.OperationalError("INSERT", None, Exception("disk I/O error"))

    monkeypatch.setattr(write_ops, "plan_compression", plan_then_fail)
    turn = 0
    while True:
        try:
            memory.add_and_get_messages("s", exchange(turn))
        except StorageError:
            break
        turn += 1
    # The failing turn had picked entries and written its claim before it failed.
    assert len(planned) == 1 and planned[0].chosen
    assert memory.get_stats("s").total_entries == 2 * turn
    assert memory.get_stats("s").summaries == 0
    with engine.connect() as conn:
        claims = conn.execute(sa.text("SELECT claim_token FROM tiermem_session")).scalars()
        assert list(claims) == [None]
    monkeypatch.undo()
    context = memory.add_and_get_messages("s", exchange(turn))
    assert is_summary_message(context[0])
    assert memory.get_stats("s").total_entries == 2 * turn + 2


def test_all_or_nothing_and_skip_existing(make_memory: MemoryFactory) -> None:
    """A bad message stores nothing; ids already stored are skipped, as in add_messages."""
    memory = make_memory(config=SMALL)
    first = [HumanMessage("hello", id="m1"), AIMessage("hi there", id="m2")]
    assert [m.id for m in memory.add_and_get_messages("s", first)] == ["m1", "m2"]
    again = [*first, HumanMessage("and again", id="m3")]
    context = memory.add_and_get_messages("s", again, skip_existing=True)
    assert [m.id for m in context] == ["m1", "m2", "m3"]
    bad = [HumanMessage("fine"), HumanMessage(content="x", additional_kwargs={"t": object()})]
    with pytest.raises(InvalidContent):
        memory.add_and_get_messages("s", bad)
    assert memory.get_stats("s").total_entries == 3


def test_a_turn_resent_with_skip_existing_is_one_transaction(
    make_memory: MemoryFactory, engine: Engine
) -> None:
    """A turn's few messages are checked for known ids inside the append's own
    transaction, with no read transaction before it; a long resent state is checked
    first (and skipped entries cost no serializing), and both store each id once."""
    memory = make_memory(config=SMALL)
    turn = [HumanMessage("question", id="q1"), AIMessage("answer", id="a1")]
    memory.add_messages("s", turn)
    with commits(engine) as seen:
        assert memory.add_messages("s", turn, skip_existing=True) == []
    assert len(seen) == 1
    state = [HumanMessage(f"m{n}", id=f"id-{n}") for n in range(write_ops.PRECHECK_IDS + 1)]
    memory.add_messages("s", state)
    with commits(engine) as seen:
        assert memory.add_messages("s", state, skip_existing=True) == []
    assert len(seen) == 2
    assert memory.get_stats("s").total_entries == 2 + len(state)


def test_a_partly_resent_turn_appends_only_its_new_messages(make_memory: MemoryFactory) -> None:
    """The append reserves seqs for every message, then drops the ids the session
    holds (checked under its lock) and gives their seqs and tokens back: the new
    messages take the next seqs with no gap, the counters grow by them alone, and the
    access is recorded once."""
    memory = make_memory(config=MemoryConfig(auto_compress=False))
    turn = [HumanMessage("question", id="q1"), AIMessage("answer", id="a1")]
    memory.add_messages("s", turn)
    before = memory.get_stats("s")
    reads = memory.get_stats("s").access_count - before.access_count
    stored = memory.add_messages(
        "s", [*turn, HumanMessage("next question", id="q2")], skip_existing=True
    )
    assert [(entry.seq, entry.content) for entry in stored] == [(3, "next question")]
    after = memory.get_stats("s")
    assert after.total_entries == after.active_entries == 3
    assert after.total_tokens == before.total_tokens + stored[0].token_count
    assert after.access_count == before.access_count + 2 * reads + 1
    assert memory.add_messages("s", turn, skip_existing=True) == []
    assert memory.get_stats("s").total_tokens == after.total_tokens
    assert memory.add_user_message("s", "later").seq == 4


def test_resent_ids_with_nul_are_found(make_memory: MemoryFactory) -> None:
    """An id holding NUL (stored escaped, as PostgreSQL text cannot hold it) is found
    again by ``skip_existing``, in a short batch and in a long one."""
    memory = make_memory(config=SMALL)
    short = [HumanMessage("one", id="a\x00b")]
    long = [HumanMessage(f"m{n}", id=f"x\x00{n}") for n in range(write_ops.PRECHECK_IDS + 1)]
    memory.add_messages("s", short + long)
    assert memory.add_messages("s", short, skip_existing=True) == []
    assert memory.add_messages("s", long, skip_existing=True) == []
    assert memory.get_stats("s").total_entries == 1 + len(long)


def test_async_twin_matches(make_memory: MemoryFactory) -> None:
    """The async twin stores and reads the same as the sync one."""
    sync = make_memory(project="sync", config=SMALL, summarizer=FakeSummarizer())
    asyn = make_memory(project="async", config=SMALL, summarizer=FakeSummarizer())

    async def run() -> list[list[BaseMessage]]:
        return [await asyn.aadd_and_get_messages("s", exchange(t)) for t in range(12)]

    expected = [sync.add_and_get_messages("s", exchange(t)) for t in range(12)]
    got = asyncio.run(run())
    assert [[m.text for m in c] for c in got] == [[m.text for m in c] for c in expected]


def test_a_turn_that_compresses_and_merges_returns_the_final_context(
    make_memory: MemoryFactory,
) -> None:
    """When a compression is followed by a summary merge, the context read in the
    first commit is dropped: the turn returns what the merge left."""
    config = SMALL.replace(summary_share=0.05)
    memory = make_memory(config=config, summarizer=FakeSummarizer())
    with SignalRecorder(memory).recording() as recorder:
        for turn in range(30):
            context = memory.add_and_get_messages("s", exchange(turn))
            assert context == memory.get_messages("s")
            assert_provider_valid(context)
    merges = [r for r in recorder.of("compressed") if r["result"].merged_summaries]
    assert merges, "the budget was meant to force summary merges"


def test_a_summary_commit_that_fails_never_shows_its_summary(
    engine: Engine, make_memory: MemoryFactory
) -> None:
    """The context read inside the summary commit is dropped when that commit fails:
    the turn returns what is stored (no summary, every entry active)."""
    memory = make_memory(config=SMALL, summarizer=FakeSummarizer())
    attempted: list[bool] = []

    def watch(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.startswith("INSERT INTO tiermem_summary"):
            attempted.append(True)

    def fail_summary_commit(_conn: object) -> None:
        if attempted and len(attempted) == 1:
            attempted.append(True)  # fail once
            raise sa.exc.OperationalError("COMMIT", None, Exception("disk I/O error"))

    sa.event.listen(engine, "before_cursor_execute", watch)
    sa.event.listen(engine, "commit", fail_summary_commit)
    try:
        turn = 0
        while not attempted:
            context = memory.add_and_get_messages("s", exchange(turn))
            turn += 1
    finally:
        sa.event.remove(engine, "commit", fail_summary_commit)
        sa.event.remove(engine, "before_cursor_execute", watch)
    assert memory.get_stats("s").summaries == 0
    # The head message may only say how much the budget left out: no summary in it.
    assert not any(
        is_summary_message(message) and message.additional_kwargs.get(SUMMARY_MARKER)
        for message in context
    )
    assert context == memory.get_messages("s")
    assert context == memory.get_messages("s")


def test_a_context_read_that_fails_after_the_append_says_the_messages_were_stored(
    engine: Engine, make_memory: MemoryFactory
) -> None:
    """When the turn's append committed and only the read after its (failed)
    compression fails, the caller gets ContextReadFailed with the stored entries, not a
    storage error it would answer by adding the messages again."""
    memory = make_memory(config=SMALL, summarizer=FakeSummarizer(mode="raise"))
    armed: list[bool] = []

    def fail_window_read(_conn: object, _cursor: object, statement: str, *_a: object) -> None:
        if armed and "ORDER BY k1" in statement:  # the window read, not the entries read
            raise sa.exc.OperationalError(statement, None, Exception("disk I/O error"))

    memory.add_messages("s", exchange(0))
    turn = 1  # fill up to the budget: the failing turn is the one that passes it
    while memory.get_stats("s").active_tokens + memory.counter(exchange(turn)) <= 400 - 20:
        memory.add_messages("s", exchange(turn))
        turn += 1
    before = memory.get_stats("s").total_entries
    armed.append(True)
    sa.event.listen(engine, "before_cursor_execute", fail_window_read)
    try:
        with pytest.raises(ContextReadFailed) as raised:
            memory.add_and_get_messages("s", exchange(turn))
    finally:
        sa.event.remove(engine, "before_cursor_execute", fail_window_read)
    assert isinstance(raised.value.__cause__, StorageError)
    assert [e.seq for e in raised.value.entries] == [before + 1, before + 2]
    assert memory.get_stats("s").total_entries == before + 2
    assert memory.get_messages("s")[-1] == exchange(turn)[-1]
