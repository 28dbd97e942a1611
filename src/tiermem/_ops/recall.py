"""Recall: the kept originals most relevant to a query, brought into a context.

A read (``get_messages``, ``add_and_get_messages``, ``get_context_for_llm``) recalls
with its ``query`` (by default the newest human message) when ``recall_share`` is
set and something is out of view: compressed entries of the session or, with
``recall_scope="project"``, the project's other sessions. The search is the
memory's own (BM25, fused with similarity when the memory has embeddings), run in
a read of its own after the context's; a plain read of a session with nothing
compressed does no search at all. What is chosen is shown as one block at the
current-turn boundary (see :mod:`tiermem._core.recall_block`), within the budget.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import NamedTuple

from langchain_core.messages import BaseMessage, HumanMessage

from .._core.budget import OMITTED_MARKER, WindowEntry, head_upper_bound
from .._core.clock import as_utc
from .._core.context import MemoryContext
from .._core.messages import SUMMARY_MARKER, render_text
from .._core.recall_block import (
    RECALL_HEADER,
    Line,
    Recalled,
    before_question,
    block_budget,
    choose,
    insert_block,
    item_line,
    line,
    newest_question,
    recall_message,
    recall_section,
    without,
)
from .._core.render import (
    SUMMARY_HEADER,
    SummaryText,
    is_summary_message,
    provider_order,
    render_messages,
)
from .._core.runner import Op
from .._storage import fts, items, store
from .._storage.database import Connection
from .._storage.ranking import rank
from .._storage.search import search_entries
from .._storage.windows import with_windows
from ..errors import InvalidArgument, TiermemError
from ..tokens import TokenCounter
from ..types import MemoryEntry, MemorySummary, SearchHit
from .embed import query_vector

__all__ = [
    "check_query",
    "clear_word_cache",
    "find",
    "recall",
    "Rendered",
    "render_recalled",
    "text_with_recall",
]

logger = logging.getLogger(__name__)

#: Hits read for a recall, at most and at least: the block rarely holds more.
_POOL = 40
_MIN_POOL = 8
#: Renders the text context within a number of tokens.
TextRenderer = Callable[[list[MemorySummary], list[MemoryEntry], int], str]


def _wanted(ctx: MemoryContext, summaries: object, query: str | None, over: bool) -> bool:
    """Whether a read recalls at all: a share is set, the query is not ``""``, and
    something may be out of view (a summary stands for compressed entries; ``over``:
    the context is cut to its budget)."""
    config = ctx.config
    return bool(
        config.recall_share
        and query != ""
        and (summaries or over or config.recall_scope == "project" or config.recall_layers)
    )


def check_query(query: object) -> str | None:
    """``query`` if it is a str or ``None``.

    Raises:
        InvalidArgument: for anything else.
    """
    if query is not None and not isinstance(query, str):
        raise InvalidArgument(f"query must be a str or None, got {type(query).__name__}")
    return query


def recall(
    ctx: MemoryContext,
    session_id: str,
    query: str | None,
    summaries: list[SummaryText] | list[MemorySummary],
    entries: list[WindowEntry],
    budget: int,
    left_out: int = 0,
    whole_left_out: int | None = None,
    view: Sequence[BaseMessage] = (),
) -> Op[Recalled | None]:
    """The entries to recall for ``query`` (default: the newest human message of
    ``entries``) within ``budget`` tokens of block, or ``None`` when there is
    nothing to search or no room. Out of view are the compressed entries, the
    ``left_out`` oldest active ones the budget cut from the context and, with
    ``recall_scope="project"``, other sessions' entries. Only hits with news for
    ``view``, the context the block goes with, are recalled (see :func:`news`).
    With ``whole_left_out`` (what the context at the whole budget leaves out),
    ``visible`` holds the recalled entries that context shows."""
    config = ctx.config
    text = newest_question(entries) if query is None else query
    project_wide = config.recall_scope == "project"
    wider = project_wide or bool(config.recall_layers)
    if budget <= 0 or not text.strip() or not (summaries or wider or left_out):
        return None
    vector = yield from query_vector(ctx, text)
    now = ctx.now()
    scope = None if project_wide else session_id
    counter = ctx.counter
    limit = max(budget // 2, 16)
    pool = _pool(budget, entries, config.recall_window)

    def work(conn: Connection) -> Recalled:
        words = key_words(text)
        cut = store.left_out_until(conn, ctx.project, session_id, left_out)
        whole_cut = cut
        if whole_left_out is not None and whole_left_out != left_out:
            whole_cut = store.left_out_until(conn, ctx.project, session_id, whole_left_out)
        # Only what is out of view is searched: the pool is not spent on the window.
        last_id = (
            None if project_wide else store.out_of_view_last_id(conn, ctx.project, session_id, cut)
        )
        hits: list[SearchHit] = []
        if project_wide or last_id is not None:
            # Across a project the search also finds what is in view (the question
            # itself, first of all): no floor there, which would be set by it.
            floor = 0.0 if project_wide else RELEVANCE_FLOOR
            hits = find(ctx, conn, words, scope, pool, vector, now, last_id, True, floor)
            hits = [hit for hit in hits if _out_of_view(hit.entry, session_id, cut)]
            hits = news(hits, text, view)
            if config.recall_window:
                hits = with_windows(conn, ctx.project, hits, config.recall_window)
        entry_lines = _candidates(hits, session_id, cut, limit, ctx)
        item_lines = layer_lines(ctx, conn, words, pool, now, limit)
        chosen = choose(
            _interleaved(entry_lines, item_lines),
            budget,
            lambda lines: counter.count_message(HumanMessage("\n".join([RECALL_HEADER, *lines]))),
        )
        if whole_cut == cut:
            return chosen
        shown = {
            entry.id
            for hit in hits
            for entry in (hit.window or (hit.entry,))
            if not _out_of_view(entry, session_id, whole_cut)
        }
        visible = frozenset(shown.intersection(chosen.ids))
        return Recalled(chosen.ids, chosen.lines, chosen.items, chosen.keys, visible)

    on_pg = ctx.database.is_postgres
    try:
        recalled = yield from ctx.transact(work, write=not on_pg, snapshot=on_pg)
    except TiermemError as exc:
        # The context is whole without it: a failed recall costs the block only
        # (and never fails a turn whose append committed).
        logger.warning(
            "recall for %r failed; the context has no recalled block: %s", session_id, exc
        )
        return None
    return recalled if recalled.ids or recalled.items else None


def _pool(budget: int, entries: list[WindowEntry], window: int) -> int:
    """How many hits to read: twice the lines a block of ``budget`` tokens holds at the
    window's mean entry size, each hit bringing ``window`` neighbours either side.
    Reading (and rendering) only these keeps a recall's cost flat in the block's
    size rather than the search's."""
    mean = sum(entry.tokens for entry in entries) / len(entries) if entries else 1
    lines = budget / max(mean + _LINE_FRAME, 1)
    return min(max(int(2 * lines / (1 + 2 * max(window, 0))) + 1, _MIN_POOL), _POOL)


