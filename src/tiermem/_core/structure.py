"""The structural rules of one session, shared by import validation and the doctor.

An import (:mod:`tiermem._ops.transfer`) and ``find_violations`` (:mod:`tiermem._storage.checks`)
must agree on what a valid session is, so both describe the session as plain
facts (:class:`EntryFacts`, :class:`SummaryFacts`: from an export, or from the
rows of a store) and run :func:`session_problems` over them. The import refuses
the first problem with its JSON path; the doctor reports every one. Checks
that only rows can fail (orphans, counters, seq allocation, tiers, claims,
deserialization) stay in :mod:`tiermem._storage.checks`.

The rules:

* summary ranges are valid (``1 <= first_seq <= last_seq <= last entry``); a parent
  is a summary of the session, of a higher level, covering its child's range;
* a level-1 summary covers entries, and exactly the unpinned entries of its range
  (an entry retired before it was compressed stays out, as a pinned one does);
  a merged summary has children and spans exactly from its first child's first
  seq to its last child's last seq;
* an entry is linked to a level-1 summary of its session, never while pinned;
* summaries with the same parent (the top-level ones too) never overlap;
* compression takes a prefix: no unpinned, current, uncompressed entry before a
  compressed one;
* tool results answer the latest earlier open call of their id (an id may be
  reused once answered, never while open; every call has one), on the same side
  of the compression boundary; an unanswered call is never compressed;
* a summary is not empty, not an error stub, shorter than what it covers, and
  created no earlier than the entries it covers.

Each pass is linear (or ``n log n``) in the number of entries and summaries, and
:func:`session_problems` yields lazily, so an import stops at the first problem.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from .tool_pairs import ToolPairs, pair_steps

__all__ = [
    "EntryFacts",
    "Problem",
    "SummaryFacts",
    "covered_counts",
    "session_problems",
    "unanswered_calls",
]

#: Texts a failed summarizer call produces instead of a summary.
ERROR_STUBS = ("error generating summary", "error:", "an error occurred")


@dataclass(frozen=True, slots=True)
class EntryFacts:
    """What the rules need of an entry.

    ``summary`` is the position of its summary in the session's summary list
    (``None`` while active; any other int is a link to no summary of the session).
    ``calls`` are the ``(id, name)`` of the tool calls it makes; ``answers`` is the
    call id a tool result answers. ``retired``: no longer current (a revision or a
    removal superseded it); a retired entry that is not compressed stays out of
    compression, as a pinned one does.
    """

    seq: int
    pinned: bool
    summary: int | None
    timestamp: datetime
    calls: tuple[tuple[str, str], ...] = ()
    answers: str | None = None
    retired: bool = False

    @property
    def held_back(self) -> bool:
        """Whether compression leaves it where it is: pinned, or retired before it
        was compressed."""
        return self.pinned or (self.retired and self.summary is None)


@dataclass(frozen=True, slots=True)
class SummaryFacts:
    """What the rules need of a summary; ``parent`` is a position like ``summary``."""

    level: int
    first_seq: int
    last_seq: int
    parent: int | None
    created_at: datetime
    content: str
    tokens: int
    original_tokens: int


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken rule.

    ``where`` holds the positions concerned in the ``kind`` list (none: the list as
    a whole; two: a pair of summaries); ``field`` names the field at fault.
    ``invariant`` is the doctor's label.
    """

    invariant: str
    kind: Literal["entries", "summaries"]
    where: tuple[int, ...]
    message: str
    field: str | None = None

    @property
    def path(self) -> str:
        """The JSON path of the problem in an export."""
        path = f"$.{self.kind}"
        if len(self.where) == 1:
            path += f"[{self.where[0]}]"
            if self.field is not None:
                path += f".{self.field}"
        return path


def _valid(index: int | None, count: int) -> bool:
    return index is not None and 0 <= index < count


