"""The recalled block's pure parts: its place (before the newest human message),
choosing lines within a budget, and leaving out the lines of entries a context
already shows."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from tiermem._core.messages import SUMMARY_MARKER
from tiermem._core.recall_block import Line, before_question, choose, insert_block, without

WHEN = datetime(2026, 1, 1, tzinfo=UTC)
LATER = WHEN + timedelta(hours=1)


def _cost(lines: Sequence[str]) -> int:
    return 10 + sum(len(line.split()) + 1 for line in lines)


def test_without_leaves_out_the_lines_of_the_entries_named_and_keeps_the_rest() -> None:
    """Entry lines named are left out with their ids; item lines and the time order stay."""
    lines = [
        Line("[a] user: the bakery is Pastelaria Rosa", 8, "entry", 7, (WHEN, "s", 3)),
        Line("[b] (semantic memory) sister: Ana", 6, "semantic", 7, (WHEN, "semantic", 7)),
        Line("[c] user: Ana moved to Lisbon", 6, "entry", 9, (LATER, "s", 5)),
    ]
    recalled = choose(lines, 100, _cost)
    assert recalled.ids == [7, 9] and recalled.items == (7,)
    kept = without(recalled, frozenset({7}))
    assert kept.ids == [9]
    assert kept.items == (7,)  # an item's id is not an entry's
    assert kept.lines == [lines[1].text, lines[2].text]
    assert kept.keys == (("semantic", 7), ("entry", 9))
    assert without(recalled, frozenset()) == recalled


def test_the_question_is_the_newest_human_message_tiermem_did_not_write() -> None:
    """The block goes before the newest human message; the view a hit is compared
    with ends there. A summary in the user role is tiermem's, not the question."""
    summary = HumanMessage("summary", additional_kwargs={SUMMARY_MARKER: [1]})
    ask, answer, again = HumanMessage("first"), AIMessage("reply"), HumanMessage("second")
    block = SystemMessage("recalled")
    assert before_question([summary, ask, answer, again]) == [summary, ask, answer]
    assert insert_block([summary, ask, answer, again], block) == [
        summary,
        ask,
        answer,
        block,
        again,
    ]
    assert before_question([summary, answer]) == [summary, answer]  # no question
    assert insert_block([summary, answer], block) == [summary, answer, block]