def find(
    ctx: MemoryContext,
    conn: Connection,
    query: str,
    session_id: str | None,
    limit: int,
    vector: bytes | None,
    now: datetime,
    last_id: int | None = None,
    local: bool = False,
    floor: float = 0.0,
) -> list[SearchHit]:
    """The memory's search in ``conn``: BM25, fused with similarity to ``vector`` when
    the memory has embeddings; entries pending indexing are indexed first. With
    ``session_id``, ``last_id`` bounds the session's entries searched and ``local``
    scores words by the session's own statistics (SQLite; see
    :func:`tiermem._storage.search.session_candidates`), in a fusion's words half
    too: recall asks for both, while ``search()`` keeps the index-wide BM25 its
    documented figures were measured with.
    ``floor``: only the hits scoring at least that share of the best one's."""
    fts.flush(conn)  # SQLite indexes entries in batches: see every committed one
    policy, embedder = ctx.config.tier_policy, ctx.embedder
    if vector is None or embedder is None:
        return search_entries(
            conn,
            ctx.project,
            query,
            session_id,
            limit,
            now=now,
            policy=policy,
            last_id=last_id,
            local=local,
            floor=floor,
        )
    from .._storage import hybrid  # numpy: only for a memory with embeddings

    dense = hybrid.DenseQuery(vector, embedder.model, embedder.weight, embedder.cache)
    return hybrid.search_entries(
        conn,
        ctx.project,
        query,
        session_id,
        limit,
        now=now,
        policy=policy,
        dense_query=dense,
        last_id=last_id,
        local=local,
        floor=floor,
    )


