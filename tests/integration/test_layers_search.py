"""``LayeredMemory.search``: full-text ranking with recency bonus and tier boost."""

from __future__ import annotations

import logging
import threading

import pytest
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage import fts
from tiermem.layer_models import LayerType
from tiermem.layers import prune_expired_items
from tiermem.testing import ManualClock

from ..conftest import MemoryFactory
from ..unit.test_fts_query import HOSTILE
from .helpers import RETRY_LOGGER, deadlock_retries

SUBJECTS = ["the invoice", "a meeting", "the garden", "our printer", "lunch", "the roadmap"]
VERBS = ["was discussed", "got postponed", "needs review", "looked fine", "was updated"]


def _distractors(count: int) -> list[str]:
    return [
        f"Note {n}: {SUBJECTS[n % len(SUBJECTS)]} {VERBS[n % len(VERBS)]} on day {n % 28}."
        for n in range(count)
    ]


@pytest.mark.parametrize("layer", [LayerType.EPISODIC, LayerType.WORKING])
def test_relevant_item_ranks_first_among_hundreds(
    memory: ConversationMemory, layer: LayerType
) -> None:
    """The item about the query outranks hundreds of distractors that share some of its words."""
    layers = memory.layers("rank", max_working_entries=400)
    needle = "The staging deployment failed because the TLS certificate expired."
    texts = _distractors(300)
    texts.insert(137, needle)
    texts += ["The deployment of the printer driver was updated.", "A certificate of thanks."]
    for text in texts:
        layers.append(layer, text)
    hits = layers.search(layer, "why did the staging deployment fail? certificate", limit=5)
    assert hits[0].item.content == needle
    assert hits[0].score > hits[1].score
    # "why", "did" and "the" are stopwords: only the items with a content word match.
    assert len(hits) == 3


def test_semantic_search_weighs_keys(memory: ConversationMemory) -> None:
    """A fact whose key names the query outranks one that only mentions it in its value."""
    layers = memory.layers("facts")
    layers.learn("favourite database", "the user likes PostgreSQL")
    layers.learn("pets", "the user's cat is named Database Dan")
    hits = layers.search("semantic", "favourite database")
    assert [hit.item.key for hit in hits] == ["favourite database", "pets"]


def test_no_hit_is_an_empty_list(memory: ConversationMemory) -> None:
    """No match, a wordless query, an unused scope and an empty layer return []."""
    layers = memory.layers("empty")
    layers.append("episodic", "only apples here")
    layers.append("working", "only apples here")
    assert layers.search("episodic", "bananas") == []
    assert layers.search("working", "bananas") == []
    assert layers.search("episodic", "?!") == []
    assert layers.search("semantic", "apples") == []
    assert memory.layers("never").search("episodic", "apples") == []


@pytest.mark.parametrize("layer", [LayerType.EPISODIC, LayerType.WORKING])
def test_special_character_queries_are_text(memory: ConversationMemory, layer: LayerType) -> None:
    """Quotes, operators and unicode in a query are words to match, never syntax."""
    for query in HOSTILE:
        layers = memory.layers(f"special-{HOSTILE.index(query)}")
        layers.append(layer, f"stored {query} here")
        layers.append(layer, "something else entirely")
        hits = layers.search(layer, query)
        if fts.query_words(query):
            assert hits[0].item.content == f"stored {query} here", query
        else:
            assert hits == [], query


def test_score_adds_recency_bonus_and_tier_boost(
    memory: ConversationMemory, clock: ManualClock
) -> None:
    """Equal text scores 1.0 + recency (0.5 now, 0.25 at 12 h) + tier boost of the last
    access (ARCHIVED 0); an expired item is no hit at all."""
    layers = memory.layers("score")
    layers.append("episodic", "identical text")
    clock.advance(days=20)
    old = layers.append("episodic", "identical text")
    clock.advance(days=20)
    half = layers.append("episodic", "identical text")
    clock.advance(hours=12)
    fresh = layers.append("episodic", "identical text")
    hits = {hit.item.id: hit.score for hit in layers.search("episodic", "identical")}
    assert hits[fresh.id] == pytest.approx(1.0 + 0.5 + 0.3, abs=1e-3)
    assert hits[half.id] == pytest.approx(1.0 + 0.25 + 0.1, abs=1e-3)
    assert hits[old.id] == pytest.approx(1.0 + 0.0 + 0.0, abs=1e-3)
    assert list(hits) == [fresh.id, half.id, old.id]


