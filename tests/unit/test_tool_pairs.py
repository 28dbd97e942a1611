"""The one walk pairing tool results with the calls they answer (tiermem._core.tool_pairs)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tiermem._core.tool_pairs import group_units, message_step, pair_messages, pair_steps


def call(*ids: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "search", "args": {}, "id": i} for i in ids])


def result(call_id: str) -> ToolMessage:
    return ToolMessage(content="ok", tool_call_id=call_id, name="search")


def test_results_following_their_call_in_order_answer_it() -> None:
    """Each result answers the call before it; nothing is left open or orphaned."""
    pairs = pair_messages([HumanMessage("go"), call("a", "b"), result("a"), result("b")])
    assert pairs.calls == {1: ["a", "b"]}
    assert pairs.answers == {1: [2, 3]}
    assert pairs.owner == {2: 1, 3: 1}
    assert pairs.open == {}
    assert pairs.orphans == []
    assert pairs.complete(1)


def test_results_out_of_call_order_answer_their_own_calls() -> None:
    """Results are listed in the order they come, whatever the order of the calls."""
    pairs = pair_messages([call("a", "b", "c"), result("c"), result("a"), result("b")])
    assert pairs.answers == {0: [1, 2, 3]}
    assert pairs.owner == {1: 0, 2: 0, 3: 0}
    assert pairs.complete(0)


def test_a_call_without_its_result_stays_open() -> None:
    """The unanswered call is open, named by id and by the message making it."""
    pairs = pair_messages([call("a", "b"), result("b"), HumanMessage("meanwhile")])
    assert pairs.open == {"a": 0}
    assert pairs.unanswered() == {0: ["a"]}
    assert pairs.answers == {0: [1]}
    assert not pairs.complete(0)


def test_a_result_answering_no_open_call_is_an_orphan() -> None:
    """A result with no call of its id, or whose call was answered already, pairs
    with nothing."""
    pairs = pair_messages([result("zz"), call("a"), result("a"), result("a")])
    assert pairs.orphans == [0, 3]
    assert pairs.owner == {2: 1}
    assert pairs.answers == {1: [2]}


def test_several_calls_in_one_message_pair_with_their_own_results() -> None:
    """Two messages' calls interleaved with results: each result finds its call."""
    messages: list[BaseMessage] = [
        call("a", "b"),
        result("b"),
        call("c", "d"),
        result("d"),
        result("a"),
        result("c"),
    ]
    pairs = pair_messages(messages)
    assert pairs.calls == {0: ["a", "b"], 2: ["c", "d"]}
    assert pairs.answers == {0: [1, 4], 2: [3, 5]}
    assert pairs.open == {}


def test_a_result_arriving_after_other_messages_still_answers_its_call() -> None:
    """Pairing follows ids, not adjacency; the budget's units follow adjacency, so the
    late result is a unit of its own."""
    messages: list[BaseMessage] = [
        call("a"),
        HumanMessage("meanwhile"),
        AIMessage("still waiting"),
        result("a"),
    ]
    pairs = pair_messages(messages)
    assert pairs.owner == {3: 0}
    assert pairs.open == {}
    assert group_units(messages) == [[0], [1], [2], [3]]


def test_an_id_reused_after_its_answer_starts_a_new_pair() -> None:
    """A result answers the latest earlier open call of its id."""
    pairs = pair_messages([call("a"), result("a"), call("a"), result("a")])
    assert pairs.answers == {0: [1], 2: [3]}
    assert pairs.reused == []


def test_a_call_reusing_an_open_id_takes_it_over() -> None:
    """The earlier call is never answered; the later one gets the result."""
    pairs = pair_messages([call("a"), call("a"), result("a")])
    assert pairs.reused == [(1, "a")]
    assert pairs.owner == {2: 1}
    assert not pairs.complete(0) and pairs.complete(1)


def test_a_call_without_an_id_takes_no_part() -> None:
    """No result can answer a call without an id, so the walk leaves it out."""
    message = AIMessage(
        content="",
        tool_calls=[
            {"name": "search", "args": {}, "id": None},
            {"name": "search", "args": {}, "id": "a"},
        ],
    )
    assert message_step(message) == (["a"], None)
    assert pair_messages([message, result("a")]).answers == {0: [1]}


def test_the_walk_runs_over_plain_steps() -> None:
    """Callers without messages (the structural rules) walk ``(calls, answers)`` steps."""
    pairs = pair_steps([(("a", "b"), None), ((), "b"), ((), "x")])
    assert pairs.owner == {1: 0}
    assert pairs.open == {"a": 0}
    assert pairs.orphans == [2]


def test_units_keep_a_call_with_the_results_that_directly_follow_it() -> None:
    """An orphan ends the run: the call's later results are units of their own."""
    messages: list[BaseMessage] = [call("a", "b"), result("a"), result("zz"), result("b")]
    assert group_units(messages) == [[0, 1], [2], [3]]
    assert group_units([call("a", "b"), result("b"), result("a")]) == [[0, 1, 2]]