#: Within a session a recall keeps only the hits scoring at least this share of the
#: best hit's (BM25, or its fusion with similarity): a hit sharing a common word or
#: two with the question is no reason to add a block.
RELEVANCE_FLOOR = 0.25
#: A hit at least this share of whose words the query holds restates it (the same
#: message said again, or its template with other names and numbers).
RESTATED = 0.5
#: A hit is like a shown message when the message holds the words of the question the
#: hit holds and the two overlap at least this much (the share of the words of either
#: that both hold, their Jaccard similarity): the model already has its like.
ALIKE = 0.4


def news(hits: list[SearchHit], query: str, view: Sequence[BaseMessage]) -> list[SearchHit]:
    """The hits that tell the model something it does not have: those neither
    restating ``query`` (:data:`RESTATED`) nor like a message that ``view`` (the
    context before the question, as cut for the block) shows word for word
    (:data:`ALIKE`; its summary does not count). A block of what the context
    already says would cost its tokens, and a prompt cache the prefix after its
    place, for next to nothing."""
    if not hits:
        return hits
    said = _words(query)
    shown: list[frozenset[str]] = []
    holding: dict[str, list[int]] = {}  # word -> the shown messages holding it
    for message in view:
        if is_summary_message(message):
            continue  # a summary is what loses the details recall brings back
        words = _words(render_text(message))
        for word in words:
            holding.setdefault(word, []).append(len(shown))
        shown.append(words)
    out = []
    for hit in hits:
        words = _words(render_text(hit.entry.message))
        if words and len(words & said) >= RESTATED * len(words):
            continue
        common: dict[int, int] = {}
        for word in words:
            for index in holding.get(word, ()):
                common[index] = common.get(index, 0) + 1
        answers = words & said  # what the hit has for the question
        if not any(
            both >= ALIKE * (len(words) + len(shown[index]) - both) and answers <= shown[index]
            for index, both in common.items()
        ):
            out.append(hit)
    return out


#: Texts up to this long have their words cached (see :func:`_words`).
_CACHED_TEXT = 4_000


def _words(text: str) -> frozenset[str]:
    """The searchable words of ``text``. The messages a context shows are compared
    with the hits of every read while they stay in view: those of a message's size
    are tokenized once."""
    if len(text) > _CACHED_TEXT:
        return frozenset(fts.query_words(text, None))
    return _cached_words(text)


@functools.lru_cache(maxsize=2_048)
def _cached_words(text: str) -> frozenset[str]:
    return frozenset(fts.query_words(text, None))


def clear_word_cache() -> None:
    """Drop every cached word set (``forget``: they are made of stored text)."""
    _cached_words.cache_clear()


#: Words of a question a recall searches for: its longest ones (the rarer, mostly).
_RECALL_WORDS = 12


def key_words(text: str) -> str:
    """The words of ``text`` a recall searches for: its :data:`_RECALL_WORDS` longest
    searchable words, in their order. A long message (a pasted page) then costs a
    recall what a question does, and short common words do not dilute the search."""
    words = fts.query_words(text, None)
    if len(words) <= _RECALL_WORDS:
        return " ".join(words)
    longest = set(sorted(words, key=len, reverse=True)[:_RECALL_WORDS])
    return " ".join(word for word in words if word in longest)


#: What a line adds to its entry's text: the time and the speaker, about.
_LINE_FRAME = 10


def _line_estimate(entry: MemoryEntry, text: str, limit: int, counter: TokenCounter) -> int:
    """A line's tokens from its entry's stored count (counting only a cut line)."""
    if entry.token_count > limit:
        return counter.count_text(text)
    return entry.token_count + _LINE_FRAME


