"""``LayeredMemory``: appending, reading, facts, rules, statistics, clearing, isolation."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem.errors import EntryTooLarge, InvalidArgument, InvalidContent
from tiermem.layer_models import LayerType
from tiermem.testing import ManualClock

from ..conftest import MemoryFactory


def test_layers_is_one_object_per_scope(memory: ConversationMemory) -> None:
    """mem.layers(scope) returns the same LayeredMemory for the same scope, another for others."""
    assert memory.layers("a") is memory.layers("a")
    assert memory.layers("a") is not memory.layers("b")
    assert memory.layers().scope == "default"


@pytest.mark.parametrize("layer", ["episodic", LayerType.EPISODIC])
def test_episodic_append_and_recent(memory: ConversationMemory, layer: str) -> None:
    """Episodic items come back newest n, oldest first, with their metadata and tokens."""
    layers = memory.layers("s")
    for n in range(5):
        layers.append(layer, f"event number {n}", {"n": n})
    recent = layers.recent("episodic", 3)
    assert [item.content for item in recent] == [f"event number {n}" for n in (2, 3, 4)]
    assert [item.metadata for item in recent] == [{"n": 2}, {"n": 3}, {"n": 4}]
    assert recent[0].type is LayerType.EPISODIC and recent[0].scope == "s"
    assert recent[0].token_count == memory.counter.count_text("event number 2")
    assert layers.recent("episodic", 0) == []


def test_working_memory_is_trimmed_to_max_entries(memory: ConversationMemory) -> None:
    """Working memory keeps the newest 50 items by default, or max_working_entries."""
    layers = memory.layers("w")
    for n in range(60):
        layers.append("working", f"thought {n}")
    kept = layers.recent("working", 100)
    assert len(kept) == 50 and kept[0].content == "thought 10"
    small = memory.layers("w2", max_working_entries=3)
    for n in range(5):
        small.append("working", f"step {n}")
    assert [item.content for item in small.recent("working", 10)] == ["step 2", "step 3", "step 4"]
    small.max_working_entries = 1
    assert [item.content for item in small.recent("working", 10)] == ["step 4"]


def test_learn_upserts_and_recall_counts_access(
    memory: ConversationMemory, clock: ManualClock
) -> None:
    """learn replaces a key's value; recall returns it and records the access."""
    layers = memory.layers("facts")
    first = layers.learn("capital:fr", "Paris", {"source": "atlas"})
    clock.advance(hours=2)
    second = layers.learn("capital:fr", "Paris, France")
    assert (first.value, second.value) == ("Paris", "Paris, France")
    assert second.created_at == first.created_at and second.updated_at == clock.now
    clock.advance(hours=3)
    recalled = layers.recall("capital:fr")
    assert recalled is not None and recalled.value == "Paris, France"
    assert recalled.access_count == 2 and recalled.last_accessed == clock.now
    assert recalled.memory_tier == "active"
    assert layers.recall("capital:de") is None
    assert memory.layers("other").recall("capital:fr") is None
    assert layers.get_stats().semantic_entry_count == 1


def test_semantic_append_uses_metadata_key(memory: ConversationMemory) -> None:
    """append('semantic', value, {'key': k}) is learn(k, value); the key leaves the metadata."""
    layers = memory.layers("s")
    item = layers.append("semantic", "blue", {"key": "favourite colour", "by": "user"})
    assert item.key == "favourite colour" and item.metadata == {"by": "user"}
    recalled = layers.recall("favourite colour")
    assert recalled is not None and recalled.value == "blue"


def test_rules_are_added_and_matched(memory: ConversationMemory) -> None:
    """add_rule stores condition and action; match_rules returns the best rule first."""
    layers = memory.layers("r")
    refund = layers.add_rule("customer asks for a refund", "open a billing ticket")
    layers.add_rule("customer is angry", "apologize first")
    layers.append("procedural", "reply in French", {"condition": "message is in French"})
    rules = layers.match_rules("the customer wants a refund for order 42")
    assert rules[0].id == refund.id and rules[0].action == "open a billing ticket"
    assert rules[0].score > rules[-1].score
    assert layers.match_rules("bonjour french message", limit=1)[0].action == "reply in French"
    assert layers.match_rules("spaceships") == []


