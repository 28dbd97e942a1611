"""``add_and_get_messages(..., expected_last_id=...)``: a turn answered from an earlier
context is stored only if no other writer appended since, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from tiermem import MemoryConfig
from tiermem.errors import InvalidArgument, StaleContext
from tiermem.testing import FakeSummarizer, SignalRecorder

from ..conftest import MemoryFactory
from .helpers import canonical_dump

SMALL = MemoryConfig(max_tokens=400, max_entries=40, recent_window=4, min_entries_to_compress=2)


def turn(n: int, tag: str = "") -> list[BaseMessage]:
    return [
        HumanMessage(f"Question {n}{tag}: what about subject {n}?", id=f"t{n}{tag}:user"),
        AIMessage(f"Answer {n}{tag}: subject {n} has parts.", id=f"t{n}{tag}:ai"),
    ]


def test_turns_chained_on_their_contexts_are_stored(make_memory: MemoryFactory) -> None:
    """Each turn expects the last message of the context the previous call returned;
    through compressions every turn is stored and the context equals get_messages."""
    memory = make_memory(config=SMALL, summarizer=FakeSummarizer())
    context = memory.add_and_get_messages("s", turn(0))
    for n in range(1, 25):
        context = memory.add_and_get_messages("s", turn(n), expected_last_id=context[-1].id)
        assert context == memory.get_messages("s")
    assert len(memory.get_entries("s")) == 50
    assert memory.get_summaries("s"), "the turns never compressed"


def test_an_append_by_another_writer_makes_the_context_stale(make_memory: MemoryFactory) -> None:
    """After another writer's append, a turn expecting the older last message raises
    StaleContext, writes nothing (no row, no signal, no event) and leaves the session
    as the other writer left it."""
    memory = make_memory()
    context = memory.add_and_get_messages("s", turn(0))
    other = make_memory()
    other.add_messages("s", turn(1, "b"))
    before = canonical_dump(memory.engine)
    with SignalRecorder(memory).recording() as recorder, pytest.raises(StaleContext) as raised:
        memory.add_and_get_messages("s", turn(1), expected_last_id=context[-1].id)
    assert "t1b:ai" in str(raised.value) and "t0:ai" in str(raised.value)
    assert canonical_dump(memory.engine) == before
    assert recorder.events == []
    fresh = memory.get_messages("s")
    assert fresh[-1].id == "t1b:ai"
    stored = memory.add_and_get_messages("s", turn(2), expected_last_id=fresh[-1].id)
    assert [m.id for m in stored[-2:]] == ["t2:user", "t2:ai"]


def test_a_cleared_or_unknown_session_is_stale(make_memory: MemoryFactory) -> None:
    """A cleared session no longer ends with the expected message, and an unknown
    one has none: both raise StaleContext, and neither session is created."""
    memory = make_memory()
    context = memory.add_and_get_messages("s", turn(0))
    memory.clear_session("s")
    for session in ("s", "never-seen"):
        with pytest.raises(StaleContext):
            memory.add_and_get_messages(session, turn(1), expected_last_id=context[-1].id)
    assert memory.list_sessions() == []


def test_a_resent_stored_turn_passes_whatever_it_expects(make_memory: MemoryFactory) -> None:
    """With skip_existing, resending a turn that is stored whole appends nothing, so
    it is not checked: a retry after a lost answer gets the context back. A turn half
    new is checked."""
    memory = make_memory()
    first = memory.add_and_get_messages("s", turn(0))
    after = memory.add_and_get_messages("s", turn(1), expected_last_id=first[-1].id)
    again = memory.add_and_get_messages(
        "s", turn(1), skip_existing=True, expected_last_id=first[-1].id
    )
    assert again == after
    half = [turn(1)[0], AIMessage("a different answer", id="t1:ai-2")]
    with pytest.raises(StaleContext):
        memory.add_and_get_messages("s", half, skip_existing=True, expected_last_id=first[-1].id)
    assert len(memory.get_entries("s")) == 4


def test_of_two_writers_expecting_the_same_message_one_wins(make_memory: MemoryFactory) -> None:
    """Two writers (threads, their own memories) that read the same context and
    append at once: exactly one turn is stored, the other raises StaleContext."""
    seed = make_memory()
    context = seed.add_and_get_messages("s", turn(0))
    memories = [make_memory(), make_memory()]
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def answer(index: int) -> None:
        start.wait()
        try:
            memories[index].add_and_get_messages(
                "s", turn(1, f"w{index}"), expected_last_id=context[-1].id
            )
            outcomes.append("stored")
        except StaleContext:
            outcomes.append("stale")

    threads = [threading.Thread(target=answer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["stale", "stored"]
    assert len(seed.get_entries("s")) == 4


@pytest.mark.parametrize("bad", ["", 7, b"t0:ai"])
def test_a_bad_expected_id_is_refused(make_memory: MemoryFactory, bad: object) -> None:
    """An expected id that is not a non-empty str is InvalidArgument; nothing written."""
    memory = make_memory()
    with pytest.raises(InvalidArgument, match="expected_last_id"):
        memory.add_and_get_messages("s", turn(0), expected_last_id=bad)  # type: ignore[arg-type]
    assert memory.list_sessions() == []


async def test_the_async_twin_checks_the_same(make_memory: MemoryFactory) -> None:
    """``aadd_and_get_messages`` stores a chained turn and refuses a stale one."""
    memory = make_memory()
    context = await memory.aadd_and_get_messages("s", turn(0))
    context = await memory.aadd_and_get_messages("s", turn(1), expected_last_id=context[-1].id)
    assert context[-1].id == "t1:ai"
    with pytest.raises(StaleContext):
        await memory.aadd_and_get_messages("s", turn(2), expected_last_id="t0:ai")
    assert len(await memory.aget_entries("s")) == 4