def layer_lines(
    ctx: MemoryContext, conn: Connection, words: str, pool: int, now: datetime, limit: int
) -> list[Line]:
    """The items of the layers ``recall_layers`` names, in the scope
    ``recall_layer_scope``, best matching ``words``, as lines, best first. Their
    search records no access (a read of the memory's own, as an entry's recall)."""
    config = ctx.config
    found = fts.query_words(words)
    if not config.recall_layers or not found:
        return []
    pk = items.get_scope_pk(conn, ctx.project, config.recall_layer_scope)
    if pk is None:
        return []
    policy, out = config.tier_policy, []
    for layer in config.recall_layers:
        since = items.live_since(now, policy, layer)
        candidates = items.item_candidates(conn, pk, layer, found, since)
        ranked = rank(candidates, now, policy.for_layer(layer), pool)
        rows = {row.id: row for row in items.read_items(conn, [c.id for c, _ in ranked])}
        for candidate, _ in ranked:
            row = rows.get(candidate.id)
            if row is None:
                continue
            text = item_line(layer, row.item_key, row.content, row.created_at, limit, ctx.counter)
            when = (as_utc(row.created_at), layer, row.id)
            out.append(Line(text, ctx.counter.count_text(text), layer, row.id, when))
    return out


def _interleaved(first: list[Line], second: list[Line]) -> list[Line]:
    """The two rankings taken in turn, so that each gets its best into the block."""
    out: list[Line] = []
    for pair in itertools.zip_longest(first, second):
        out.extend(line for line in pair if line is not None)
    return out


def _out_of_view(entry: MemoryEntry, session_id: str, cut: int) -> bool:
    """Compressed, left out by the budget (unpinned, at or before seq ``cut``), or of
    another session."""
    return (
        entry.compressed
        or entry.session_id != session_id
        or (not entry.pinned and entry.seq <= cut)
    )


def _candidates(
    hits: list[SearchHit], session_id: str, cut: int, limit: int, ctx: MemoryContext
) -> list[Line]:
    """Each hit, then its neighbours out of view, best hit first, each entry once and
    each text once: a message said again word for word by the same speaker (a
    greeting, a template of an answer) is recalled where it ranks first, the room
    of its repeats left to other hits."""
    seen: set[int] = set()
    said: set[tuple[str, str]] = set()
    out: list[Line] = []
    for hit in hits:
        around = sorted(hit.window, key=lambda e: abs(e.seq - hit.entry.seq)) or [hit.entry]
        for entry in around:
            if entry.id in seen or not _out_of_view(entry, session_id, cut):
                continue
            seen.add(entry.id)
            if (entry.role, entry.content) in said:
                continue
            said.add((entry.role, entry.content))
            text = line(entry, session_id, limit, ctx.counter)
            tokens = _line_estimate(entry, text, limit, ctx.counter)
            when = (as_utc(entry.timestamp), entry.session_id, entry.seq)
            out.append(Line(text, tokens, "entry", entry.id, when))
    return out


class Rendered(NamedTuple):
    """A context as a model gets it; how many tokens its recalled block lacked beside
    the whole context (0: the block fitted there, or there was none), and how far
    under ``max_tokens`` that whole context was. A block that lacked room cut the
    context: a turn near the budget compresses instead
    (:func:`tiermem._ops.compress.make_room`)."""

    messages: list[BaseMessage]
    lacking: int = 0
    headroom: int = 0


