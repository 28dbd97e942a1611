"""``compact``: keep a layer's newest items and fold the older ones.

Working and episodic memory summarize the older items into one summary item
that takes the oldest one's place. The protocol follows conversation
compression: read the items (one short transaction), call the summarizer
with no transaction open (the memory's ``Summarize`` request, so the async
API awaits the model), then, in a second transaction, replace the items only
if they are all still there unchanged. A failing model deletes nothing.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection, RowMapping

from .._compression.policy import fit_summary, heuristic_summary, summary_prompt
from .._core.runner import Op, Summarize
from .._storage import items as layer_store
from .._storage.items import NewItem
from ..errors import InvalidArgument, SummarizationError, SummarizerOutputInvalid
from ..layer_models import LayerCompaction, LayerItem, LayerType
from ..tiers import MemoryTier, calculate_tier
from .layer_base import LayerBase, check_count, parse_layer, to_item

__all__ = ["CompactionMixin"]

_PREVIEW_CHARS = 8_000
_MAX_ROUNDS = 16  # summarizer calls per compact(): each folds a token-capped batch


class CompactionMixin(LayerBase):
    """The ``compact`` half of ``LayeredMemory``."""

    def compact(
        self, type: LayerType | str, keep_last: int = 10, summarize_older: bool = True
    ) -> LayerCompaction:
        """Keep the newest ``keep_last`` items of a layer and fold the older ones.

        Working and episodic memory summarize the older items into one summary
        item (through the memory's summarizer, or the heuristic summary when
        none is set) that takes the oldest one's place; with
        ``summarize_older=False`` the older items are dropped. Procedural
        memory keeps the newest ``keep_last`` rules. Semantic memory is left
        alone (facts are replaced by key, never summarized). At most
        ``max_summarizer_input_tokens`` go to one summarizer call; larger
        backlogs are folded in several calls.

        The model is called outside any transaction, and the items are replaced
        only if they are unchanged when it answers: if it fails, nothing is
        deleted.

        Raises:
            SummarizationError: the summarizer failed (and no heuristic fallback
                is configured) or its summary is not shorter than the items.
            CompressionConflict: the items changed while the summarizer ran.
        """
        return self._memory._run(self._op_compact(type, keep_last, summarize_older))

    async def acompact(
        self, type: LayerType | str, keep_last: int = 10, summarize_older: bool = True
    ) -> LayerCompaction:
        """Async :meth:`compact`."""
        return await self._memory._arun(self._op_compact(type, keep_last, summarize_older))

    def _op_compact(
        self, type: LayerType | str, keep_last: int, summarize_older: bool
    ) -> Op[LayerCompaction]:
        layer = parse_layer(type)
        keep = check_count("keep_last", keep_last, 0)
        if not isinstance(summarize_older, bool):
            raise InvalidArgument("summarize_older must be a bool")
        if layer is LayerType.WORKING:
            return (yield from self._compact_working(keep, summarize_older))
        if layer is LayerType.SEMANTIC:
            return LayerCompaction(layer, removed=0, kept=self._size(layer))
        if layer is LayerType.PROCEDURAL or not summarize_older:
            removed = self._read(
                lambda conn, pk: layer_store.drop_older(conn, pk, layer.value, keep), 0, write=True
            )
            return LayerCompaction(layer, removed=removed, kept=self._size(layer))
        return (yield from self._compact_episodic(keep))

    def _size(self, layer: LayerType) -> int:
        return self._totals().get(layer.value, (0, 0))[0]

    def _compact_episodic(self, keep: int) -> Op[LayerCompaction]:
        layer, budget = LayerType.EPISODIC, self._memory.config.max_summarizer_input_tokens
        removed, summary = 0, None
        nothing: tuple[list[RowMapping], int] = ([], 0)
        since = layer_store.live_since(self._memory.now(), self._memory.config.tier_policy)
        for _ in range(_MAX_ROUNDS):
            batch, older = self._read(
                lambda conn, pk: layer_store.older_items(
                    conn, pk, layer.value, keep, budget, since
                ),
                nothing,
            )
            if not batch:
                break
            items = [to_item(self.scope, row) for row in batch]
            new = yield from self._summarize(layer, items)
            now = self._memory.now()
            freshest = max(item.last_accessed for item in items)
            tier = calculate_tier(freshest, now, self._memory.config.tier_policy)
            replace = functools.partial(
                _replace, layer=layer, batch=batch, new=new, accessed=freshest, tier=tier, now=now
            )
            row = self._write(replace)
            summary = to_item(self.scope, row)
            removed += len(batch) - 1
            if older - len(batch) + 1 < 2:
                break
        return LayerCompaction(layer, removed=removed, kept=self._size(layer), summary=summary)

    def _compact_working(self, keep: int, summarize_older: bool) -> Op[LayerCompaction]:
        layer = LayerType.WORKING
        items = self._working.snapshot()
        older = items[: max(len(items) - keep, 0)]
        if not summarize_older:
            removed = self._working.drop(item.id for item in older)
            return LayerCompaction(layer, removed=removed, kept=len(self._working.snapshot()))
        if len(older) < 2:
            return LayerCompaction(layer, removed=0, kept=len(items))
        new = yield from self._summarize(layer, older)
        now = self._memory.now()
        freshest = max(item.last_accessed for item in older)
        tier = calculate_tier(freshest, now, self._memory.config.tier_policy)
        meta: dict[str, Any] = json.loads(new.meta)

        def build(item_id: int) -> LayerItem:
            return LayerItem(
                id=item_id,
                scope=self.scope,
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

        summary = self._working.replace_oldest(older, build)
        kept = len(self._working.snapshot())
        return LayerCompaction(layer, removed=len(older) - 1, kept=kept, summary=summary)

    def _summarize(self, layer: LayerType, items: Sequence[LayerItem]) -> Op[NewItem]:
        """The summary of ``items`` as an item to store: from the summarizer (called
        outside any transaction) or the heuristic; checked to be shorter."""
        config = self._memory.config
        original = sum(item.token_count for item in items)
        texts = [item.content for item in items]
        counter = self._memory.counter

        def heuristic() -> str:
            return fit_summary(
                lambda quote: heuristic_summary([], texts, quote=quote), original, config, counter
            )

        if self._memory._summarizer is None:
            text = heuristic()
        else:
            lines = [
                f"[{item.created_at:%Y-%m-%d %H:%M}] {item.content[:_PREVIEW_CHARS]}"
                for item in items
            ]
            prompt = summary_prompt(lines, original, config, self._memory.counter)
            try:
                text = yield Summarize(prompt)
            except SummarizationError:
                if not config.heuristic_fallback:
                    raise
                text = heuristic()
        tokens = self._memory.counter.count_text(text)
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
        return self._prepare(layer, None, text, meta)


def _replace(
    conn: Connection,
    pk: int,
    *,
    layer: LayerType,
    batch: Sequence[RowMapping],
    new: NewItem,
    accessed: datetime,
    tier: MemoryTier,
    now: datetime,
) -> RowMapping:
    return layer_store.replace_with_summary(conn, pk, layer.value, batch, new, accessed, tier, now)