def test_persistence_across_instances(engine: Engine, make_memory: MemoryFactory) -> None:
    """A new memory on the same database sees the stored layers; working memory is per process."""
    first = make_memory(project="p").layers("scope")
    first.append("episodic", "the meeting moved to Thursday")
    first.learn("owner", "Dana")
    first.add_rule("meeting moved", "update the calendar")
    first.append("working", "scratch")
    second = make_memory(project="p").layers("scope")
    assert [item.content for item in second.recent("episodic")] == ["the meeting moved to Thursday"]
    recalled = second.recall("owner")
    assert recalled is not None and recalled.value == "Dana"
    assert second.match_rules("the meeting moved")[0].action == "update the calendar"
    assert second.search("episodic", "thursday meeting")[0].item.content.endswith("Thursday")
    assert second.recent("working") == []


def test_scopes_and_projects_are_isolated(make_memory: MemoryFactory) -> None:
    """Items of one scope or project are never seen, counted or cleared from another."""
    memory = make_memory(project="p")
    a, b = memory.layers("a"), memory.layers("b")
    other = make_memory(project="q").layers("a")
    for layers in (a, b, other):
        layers.append("episodic", "shared words about lighthouses")
        layers.learn("k", f"value of {layers.scope}")
    assert len(a.search("episodic", "lighthouses")) == 1
    assert a.clear() == 2
    assert a.search("episodic", "lighthouses") == [] and a.recall("k") is None
    assert [hit.item.scope for hit in b.search("episodic", "lighthouses")] == ["b"]
    assert b.get_stats().episodic_entry_count == 1
    assert other.get_stats().episodic_entry_count == 1


