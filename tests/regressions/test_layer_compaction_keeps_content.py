"""Layer compaction without a chat model keeps every folded item's text (issue 29, item 1)."""

from __future__ import annotations

import pytest

from tiermem import MemoryConfig
from tiermem.layer_models import LayerType
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory

TRIPS = [
    "User flew to Paris on May 1",
    "User took the train to Oslo",
    "User booked a hotel in Kyoto",
]


@pytest.mark.parametrize("layer", [LayerType.EPISODIC, LayerType.WORKING])
def test_compaction_without_a_model_keeps_every_text(
    make_memory: MemoryFactory, layer: LayerType
) -> None:
    """Without a summarizer the folded items become one digest that holds each text
    verbatim, and a search still finds every one of them."""
    layers = make_memory().layers("x")
    for trip in TRIPS:
        layers.append(layer, trip)
    result = layers.compact(layer, keep_last=0)
    assert result.summary is not None and result.removed == 2
    assert result.summary.content == "\n".join(TRIPS)
    assert result.summary.metadata["digest"] is True
    assert result.summary.metadata["summarized_items"] == 3
    assert [item.content for item in layers.recent(layer, 10)] == ["\n".join(TRIPS)]
    for word in ("Paris", "Oslo", "Kyoto"):
        hits = layers.search(layer, word)
        assert [hit.item.id for hit in hits] == [result.summary.id]


def test_a_failing_model_with_fallback_folds_into_a_digest(make_memory: MemoryFactory) -> None:
    """With heuristic_fallback, a failing summarizer leaves a verbatim digest, not a stub."""
    memory = make_memory(
        config=MemoryConfig(heuristic_fallback=True),
        summarizer=FakeSummarizer(mode="raise", error=ConnectionError("model down")),
    )
    layers = memory.layers("f")
    for trip in TRIPS:
        layers.append("episodic", trip)
    result = layers.compact("episodic", keep_last=1)
    assert result.summary is not None
    assert result.summary.content == "\n".join(TRIPS[:2])
    assert [hit.item.id for hit in layers.search("episodic", "Paris")] == [result.summary.id]


def test_items_a_digest_cannot_hold_stay_as_they_are(make_memory: MemoryFactory) -> None:
    """Items too long to share one indexed text with their neighbours are not folded."""
    big = "word " * 12_000  # 60,000 characters: two of them exceed one indexed text
    layers = make_memory().layers("b")
    first = layers.append("episodic", big + "alpha")
    second = layers.append("episodic", big + "omega")
    result = layers.compact("episodic", keep_last=0)
    assert (result.removed, result.kept, result.summary) == (0, 2, None)
    assert [item.id for item in layers.recent("episodic", 10)] == [first.id, second.id]
