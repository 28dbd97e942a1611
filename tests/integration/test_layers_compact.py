"""``LayeredMemory.compact``: summaries through the memory's summarizer, failure safety."""

from __future__ import annotations

import pytest

from tiermem import ConversationMemory, MemoryConfig
from tiermem.errors import CompressionConflict, SummarizerFailed, SummarizerOutputInvalid
from tiermem.layer_models import LayerItem, LayerType
from tiermem.layers import LayeredMemory
from tiermem.testing import FakeSummarizer, SummarizerMode

from ..conftest import MemoryFactory

EVENT = "Event {n}: the team reviewed ticket {n} about the billing export and closed it."


def _fill(layers: LayeredMemory, layer: LayerType, count: int) -> list[LayerItem]:
    return [layers.append(layer, EVENT.format(n=n)) for n in range(count)]


def _contents(layers: LayeredMemory, layer: LayerType) -> list[str]:
    return [item.content for item in layers.recent(layer, 1000)]


@pytest.mark.parametrize("layer", [LayerType.EPISODIC, LayerType.WORKING])
def test_compact_keeps_the_last_n_and_summarizes_the_rest(
    make_memory: MemoryFactory, layer: LayerType
) -> None:
    """The newest keep_last stay; the older become one summary item in the oldest's place."""
    summarizer = FakeSummarizer(digest_words=8)
    layers = make_memory(summarizer=summarizer).layers("c")
    items = _fill(layers, layer, 20)
    result = layers.compact(layer, keep_last=5)
    assert (result.type, result.removed, result.kept) == (layer, 14, 6)
    assert result.summary is not None
    assert result.summary.content.startswith("Digest of 15 lines")
    assert result.summary.metadata["summary"] is True
    assert result.summary.metadata["summarized_items"] == 15
    assert result.summary.created_at == items[0].created_at
    kept = layers.recent(layer, 100)
    assert [item.content for item in kept[1:]] == [item.content for item in items[-5:]]
    assert kept[0].content == result.summary.content
    assert len(summarizer.calls) == 1 and "ticket 0 " in summarizer.calls[0]
    assert layers.search(layer, "digest")[0].item.content == result.summary.content


def test_heuristic_summary_without_a_summarizer(make_memory: MemoryFactory) -> None:
    """With no summarizer configured the seed's heuristic summary is used."""
    layers = make_memory().layers("h")
    _fill(layers, LayerType.EPISODIC, 12)
    result = layers.compact("episodic", keep_last=2)
    assert result.summary is not None and result.removed == 9
    assert "Event 0:" in result.summary.content and "summary" not in result.summary.content


@pytest.mark.parametrize("layer", [LayerType.EPISODIC, LayerType.WORKING])
def test_a_failing_model_deletes_nothing(make_memory: MemoryFactory, layer: LayerType) -> None:
    """A summarizer that raises leaves every item in place and raises SummarizerFailed."""
    summarizer = FakeSummarizer(mode="raise", error=ConnectionError("model down"))
    layers = make_memory(summarizer=summarizer).layers("f")
    _fill(layers, layer, 8)
    before = layers.recent(layer, 100)
    with pytest.raises(SummarizerFailed) as info:
        layers.compact(layer, keep_last=2)
    assert isinstance(info.value.__cause__, ConnectionError)
    assert layers.recent(layer, 100) == before


@pytest.mark.parametrize("mode", ["echo_x2", "empty", "error_stub", "tool_call"])
def test_invalid_model_output_deletes_nothing(
    make_memory: MemoryFactory, mode: SummarizerMode
) -> None:
    """A summary that is empty, an error text, a tool call or not shorter changes nothing."""
    layers = make_memory(summarizer=FakeSummarizer(mode=mode)).layers("v")
    _fill(layers, LayerType.EPISODIC, 8)
    before = _contents(layers, LayerType.EPISODIC)
    with pytest.raises(SummarizerOutputInvalid):
        layers.compact("episodic", keep_last=2)
    assert _contents(layers, LayerType.EPISODIC) == before


def test_heuristic_fallback_replaces_a_failing_model(make_memory: MemoryFactory) -> None:
    """With heuristic_fallback the heuristic summary stands in for a failing model."""
    memory = make_memory(
        config=MemoryConfig(heuristic_fallback=True),
        summarizer=FakeSummarizer(mode="raise"),
    )
    layers = memory.layers("fb")
    _fill(layers, LayerType.EPISODIC, 6)
    result = layers.compact("episodic", keep_last=1)
    assert result.summary is not None
    assert result.summary.content.startswith("Event ")


