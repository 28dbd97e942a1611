"""The recalled block's pure parts: choosing lines within a budget, and leaving out
the lines of entries a context already shows."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from tiermem._core.recall_block import Line, choose, without

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