def _walk_tools(entries: Sequence[EntryFacts]) -> tuple[list[Problem], ToolPairs]:
    """Pair results with calls as they were stored (:mod:`tiermem._core.tool_pairs`):
    the pairing problems in entry order, and the pairing."""
    pairs = pair_steps((tuple(call_id for call_id, _ in e.calls), e.answers) for e in entries)
    reused: dict[int, int] = {}
    for position, call_id in pairs.reused:
        if call_id:  # a call without an id is a problem already
            reused[position] = reused.get(position, 0) + 1
    problems: list[Problem] = []
    for position, entry in enumerate(entries):
        if entry.answers is not None:
            owner = pairs.owner.get(position)
            if owner is None:
                problems.append(
                    Problem("I5", "entries", (position,), "tool result without its call", "message")
                )
            elif entries[owner].summary != entry.summary:
                problems.append(
                    Problem(
                        "I5",
                        "entries",
                        (position,),
                        "tool call and result on different sides of a summary",
                        "summary",
                    )
                )
        bad = sum(1 for call_id, _ in entry.calls if not call_id) + reused.get(position, 0)
        problems += [
            Problem("I5", "entries", (position,), "missing or duplicated tool call id", "message")
        ] * bad
    return problems, pairs


def unanswered_calls(entries: Sequence[EntryFacts]) -> dict[str, str]:
    """The calls still waiting for their result: id -> tool name (``pending_calls``)."""
    open_calls = _walk_tools(entries)[1].open
    return {call_id: dict(entries[owner].calls)[call_id] for call_id, owner in open_calls.items()}


def _children(summaries: Sequence[SummaryFacts]) -> list[list[int]]:
    """Positions of each summary's children (links that point nowhere left out)."""
    children: list[list[int]] = [[] for _ in summaries]
    for position, summary in enumerate(summaries):
        parent = summary.parent
        if parent is not None and 0 <= parent < len(summaries) and parent != position:
            children[parent].append(position)
    return children


def _linked(entries: Sequence[EntryFacts], count: int) -> list[list[int]]:
    """Positions of the entries linked to each summary, in seq order."""
    linked: list[list[int]] = [[] for _ in range(count)]
    for position, entry in enumerate(entries):
        if entry.summary is not None and 0 <= entry.summary < count:
            linked[entry.summary].append(position)
    return linked


def _bottom_up(summaries: Sequence[SummaryFacts]) -> list[int]:
    """Positions ordered so that every child comes before its parent (by level)."""
    return sorted(range(len(summaries)), key=lambda position: summaries[position].level)


def covered_counts(entries: Sequence[EntryFacts], summaries: Sequence[SummaryFacts]) -> list[int]:
    """The ``entry_count`` of each summary: its entries (level 1), or its children's
    counts added up (a merge records its children's, see ``store.commit_merge``)."""
    counts = [len(linked) for linked in _linked(entries, len(summaries))]
    children = _children(summaries)
    for position in _bottom_up(summaries):
        if summaries[position].level > 1:
            counts[position] = sum(counts[child] for child in children[position])
    return counts


