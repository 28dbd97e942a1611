"""A turn answered from a kept context is checked by the session's version, not by a
message id that may be out of order or absent (issue 29, items 21 and 22)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tiermem import ContextMessages, MemoryConfig
from tiermem.errors import InvalidArgument, StaleContext
from tiermem.testing import FakeSummarizer, ManualClock

from ..conftest import MemoryFactory
from ..integration.helpers import canonical_dump

SMALL = MemoryConfig(max_tokens=400, max_entries=40, recent_window=4, min_entries_to_compress=2)


def parallel_tools(n: int) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """A question with an answer calling two tools, and their results in reverse
    call order (as parallel tools finish)."""
    calls = [
        {"name": "weather", "args": {"city": f"city {n}"}, "id": f"t{n}:c1"},
        {"name": "clock", "args": {"zone": f"zone {n}"}, "id": f"t{n}:c2"},
    ]
    asked = [
        HumanMessage(f"Question {n}: weather and time in city {n}?", id=f"t{n}:user"),
        AIMessage("", tool_calls=calls, id=f"t{n}:ai"),
    ]
    results: list[BaseMessage] = [
        ToolMessage(f"noon in zone {n}", tool_call_id=f"t{n}:c2", id=f"t{n}:r2"),
        ToolMessage(f"sunny in city {n}", tool_call_id=f"t{n}:c1", id=f"t{n}:r1"),
    ]
    return asked, results


def test_the_documented_loop_stores_turns_after_out_of_order_tool_results(
    make_memory: MemoryFactory,
) -> None:
    """With tool results stored out of call order the context does not end with the
    newest entry, so the id check can never pass; the version check stores every
    turn, through compressions, and each returned context equals get_messages."""
    memory = make_memory(config=SMALL, summarizer=FakeSummarizer())
    context = memory.add_and_get_messages("s", [HumanMessage("hello", id="t0:user")])
    for n in range(1, 12):
        asked, results = parallel_tools(n)
        context = memory.add_and_get_messages("s", asked, expected_version=context.version)
        context = memory.add_and_get_messages("s", results, expected_version=context.version)
        newest = memory.get_entries("s")[-1].message.id
        assert context[-1].id != newest  # rendered in call order, stored otherwise
        with pytest.raises(StaleContext):
            memory.add_and_get_messages(
                "s", [AIMessage("x", id=f"t{n}:stale")], expected_last_id=context[-1].id
            )
        answer = AIMessage(f"Answer {n}: sunny, noon.", id=f"t{n}:final")
        context = memory.add_and_get_messages("s", [answer], expected_version=context.version)
        assert isinstance(context, ContextMessages)
        assert context == memory.get_messages("s")
        assert context.version == memory.get_messages("s").version
    assert len(memory.get_entries("s")) == 1 + 11 * 5
    assert memory.get_summaries("s"), "the turns never compressed"


def test_an_append_without_ids_makes_the_version_stale(make_memory: MemoryFactory) -> None:
    """Another writer's append of a message without id (or of context) after the read
    makes the turn stale: StaleContext, and nothing is written."""
    memory = make_memory()
    memory.add_and_get_messages("s", [HumanMessage("first question")])
    context = memory.get_messages("s")
    other = make_memory()
    other.add_context("s", "the user moved to Oslo", source="profile")
    before = canonical_dump(memory.engine)
    with pytest.raises(StaleContext):
        memory.add_and_get_messages("s", [AIMessage("an answer")], expected_version=context.version)
    assert canonical_dump(memory.engine) == before
    fresh = memory.get_messages("s")
    stored = memory.add_and_get_messages(
        "s", [AIMessage("an answer")], expected_version=fresh.version
    )
    assert stored[-1].content == "an answer"


def test_a_cleared_and_refilled_session_is_stale(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """Clearing a session and appending as many messages again changes its version
    (also where SQLite gives the new session the cleared one's row)."""
    memory = make_memory()
    context = memory.add_and_get_messages("s", [HumanMessage("one"), AIMessage("two")])
    memory.clear_session("s")
    clock.advance(seconds=1)
    memory.add_messages("s", [HumanMessage("uno"), AIMessage("dos")])
    with pytest.raises(StaleContext):
        memory.add_and_get_messages("s", [HumanMessage("three")], expected_version=context.version)
    assert [m.content for m in memory.get_messages("s")] == ["uno", "dos"]


def test_a_new_session_version_expects_an_empty_session(make_memory: MemoryFactory) -> None:
    """The version read from a session that does not exist lets the first turn in,
    and is stale once another writer started the session."""
    memory = make_memory()
    empty = memory.get_messages("new")
    assert empty == [] and isinstance(empty, ContextMessages)
    memory.add_and_get_messages("new", [HumanMessage("hi")], expected_version=empty.version)
    with pytest.raises(StaleContext):
        memory.add_and_get_messages(
            "new", [HumanMessage("hi again")], expected_version=empty.version
        )


def test_expected_last_id_none_never_lets_a_stale_turn_through(
    make_memory: MemoryFactory,
) -> None:
    """expected_last_id=None (the context ended with a message without id) no longer
    turns the check off: on a session with messages it is InvalidArgument and
    nothing is written; on an empty session it passes."""
    memory = make_memory()
    memory.add_context("s", "the user prefers short answers", source="profile")
    context = memory.get_messages("s")
    assert context[-1].id is None
    memory.add_messages("s", [HumanMessage("written meanwhile by another worker")])
    before = canonical_dump(memory.engine)
    with pytest.raises(InvalidArgument, match="expected_version"):
        memory.add_and_get_messages("s", [AIMessage("stale")], expected_last_id=context[-1].id)
    assert canonical_dump(memory.engine) == before
    stored = memory.add_and_get_messages("empty", [HumanMessage("hi")], expected_last_id=None)
    assert [m.content for m in stored] == ["hi"]


@pytest.mark.parametrize(
    "bad", ["", "7", "1:2", "a:b:c", "1:-2:3", "1:2:3:4", 7, b"1:2:3", "1" * 30 + ":1:1"]
)
def test_a_bad_version_is_refused(make_memory: MemoryFactory, bad: object) -> None:
    """A version that no read returned is InvalidArgument; nothing is written."""
    memory = make_memory()
    with pytest.raises(InvalidArgument):
        memory.add_and_get_messages("s", [HumanMessage("hi")], expected_version=bad)  # type: ignore[arg-type]
    assert memory.list_sessions() == []


def test_version_and_last_id_together_are_refused(make_memory: MemoryFactory) -> None:
    """Both expectations at once are InvalidArgument."""
    memory = make_memory()
    with pytest.raises(InvalidArgument):
        memory.add_and_get_messages(
            "s", [HumanMessage("hi")], expected_version="0:0", expected_last_id="x"
        )


async def test_the_async_twin_checks_the_version(make_memory: MemoryFactory) -> None:
    """aadd_and_get_messages checks expected_version like its sync twin."""
    memory = make_memory()
    context = await memory.aadd_and_get_messages("s", [HumanMessage("one")])
    await memory.aadd_messages("s", [AIMessage("from another worker")])
    with pytest.raises(StaleContext):
        await memory.aadd_and_get_messages(
            "s", [AIMessage("stale")], expected_version=context.version
        )
    fresh = await memory.aget_messages("s")
    await memory.aadd_and_get_messages("s", [AIMessage("fresh")], expected_version=fresh.version)