def test_stats_count_tiktoken_tokens_items_and_bytes(memory: ConversationMemory) -> None:
    """get_stats counts working tokens with the memory's encoding, items per layer and bytes."""
    layers = memory.layers("stats")
    texts = ["Tokenization isn't length/4: naïve café, 東京, \U0001f600!", "internationalization"]
    for text in texts:
        layers.append("working", text)
    layers.append("episodic", "e1")
    layers.append("episodic", "e2")
    layers.learn("k", "v")
    layers.add_rule("c", "a")
    stats = layers.get_stats()
    tokens = sum(memory.counter.count_text(text) for text in texts)
    assert stats.working_memory_tokens == tokens != sum(len(text) // 4 for text in texts)
    assert (stats.episodic_entry_count, stats.semantic_entry_count) == (2, 1)
    assert stats.procedural_rule_count == 1
    # content + "{}" metadata (+ key or condition): working, episodic, semantic, procedural
    stored = sum(len(text.encode()) + 2 for text in texts) + 2 * (2 + 2) + (1 + 2 + 1) * 2
    assert stats.total_storage_bytes == stored


def test_clear_one_layer_or_all(memory: ConversationMemory) -> None:
    """clear(type) empties one layer; clear() empties all and returns the count."""
    layers = memory.layers("c")
    layers.append("working", "w")
    layers.append("episodic", "e")
    layers.learn("k", "v")
    layers.add_rule("c", "a")
    assert layers.clear("episodic") == 1
    assert layers.recent("episodic") == [] and layers.recall("k") is not None
    assert layers.clear() == 3
    stats = layers.get_stats()
    assert stats.total_storage_bytes == 0 and stats.working_memory_tokens == 0
    assert memory.layers("never-used").clear() == 0


def test_layers_store_nul_and_marker_text_exactly(memory: ConversationMemory) -> None:
    """Layer items accept NUL as conversation entries do (and text starting with the
    escape marker): content, keys and conditions round-trip through every read, and
    searching such items works on both backends."""
    layers = memory.layers("nul")
    event = layers.append("episodic", "alpha \x00 bravo\x00")
    marked = layers.append("episodic", "\ufdd0alpha marker")
    layers.learn("key\x00one", "value \x00 charlie")
    layers.add_rule("when \x00 delta", "act\x00")
    assert event.content == "alpha \x00 bravo\x00"
    assert [item.content for item in layers.recent("episodic")] == [
        "alpha \x00 bravo\x00",
        "\ufdd0alpha marker",
    ]
    fact = layers.recall("key\x00one")
    assert fact is not None and fact.key == "key\x00one" and fact.value == "value \x00 charlie"
    assert layers.learn("key\x00one", "replaced").value == "replaced"
    again = layers.recall("key\x00one")
    assert again is not None and (again.created_at, again.value) == (fact.created_at, "replaced")
    assert layers.get_stats().semantic_entry_count == 1
    hits = layers.search("episodic", "bravo marker")
    assert {hit.item.id: hit.item.content for hit in hits} == {
        event.id: "alpha \x00 bravo\x00",
        marked.id: "\ufdd0alpha marker",
    }
    rules = layers.match_rules("delta")
    assert [(r.condition, r.action) for r in rules] == [("when \x00 delta", "act\x00")]
    assert layers.search("episodic", "\x00") == []


BAD_CALLS: list[tuple[Callable[[ConversationMemory], object], type[Exception]]] = [
    (lambda m: m.layers(" padded"), InvalidArgument),
    (lambda m: m.layers("x").append("dream", "text"), InvalidArgument),
    (lambda m: m.layers("x").append("semantic", "value"), InvalidArgument),
    (lambda m: m.layers("x").append("procedural", "action"), InvalidArgument),
    (lambda m: m.layers("x").append("episodic", 42), InvalidContent),  # type: ignore[arg-type]
    (lambda m: m.layers("x").append("episodic", "bad \ud800"), InvalidContent),
    (lambda m: m.layers("x").append("episodic", "x", ["no"]), InvalidArgument),  # type: ignore[arg-type]
    (lambda m: m.layers("x").append("episodic", "x", {"f": float("nan")}), InvalidContent),
    (lambda m: m.layers("x").learn("", "v"), InvalidContent),
    (lambda m: m.layers("x").learn("k" * 513, "v"), EntryTooLarge),
    (lambda m: m.layers("x").add_rule("  ", "a"), InvalidContent),
    (lambda m: m.layers("x").search("episodic", "q", limit=0), InvalidArgument),
    (lambda m: m.layers("x").search("episodic", None), InvalidArgument),  # type: ignore[arg-type]
    (lambda m: m.layers("x").recent("episodic", -1), InvalidArgument),
    (lambda m: m.layers("x").compact("episodic", keep_last=-1), InvalidArgument),
    (lambda m: m.layers("x", max_working_entries=0), InvalidArgument),
]


def test_bad_arguments_raise_typed_errors(memory: ConversationMemory) -> None:
    """Bad layers, keys, content, metadata and counts raise tiermem errors and store nothing."""
    for call, error in BAD_CALLS:
        with pytest.raises(error):
            call(memory)
    stats = memory.layers("x").get_stats()
    assert stats.episodic_entry_count == stats.semantic_entry_count == 0
    assert stats.procedural_rule_count == 0


def test_too_large_content_is_refused(make_memory: MemoryFactory) -> None:
    """Content longer than max_entry_chars raises EntryTooLarge."""
    from tiermem import MemoryConfig

    memory = make_memory(config=MemoryConfig(max_entry_chars=100))
    with pytest.raises(EntryTooLarge):
        memory.layers("x").append("episodic", "y" * 101)


async def test_async_twins(memory: ConversationMemory) -> None:
    """Every async method does what its sync twin does."""
    layers = memory.layers("async")
    await layers.aappend("episodic", "asynchronous aardvark")
    await layers.aappend("working", "async working note")
    assert (await layers.alearn("k", "v")).value == "v"
    recalled = await layers.arecall("k")
    assert recalled is not None and recalled.access_count == 1
    rule = await layers.aadd_rule("aardvark spotted", "take a photo")
    assert [r.id for r in await layers.amatch_rules("an aardvark was spotted")] == [rule.id]
    assert [hit.item.content for hit in await layers.asearch("episodic", "aardvark")] == [
        "asynchronous aardvark"
    ]
    assert [item.content for item in await layers.arecent("working")] == ["async working note"]
    stats = await layers.aget_stats()
    assert (stats.episodic_entry_count, stats.semantic_entry_count) == (1, 1)
    assert (await layers.acompact("semantic")).removed == 0
    assert await layers.aclear() == 4


def test_learning_one_key_many_times_keeps_one_fact(memory: ConversationMemory) -> None:
    """Twenty upserts of one key (past the driver's prepared-statement threshold) leave one
    fact holding the last value."""
    layers = memory.layers("upserts")
    for n in range(20):
        layers.learn("counter", f"value {n}")
    recalled = layers.recall("counter")
    assert recalled is not None and recalled.value == "value 19"
    assert recalled.access_count == 20
    assert layers.get_stats().semantic_entry_count == 1