def test_model_runs_outside_any_transaction(make_memory: MemoryFactory) -> None:
    """While the model runs, the same scope can be written (no lock is held)."""
    holder: list[LayeredMemory] = []

    def summarizer(prompt: str) -> str:
        holder[0].append("episodic", "written while the model was thinking")
        return "Short digest of the billing export tickets."

    layers = make_memory(summarizer=summarizer).layers("tx")
    holder.append(layers)
    _fill(layers, LayerType.EPISODIC, 6)
    result = layers.compact("episodic", keep_last=2)
    assert result.removed == 3
    assert _contents(layers, LayerType.EPISODIC)[-1] == "written while the model was thinking"


def test_items_changed_meanwhile_is_a_conflict(make_memory: MemoryFactory) -> None:
    """If the items are gone when the model answers, nothing is written."""
    holder: list[LayeredMemory] = []

    def summarizer(prompt: str) -> str:
        holder[0].clear("episodic")
        holder[0].append("episodic", "a fresh start")
        return "Short digest."

    layers = make_memory(summarizer=summarizer).layers("race")
    holder.append(layers)
    _fill(layers, LayerType.EPISODIC, 6)
    with pytest.raises(CompressionConflict):
        layers.compact("episodic", keep_last=2)
    assert _contents(layers, LayerType.EPISODIC) == ["a fresh start"]


def test_working_memory_changed_meanwhile_is_a_conflict(make_memory: MemoryFactory) -> None:
    """Working items trimmed while the model runs make compact raise and change nothing."""
    holder: list[LayeredMemory] = []

    def summarizer(prompt: str) -> str:
        holder[0].append("working", "pushes the oldest out")
        return "Short digest."

    layers = make_memory(summarizer=summarizer).layers("wrace", max_working_entries=6)
    holder.append(layers)
    _fill(layers, LayerType.WORKING, 6)
    with pytest.raises(CompressionConflict):
        layers.compact("working", keep_last=2)
    assert len(layers.recent("working", 100)) == 6


def test_large_backlogs_fold_in_several_calls(make_memory: MemoryFactory) -> None:
    """A backlog above max_summarizer_input_tokens is folded batch by batch into one summary."""
    summarizer = FakeSummarizer(digest_words=4)
    memory = make_memory(
        config=MemoryConfig(max_summarizer_input_tokens=120), summarizer=summarizer
    )
    layers = memory.layers("big")
    _fill(layers, LayerType.EPISODIC, 30)
    result = layers.compact("episodic", keep_last=3)
    assert len(summarizer.calls) > 1
    assert result.summary is not None and result.summary.metadata["summarized_items"] == 27
    assert (result.removed, result.kept) == (26, 4)


def test_dropping_and_rule_and_fact_compaction(memory: ConversationMemory) -> None:
    """summarize_older=False drops the older items; rules keep the last N; facts stay."""
    layers = memory.layers("drop")
    _fill(layers, LayerType.EPISODIC, 5)
    _fill(layers, LayerType.WORKING, 5)
    for n in range(6):
        layers.add_rule(f"condition {n}", f"action {n}")
        layers.learn(f"key {n}", f"value {n}")
    dropped = layers.compact("episodic", keep_last=2, summarize_older=False)
    assert (dropped.removed, dropped.kept, dropped.summary) == (3, 2, None)
    assert layers.compact("working", keep_last=1, summarize_older=False).removed == 4
    rules = layers.compact("procedural", keep_last=4)
    assert (rules.removed, rules.kept) == (2, 4)
    assert [rule.action for rule in layers.match_rules("condition", limit=10)][-1] == "action 2"
    facts = layers.compact("semantic", keep_last=0)
    assert (facts.removed, facts.kept) == (0, 6)
    assert layers.compact("episodic", keep_last=10).removed == 0
    assert layers.compact("procedural", keep_last=0).kept == 0


async def test_async_compact_awaits_the_model(make_memory: MemoryFactory) -> None:
    """acompact summarizes through the model's async path."""
    summarizer = FakeSummarizer()
    layers = make_memory(summarizer=summarizer).layers("a")
    for n in range(6):
        await layers.aappend("episodic", EVENT.format(n=n))
    result = await layers.acompact("episodic", keep_last=2)
    assert result.summary is not None and len(summarizer.calls) == 1
    assert result.kept == 3


def test_a_summary_keeps_the_models_nul(make_memory: MemoryFactory) -> None:
    """A layer summary holding NUL is stored and read back exactly, as an entry's is."""
    layers = make_memory(summarizer=lambda prompt: "billing \x00 digest").layers("n")
    _fill(layers, LayerType.EPISODIC, 6)
    result = layers.compact("episodic", keep_last=1)
    assert result.summary is not None and result.summary.content == "billing \x00 digest"
    assert _contents(layers, LayerType.EPISODIC)[0] == "billing \x00 digest"