def render_recalled(
    ctx: MemoryContext,
    session_id: str,
    window: store.MessageWindow,
    query: str | None,
) -> Op[Rendered]:
    """``window`` as the context a model gets, with the recalled block (if any) just
    before the newest human message, all within ``max_tokens``."""
    summaries, entries = window.summaries, window.messages
    config, counter = ctx.config, ctx.counter
    whole = head_upper_bound(counter, SUMMARY_HEADER + "\n", [s.token_count for s in summaries])
    over = whole + sum(entry.tokens for entry in entries) > config.max_tokens
    if not _wanted(ctx, summaries, query, over):  # the plain read, unchanged
        return Rendered(
            render_messages(summaries, entries, max_tokens=config.max_tokens, counter=counter)
        )
    stored = {id(entry.message) for entry in entries}
    stand_ins = [
        message
        for message in provider_order([entry.message for entry in entries])
        if id(message) not in stored
    ]
    extra = sum(counter.count_message(message) for message in stand_ins)
    budget = block_budget(
        config.max_tokens,
        config.recall_share,
        counter,
        [s.token_count for s in summaries],
        entries,
        SUMMARY_HEADER + "\n",
        extra,
    )
    # Where the block goes beside the context at the whole budget, the context's
    # prefix is the one a read without a block has: a prompt cache serves it whether
    # or not the reads before and after this one have a block. Only a block that does
    # not fit there cuts the context, by the block's budget rather than its size
    # (which changes with every question), so that the cut stays put.
    shown = render_messages(
        summaries, entries, max_tokens=config.max_tokens - budget, counter=counter
    )
    # The stored counts bound the context when nothing is cut; where it fits the
    # budget less the block's, the context at the whole budget is the same one.
    size = whole + sum(entry.tokens for entry in entries) + extra
    plain = (
        shown
        if size <= config.max_tokens - budget
        else render_messages(summaries, entries, max_tokens=config.max_tokens, counter=counter)
    )
    marked = bool(shown) and OMITTED_MARKER in shown[0].additional_kwargs
    if not marked and _hides_more(shown, plain):  # the block's room would cost the note
        return Rendered(plain)
    left_out = shown[0].additional_kwargs.get(OMITTED_MARKER, 0) if marked else 0
    whole_left_out = plain[0].additional_kwargs.get(OMITTED_MARKER, 0) if plain else 0
    recalled = yield from recall(
        ctx,
        session_id,
        query,
        summaries,
        entries,
        budget,
        left_out,
        whole_left_out,
        before_question(shown),
    )
    if recalled is None:
        return Rendered(plain)
    beside = without(recalled, recalled.visible)  # what the whole context shows anyway
    if not (beside.ids or beside.items):
        return Rendered(plain)
    block = recall_message(beside)
    if size > config.max_tokens:
        size = counter.count_messages(plain)
    lacking = size + counter.count_message(block) - config.max_tokens
    if lacking <= 0:
        return Rendered(insert_block(plain, block))
    cut = insert_block(shown, recall_message(recalled))
    return Rendered(cut, lacking, config.max_tokens - size)


def _hides_more(shown: list[BaseMessage], plain: list[BaseMessage]) -> bool:
    """Whether a context cut for a block, with no note on what was left out, leaves
    out something the whole budget shows: the note gave way with it."""
    return len(shown) < len(plain) or (
        bool(plain) and SUMMARY_MARKER in plain[0].additional_kwargs and shown[:1] != plain[:1]
    )


def text_with_recall(
    ctx: MemoryContext,
    session_id: str,
    summaries: list[MemorySummary],
    entries: list[MemoryEntry],
    query: str | None,
    render: TextRenderer,
) -> Op[str]:
    """The text context with a recalled section at its end, within ``max_tokens``."""
    config, counter = ctx.config, ctx.counter
    if not _wanted(ctx, summaries, query, over=False):  # the plain read, unchanged
        return render(summaries, entries, config.max_tokens)
    window = [WindowEntry(e.message, e.token_count, e.pinned) for e in entries]
    summary_tokens = [s.token_count for s in summaries]
    budget = block_budget(
        config.max_tokens, config.recall_share, counter, summary_tokens, window, ""
    )
    view = before_question([entry.message for entry in window])
    recalled = yield from recall(ctx, session_id, query, summaries, window, budget, view=view)
    if recalled is None:
        return render(summaries, entries, config.max_tokens)
    section = recall_section(recalled.lines)
    rest = config.max_tokens - counter.count_text(section) - 1
    for margin in (0, 8, 32):  # joining may tokenize a little differently: recount
        whole = render(summaries, entries, rest - margin) + "\n\n" + section
        if counter.count_text(whole) <= config.max_tokens:
            return whole
    return render(summaries, entries, config.max_tokens)
