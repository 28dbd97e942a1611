"""``compact``: keep a layer's newest items and fold the older ones.

Working and episodic memory summarize the older items into one summary item
that takes the oldest one's place. The protocol follows conversation
compression: read the items (one short transaction), call the summarizer with
no transaction open (a yielded effect, so the async API awaits the model), then,
in a second transaction, replace the items only if they are all still there
unchanged. A failing model deletes nothing.

Without a model (none set, or it failed and ``heuristic_fallback`` is on) nothing
can shorten the items without losing them, so they are folded into a *digest*:
one item that holds every folded item's text verbatim, in order, as many items as
fit one indexed text (:data:`~tiermem._storage.fts.MAX_INDEXED_CHARS`), so a
search still finds every word. Items that do not fit stay as they are.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._compression.policy import summary_prompt
from .._storage import items as layer_store
from .._storage.fts import MAX_INDEXED_CHARS
from ..errors import InvalidArgument, SummarizationError, SummarizerOutputInvalid
from ..events import LayerCompacted
from ..layer_models import LayerCompaction, LayerItem, LayerType
from ..tiers import calculate_tier
from .embed import queue_items
from .layer_base import LayerScope, check_count, parse_layer, prepare, read, to_item, totals, write

if TYPE_CHECKING:
    from .._core.runner import Op
    from .._storage.items import NewItem
    from .._storage.rows import ItemRecord

__all__ = ["compact"]

_PREVIEW_CHARS = 8_000
_MAX_ROUNDS = 16  # summarizer calls per compact(): each folds a token-capped batch


def compact(
    scope: LayerScope, type: LayerType | str, keep_last: int, summarize_older: bool
) -> Op[LayerCompaction]:
    """Keep the newest ``keep_last`` items of a layer and fold the older ones (see
    :meth:`~tiermem.layers.LayeredMemory.compact`)."""
    layer = parse_layer(type)
    keep = check_count("keep_last", keep_last, 0)
    if not isinstance(summarize_older, bool):
        raise InvalidArgument("summarize_older must be a bool")
    if layer is LayerType.WORKING:
        return (yield from _compact_working(scope, keep, summarize_older))
    if layer is LayerType.SEMANTIC:
        return LayerCompaction(layer, removed=0, kept=(yield from _size(scope, layer)))
    if layer is LayerType.PROCEDURAL or not summarize_older:

        def dropped(count: int) -> LayerCompacted | None:
            return LayerCompacted(scope.name, layer.value, count, None) if count else None

        removed = yield from read(
            scope,
            lambda conn, pk: layer_store.drop_older(conn, pk, layer.value, keep),
            0,
            write=True,
            change=dropped,
        )
        return LayerCompaction(layer, removed=removed, kept=(yield from _size(scope, layer)))
    return (yield from _compact_episodic(scope, keep))


def _size(scope: LayerScope, layer: LayerType) -> Op[int]:
    """How many items a stored layer holds."""
    sizes = yield from totals(scope)
    return sizes.get(layer.value, (0, 0))[0]


def _compact_episodic(scope: LayerScope, keep: int) -> Op[LayerCompaction]:
    """Fold the older episodic items, one token-capped batch per summarizer call."""
    context, layer = scope.context, LayerType.EPISODIC
    budget = context.config.max_summarizer_input_tokens
    removed, summary = 0, None
    nothing: tuple[list[ItemRecord], int] = ([], 0)
    policy = context.config.tier_policy.for_layer(layer.value)
    since = layer_store.live_since(context.now(), policy, layer.value)
    for _ in range(_MAX_ROUNDS):
        batch, older = yield from read(
            scope,
            lambda conn, pk: layer_store.older_items(conn, pk, layer.value, keep, budget, since),
            nothing,
        )
        if not batch:
            break
        items = [to_item(scope.name, row) for row in batch]
        outcome = yield from _summarize(scope, layer, items)
        if outcome is None:
            break
        new, count = outcome
        batch, items = batch[:count], items[:count]
        now = context.now()
        freshest = max(item.last_accessed for item in items)
        tier = calculate_tier(freshest, now, policy)
        replace = functools.partial(
            layer_store.replace_with_summary,
            layer=layer.value,
            batch=batch,
            summary=new,
            last_accessed=freshest,
            tier=tier,
            now=now,
        )
        folded = len(batch)

        def compacted(row: ItemRecord, folded: int = folded) -> LayerCompacted:
            return LayerCompacted(scope.name, layer.value, folded, row.id)

        row = yield from write(scope, replace, compacted)
        queue_items(context, [row.id])  # its new text, embedded in the background
        summary = to_item(scope.name, row)
        removed += len(batch) - 1
        if older - len(batch) + 1 < 2:
            break
    kept = yield from _size(scope, layer)
    return LayerCompaction(layer, removed=removed, kept=kept, summary=summary)


def _compact_working(scope: LayerScope, keep: int, summarize_older: bool) -> Op[LayerCompaction]:
    """Fold (or drop) the older working items; no transaction."""
    layer, working, context = LayerType.WORKING, scope.working, scope.context
    items = working.snapshot()
    older = items[: max(len(items) - keep, 0)]
    if not summarize_older:
        removed = working.drop(item.id for item in older)
        return LayerCompaction(layer, removed=removed, kept=len(working.snapshot()))
    outcome = (yield from _summarize(scope, layer, older)) if len(older) >= 2 else None
    if outcome is None:
        return LayerCompaction(layer, removed=0, kept=len(items))
    new, count = outcome
    older = older[:count]
    now = context.now()
    freshest = max(item.last_accessed for item in older)
    tier = calculate_tier(freshest, now, context.config.tier_policy)
    meta: dict[str, Any] = json.loads(new.meta)

    def build(item_id: int) -> LayerItem:
        return LayerItem(
            id=item_id,
            scope=scope.name,
            type=layer,
            content=new.content,
            key=None,
            metadata=meta,
            token_count=new.token_count,
            created_at=older[0].created_at,
            updated_at=now,
            last_accessed=freshest,
            access_count=0,
            memory_tier=tier.value,
        )

    summary = working.replace_oldest(older, build)
    kept = len(working.snapshot())
    return LayerCompaction(layer, removed=len(older) - 1, kept=kept, summary=summary)


def _summarize(
    scope: LayerScope, layer: LayerType, items: Sequence[LayerItem]
) -> Op[tuple[NewItem, int] | None]:
    """What replaces the leading items of ``items``, and how many it covers: a summary
    of them all from the summarizer (called outside any transaction, checked to be
    shorter) or, without one, their digest (``None`` if fewer than two fit one)."""
    context = scope.context
    config, counter = context.config, context.counter
    original = sum(item.token_count for item in items)
    text: str | None = None
    if context.summarizer is not None:
        lines = [
            f"[{item.created_at:%Y-%m-%d %H:%M}] {item.content[:_PREVIEW_CHARS]}" for item in items
        ]
        prompt = summary_prompt(lines, original, config, counter)
        try:
            text = yield from context.summarize(prompt)
        except SummarizationError:
            if not config.heuristic_fallback:
                raise
    if text is None:
        count = _digest_size(items, min(MAX_INDEXED_CHARS, config.max_entry_chars))
        if count < 2:
            return None
        items = items[:count]
        text = _DIGEST_SEPARATOR.join(item.content for item in items)
        return prepare(scope, layer, None, text, _meta(items, digest=True)), count
    tokens = counter.count_text(text)
    if tokens >= original:
        raise SummarizerOutputInvalid(
            f"summary not shorter than the {layer.value} items ({tokens} >= {original} tokens)"
        )
    return prepare(scope, layer, None, text, _meta(items, digest=False)), len(items)


#: Between the folded texts of a digest.
_DIGEST_SEPARATOR = "\n"


def _digest_size(items: Sequence[LayerItem], limit: int) -> int:
    """How many of the leading ``items`` a digest of at most ``limit`` characters holds."""
    used = -len(_DIGEST_SEPARATOR)
    for count, item in enumerate(items):
        used += len(_DIGEST_SEPARATOR) + len(item.content)
        if used > limit:
            return count
    return len(items)


def _meta(items: Sequence[LayerItem], *, digest: bool) -> dict[str, Any]:
    """The metadata of what replaces ``items``: a summary, or a verbatim digest."""
    covered = sum(int(item.metadata.get("summarized_items", 1)) for item in items)
    meta: dict[str, Any] = {
        "summary": True,
        "summarized_items": covered,
        "first_created_at": items[0].created_at.isoformat(),
        "last_created_at": items[-1].created_at.isoformat(),
    }
    if digest:
        meta["digest"] = True
    return meta