def session_problems(
    entries: Sequence[EntryFacts], summaries: Sequence[SummaryFacts]
) -> Iterator[Problem]:
    """Every structural problem of a session, lazily (see the module docstring).

    ``entries`` are in seq order. The order of the passes is part of the contract:
    the import reports the first problem, so the more specific rules come first.
    """
    count = len(summaries)
    children = _children(summaries)
    linked = _linked(entries, count)
    last_entry = entries[-1].seq if entries else 0

    def at(position: int, message: str, field: str | None = None, rule: str = "I2") -> Problem:
        return Problem(rule, "summaries", (position,), message, field)

    # Each summary on its own: range, parent, something to cover.
    for position, summary in enumerate(summaries):
        if not 1 <= summary.first_seq <= summary.last_seq <= last_entry:
            yield at(position, "bad seq range")
        if summary.parent is not None:
            if not _valid(summary.parent, count) or summary.parent == position:
                yield at(position, "parent index out of range", "parent")
            else:
                parent = summaries[summary.parent]
                if parent.level <= summary.level or not (
                    parent.first_seq <= summary.first_seq and summary.last_seq <= parent.last_seq
                ):
                    yield at(position, "parent must be higher and cover the child", "parent")
        if summary.level == 1 and not linked[position]:
            yield at(position, "summary covers no entry")
        elif summary.level > 1 and not children[position]:
            yield at(position, "merged summary has no children")

    # Each entry: its link, its pin, its tool calls.
    tool_problems, pairs = _walk_tools(entries)
    pairing = iter(tool_problems)
    pending = next(pairing, None)
    for position, entry in enumerate(entries):
        if entry.summary is not None:
            if not _valid(entry.summary, count):
                yield Problem(
                    "I1",
                    "entries",
                    (position,),
                    "linked to a summary not in this session",
                    "summary",
                )
            elif summaries[entry.summary].level != 1:
                yield Problem(
                    "I1",
                    "entries",
                    (position,),
                    f"linked to a merged summary (level {summaries[entry.summary].level}), "
                    "not a level-1 summary",
                    "summary",
                )
            if entry.pinned:
                yield Problem(
                    "I5", "entries", (position,), "pinned entries are never compressed", "pinned"
                )
        while pending is not None and pending.where[0] == position:
            yield pending
            pending = next(pairing, None)
    for call_id, owner in sorted(pairs.open.items(), key=lambda item: item[1]):
        if entries[owner].summary is not None:
            yield Problem(
                "I5", "entries", (), f"an unanswered tool call is compressed ({call_id!r})"
            )

    # Summaries with the same parent never overlap (nor do the top-level ones).
    siblings: dict[int | None, list[int]] = {}
    for position, summary in enumerate(summaries):
        family = summary.parent if _valid(summary.parent, count) else None
        siblings.setdefault(family, []).append(position)
    for group in siblings.values():
        group.sort(key=lambda p: (summaries[p].first_seq, summaries[p].last_seq))
        reach: int | None = None  # the sibling so far that ends last
        for position in group:
            if reach is not None and summaries[position].first_seq <= summaries[reach].last_seq:
                yield Problem("I2", "summaries", (reach, position), "summary ranges overlap")
            if reach is None or summaries[position].last_seq > summaries[reach].last_seq:
                reach = position

    # A level-1 summary links exactly the unpinned (and current, or compressed)
    # entries of its range.
    unpinned = [entry.seq for entry in entries if not entry.held_back]
    for position, summary in enumerate(summaries):
        if summary.level != 1 or not linked[position]:
            continue
        start = bisect.bisect_left(unpinned, summary.first_seq)
        end = bisect.bisect_right(unpinned, summary.last_seq)
        mine = linked[position]
        if len(mine) != end - start or any(
            entries[entry].seq != unpinned[start + offset] for offset, entry in enumerate(mine)
        ):
            yield at(position, "summary range does not match its entries")

    # Compression takes a prefix of the conversation.
    boundary = max((e.seq for e in entries if e.summary is not None), default=0)
    for entry in entries:
        if entry.seq >= boundary:
            break
        if entry.summary is None and not entry.held_back:
            yield Problem(
                "I2",
                "entries",
                (),
                f"active entry inside the compressed prefix (seq {entry.seq})",
            )

    # A merged summary spans its children; every summary is a real, shorter text,
    # created no earlier than the newest entry it covers.
    newest: list[datetime | None] = [None] * count
    for position in _bottom_up(summaries):
        times = [entries[e].timestamp for e in linked[position]] + [
            moment for child in children[position] if (moment := newest[child]) is not None
        ]
        newest[position] = max(times, default=None)
    for position, summary in enumerate(summaries):
        mine = children[position]
        if summary.level > 1 and mine:
            first = min(summaries[child].first_seq for child in mine)
            last = max(summaries[child].last_seq for child in mine)
            if (first, last) != (summary.first_seq, summary.last_seq):
                yield at(
                    position,
                    f"merged summary spans {summary.first_seq}..{summary.last_seq} but its "
                    f"children span {first}..{last}",
                )
        latest = newest[position]
        if latest is not None and summary.created_at < latest:
            yield at(position, "summary created before the entries it covers", "created_at", "I6")
        text = summary.content.lstrip(" ").lower()
        if not text:
            yield at(position, "summary is empty", "content", "I6")
        elif text.startswith(ERROR_STUBS):
            yield at(position, "summary is an error stub, not a summary", "content", "I6")
        if summary.tokens >= summary.original_tokens:
            yield at(
                position,
                f"summary is not shorter than what it covers "
                f"({summary.tokens} >= {summary.original_tokens} tokens)",
                "content",
                "I6",
            )
