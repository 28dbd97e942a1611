"""``compact``: keep a layer's newest items and fold the older ones.

Working and episodic memory summarize the older items into one summary item
that takes the oldest one's place. The protocol follows conversation
compression: read the items (one short transaction), call the summarizer with
no transaction open (a yielded effect, so the async API awaits the model), then,
in a second transaction, replace the items only if they are all still there
unchanged. A failing model deletes nothing.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._compression.policy import fit_summary, heuristic_summary, summary_prompt
from .._storage import items as layer_store
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
    since = layer_store.live_since(context.now(), context.config.tier_policy)
    for _ in range(_MAX_ROUNDS):
        batch, older = yield from read(
            scope,
            lambda conn, pk: layer_store.older_items(conn, pk, layer.value, keep, budget, since),
            nothing,
        )
        if not batch:
            break
        items = [to_item(scope.name, row) for row in batch]
        new = yield from _summarize(scope, layer, items)
        now = context.now()
        freshest = max(item.last_accessed for item in items)
        tier = calculate_tier(freshest, now, context.config.tier_policy)
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
    if len(older) < 2:
        return LayerCompaction(layer, removed=0, kept=len(items))
    new = yield from _summarize(scope, layer, older)
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


def _summarize(scope: LayerScope, layer: LayerType, items: Sequence[LayerItem]) -> Op[NewItem]:
    """The summary of ``items`` as an item to store: from the summarizer (called
    outside any transaction) or the heuristic; checked to be shorter."""
    context = scope.context
    config, counter = context.config, context.counter
    original = sum(item.token_count for item in items)
    texts = [item.content for item in items]

    def heuristic() -> str:
        return fit_summary(
            lambda quote: heuristic_summary([], texts, quote=quote), original, config, counter
        )

    if context.summarizer is None:
        text = heuristic()
    else:
        lines = [
            f"[{item.created_at:%Y-%m-%d %H:%M}] {item.content[:_PREVIEW_CHARS]}" for item in items
        ]
        prompt = summary_prompt(lines, original, config, counter)
        try:
            text = yield from context.summarize(prompt)
        except SummarizationError:
            if not config.heuristic_fallback:
                raise
            text = heuristic()
    tokens = counter.count_text(text)
    if tokens >= original:
        raise SummarizerOutputInvalid(
            f"summary not shorter than the {layer.value} items ({tokens} >= {original} tokens)"
        )
    covered = sum(int(item.metadata.get("summarized_items", 1)) for item in items)
    meta = {
        "summary": True,
        "summarized_items": covered,
        "first_created_at": items[0].created_at.isoformat(),
        "last_created_at": items[-1].created_at.isoformat(),
    }
    return prepare(scope, layer, None, text, meta)
