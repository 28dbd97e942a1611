"""Which entries a checkpoint's new message list removes from its parent's
(:func:`tiermem._ops.revisions.removed_entries`): a removal anywhere, a trim of the
oldest, an emptied list; never the oldest messages a summary now stands for."""

from __future__ import annotations

from tiermem._ops.revisions import removed_entries

OLD: list[tuple[str | None, int | str]] = [("h0", 1), ("a0", 2), ("h1", 3), ("a1", 4)]


def _messages(*ids: str) -> list[str | None]:
    return list(ids)


def test_a_message_removed_anywhere_is_retired() -> None:
    assert removed_entries(OLD, _messages("h0", "h1", "a1")) == [2]
    assert removed_entries(OLD, _messages("h0", "a0", "h1")) == [4]  # regenerate
    assert removed_entries(OLD, _messages("h0", "a0", "h1", "a1", "h2")) == []


def test_a_trim_of_the_oldest_and_an_emptied_list_are_removals() -> None:
    assert removed_entries(OLD, _messages("h1", "a1")) == [1, 2]
    assert removed_entries(OLD, []) == [1, 2, 3, 4]


def test_the_oldest_removed_behind_a_new_first_message_are_a_compaction() -> None:
    """SummarizationMiddleware: REMOVE_ALL_MESSAGES, a summary, the messages kept."""
    assert removed_entries(OLD, _messages("summary", "h1", "a1")) == []
    # ... and a second one, which also removes the first summary.
    again: list[tuple[str | None, int | str]] = [("summary", 5), *OLD[2:]]
    assert removed_entries(again, _messages("summary-2", "a1")) == []
    # A new first message does not make a removal in the middle a compaction.
    assert removed_entries(OLD, _messages("summary", "h0", "h1", "a1")) == [2]


def test_tiermem_summary_head_keeps_its_id_and_still_compacts() -> None:
    """tiermem's own summary head (kept in the list, not an entry) may keep its id."""
    old: list[tuple[str | None, int | str]] = [("head", '{"inline": true}'), *OLD]
    new = _messages("head", "h1", "a1")
    assert removed_entries(old, new, summary_first=True) == []
    assert removed_entries(old, new) == [1, 2]  # not a summary: a trim
    assert removed_entries(old, _messages("head", "h0", "h1", "a1"), summary_first=True) == [2]


def test_messages_without_ids_are_never_taken_for_removed() -> None:
    old: list[tuple[str | None, int | str]] = [(None, 1), ("a0", 2)]
    assert removed_entries(old, ["a0"]) == []