def test_search_hits_count_as_access(memory: ConversationMemory, clock: ManualClock) -> None:
    """A hit's access count, last access and tier are updated; recent() records nothing."""
    layers = memory.layers("access")
    item = layers.append("episodic", "the quarterly report")
    other = layers.append("episodic", "unrelated")
    clock.advance(days=3)
    assert layers.recent("episodic")[0].access_count == 0
    hit = layers.search("episodic", "report")[0].item
    assert (hit.id, hit.access_count, hit.last_accessed) == (item.id, 1, clock.now)
    assert hit.memory_tier == "active"
    stored = {i.id: i for i in layers.recent("episodic")}
    assert stored[item.id].access_count == 1 and stored[other.id].access_count == 0
    clock.advance(hours=2)
    assert layers.search("episodic", "report")[0].item.access_count == 2


def test_working_search_uses_the_same_scoring(
    memory: ConversationMemory, clock: ManualClock
) -> None:
    """Working memory ranks by relevance, recency and tier, and records accesses."""
    layers = memory.layers("work")
    old = layers.append("working", "plan the sprint")
    clock.advance(hours=30)
    new = layers.append("working", "plan the sprint")
    hits = layers.search("working", "sprint")
    assert [hit.item.id for hit in hits] == [new.id, old.id]
    assert hits[0].score == pytest.approx(1.8, abs=1e-3)
    assert hits[1].score == pytest.approx(1.0, abs=1e-3)
    assert hits[1].item.access_count == 1 and hits[1].item.last_accessed == clock.now


def test_search_results_respect_the_limit(memory: ConversationMemory) -> None:
    """At most limit hits come back, best first, ties newest first."""
    layers = memory.layers("limit")
    items = [layers.append("episodic", "identical words") for _ in range(7)]
    hits = layers.search("episodic", "identical", limit=3)
    assert [hit.item.id for hit in hits] == [item.id for item in reversed(items[-3:])]


def test_index_matches_the_stored_rows_after_mixed_writes(
    memory: ConversationMemory, engine: Engine, clock: ManualClock
) -> None:
    """After appends, upserts, compaction, clears and prunes, every search returns exactly
    the items whose stored text holds a query word (and FTS5's own check passes)."""
    layers = memory.layers("mixed")
    other = memory.layers("other")
    vocabulary = ["amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor"]
    for n in range(40):
        text = " ".join(vocabulary[(n * k) % len(vocabulary)] for k in (1, 3, 5))
        layers.append("episodic", f"{n}: {text}")
        other.append("episodic", text)
        layers.learn(f"fact {n % 7}", f"{vocabulary[n % 8]} value {n}")
    layers.add_rule("amber alert", "call basil")
    layers.compact("episodic", keep_last=25)
    clock.advance(days=31)
    layers.append("episodic", "fresh garnet note")
    memory.database.run(
        lambda conn: prune_expired_items(
            conn, memory.project, memory.config.tier_policy, clock.now, limit=5
        )
    )
    other.clear("episodic")
    for layer in (LayerType.EPISODIC, LayerType.SEMANTIC, LayerType.PROCEDURAL):
        stored = layers.recent(layer, 1000)
        for word in [*vocabulary, "value", "summary", "digest"]:
            expected = {
                item.id for item in stored if word in fts.words(f"{item.key or ''} {item.content}")
            }
            found = {hit.item.id for hit in layers.search(layer, word, limit=1000)}
            assert found == expected, (layer, word)
    assert other.search("episodic", "amber") == []
    if engine.dialect.name == "sqlite":
        with engine.begin() as conn:
            for name in ("tiermem_layer_item_fts", "tiermem_entry_fts"):
                conn.exec_driver_sql(
                    f"INSERT INTO {name}({name}, rank) VALUES ('integrity-check', 1)"
                )


@pytest.mark.slow  # about ten seconds: a deadlock needs many overlapping searches to show
def test_concurrent_searches_of_the_same_items_never_deadlock(
    make_memory: MemoryFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Four workers search the same items at once; each search records an access of
    its hits in one ``UPDATE``, which locks them in id order, so no statement ever
    fails with a deadlock. (A deadlock is retried, so the log of retries shows it:
    on PostgreSQL, without the order, most runs of this length showed one.)"""
    caplog.set_level(logging.INFO, logger=RETRY_LOGGER)
    layers = make_memory().layers("shared")
    for n in range(120):
        layers.append(LayerType.EPISODIC, f"apple banana cherry note {n}")
    failures: list[BaseException] = []

    def worker(offset: int) -> None:
        searching = make_memory().layers("shared")
        try:
            for n in range(200):
                searching.search(LayerType.EPISODIC, "apple banana", limit=100 + (n + offset) % 5)
        except BaseException as error:  # reported by the test's thread
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert deadlock_retries(caplog.records) == []
