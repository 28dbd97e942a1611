"""Layer items with embeddings: stored items embedded after their write, dense
similarity fused with the layer's lexical ranking, backfill, model change, and
vectors that follow their items."""

from __future__ import annotations

import asyncio
import threading

import pytest
import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding

from tests.conftest import MemoryFactory
from tiermem import ConversationMemory, MemoryConfig, TierPolicy
from tiermem._core.dense import encode_all
from tiermem._storage.item_vectors import store_item_vectors, to_embed_items
from tiermem._storage.items import NewItem, upsert_fact
from tiermem.errors import EmbeddingFailed
from tiermem.layers import LayeredMemory
from tiermem.testing import ManualClock
from tiermem.tiers import DEFAULT_POLICY, STORED_LAYERS

from .test_search_embeddings import BlockedEmbeddings, BrokenEmbeddings, ConceptEmbeddings


def _vectors(memory: ConversationMemory) -> list[tuple[int, str, bytes]]:
    """(item id, model, vector) of every stored layer item vector."""
    memory.database.ensure_schema()  # working memory alone never opened it
    with memory.database.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT item_id, model, vector FROM tiermem_layer_item_vector"))
        return sorted((int(row[0]), str(row[1]), bytes(row[2])) for row in rows)


def _drain(memory: ConversationMemory) -> None:
    embedder = memory.context.embedder
    assert embedder is not None
    embedder.queue.drain()


def _store(layers: LayeredMemory) -> None:
    """Episodic events, facts and rules, each about one concept, among fillers."""
    layers.append("episodic", "We adopted a beagle last spring.")
    layers.append("episodic", "I finally sold my old sedan.")
    layers.append("episodic", "Tonight we cook supper for six people.")
    for n in range(10):
        layers.append("episodic", f"Filler note number {n} about the weather.")
    layers.learn("pet", "a beagle named Rex")
    layers.learn("ride", "a blue sedan")
    layers.add_rule("the user mentions their puppy", "suggest the vet's number")
    layers.add_rule("the user mentions their automobile", "suggest the garage")


def test_an_item_is_found_by_meaning_alone(make_memory: MemoryFactory) -> None:
    """'canine' shares no word with 'beagle' or 'puppy', yet search and match_rules
    rank those items first; without embeddings the same queries find nothing."""
    memory = make_memory(embeddings=ConceptEmbeddings())
    layers = memory.layers("u")
    _store(layers)
    _drain(memory)
    assert len(_vectors(memory)) == 17
    hits = layers.search("episodic", "which canine do they have?", limit=3)
    assert hits[0].item.content == "We adopted a beagle last spring."
    assert layers.search("semantic", "vehicle")[0].item.key == "ride"
    rules = layers.match_rules("my canine is ill")
    assert rules[0].action == "suggest the vet's number"
    assert hits[0].item.access_count == 1  # a hit is an access, as a word match is
    plain = make_memory().layers("u")
    assert plain.search("episodic", "which canine do they have?") == []
    assert plain.match_rules("my canine is ill") == []


def test_words_and_meaning_are_fused(make_memory: MemoryFactory) -> None:
    """An item matching both the words and the meaning outranks one matching either."""
    memory = make_memory(embeddings=ConceptEmbeddings())
    layers = memory.layers("u")
    layers.append("episodic", "The vehicle inspection is due.")  # meaning only
    layers.append("episodic", "My car inspection is due.")  # words and meaning
    layers.append("episodic", "The car wash loyalty card expired.")  # words only: "car"
    _drain(memory)
    hits = layers.search("episodic", "car inspection", limit=3)
    assert hits[0].item.content == "My car inspection is due."
    assert {hit.item.content for hit in hits} >= {"The vehicle inspection is due."}


def test_working_memory_stays_lexical(make_memory: MemoryFactory) -> None:
    """Working items live in the process: found by their words, never embedded."""
    memory = make_memory(embeddings=ConceptEmbeddings())
    layers = memory.layers("u")
    layers.append("working", "We adopted a beagle last spring.")
    _drain(memory)
    assert _vectors(memory) == []
    assert layers.search("working", "canine") == []
    assert [hit.item.content for hit in layers.search("working", "beagle")] == [
        "We adopted a beagle last spring."
    ]


def test_writes_do_not_wait_for_the_model(make_memory: MemoryFactory) -> None:
    """A blocked model holds up no write; the item is found by words meanwhile and
    embedded once the model answers."""
    model = BlockedEmbeddings()
    memory = make_memory(embeddings=model)
    layers = memory.layers("u")
    item = layers.append("episodic", "The beagle chewed the sofa.")
    assert _vectors(memory) == []
    assert [hit.item.id for hit in layers.search("episodic", "sofa")] == [item.id]
    model.release.set()
    _drain(memory)
    assert [row[0] for row in _vectors(memory)] == [item.id]


def test_a_failing_model_fails_no_write(make_memory: MemoryFactory) -> None:
    """Every write commits, search falls back to words, and the backfill raises a
    typed error without storing anything."""
    memory = make_memory(embeddings=BrokenEmbeddings())
    layers = memory.layers("u")
    _store(layers)
    _drain(memory)
    assert layers.search("episodic", "sofa beagle")[0].item.content.startswith("We adopted")
    assert layers.recall("pet") is not None
    assert layers.match_rules("puppy")[0].action == "suggest the vet's number"
    with pytest.raises(EmbeddingFailed, match="model offline"):
        memory.embed_missing()
    assert _vectors(memory) == []


def test_backfill_embeds_items_stored_without_embeddings(make_memory: MemoryFactory) -> None:
    """Items stored by a memory without embeddings are embedded by embed_missing
    (with the entries), then found by meaning; a second backfill has nothing to do."""
    plain = make_memory()
    _store(plain.layers("u"))
    plain.layers("other").learn("pet", "a puppy")
    plain.add_user_message("s", "an entry too")
    memory = make_memory(embeddings=ConceptEmbeddings())
    assert memory.embed_missing() == 19  # 18 items, 1 entry
    assert memory.layers("u").search("episodic", "automobile")[0].item.content.endswith("sedan.")
    assert memory.embed_missing() == 0


def test_a_new_model_ignores_old_vectors_until_backfilled(make_memory: MemoryFactory) -> None:
    """Vectors carry their model's id; another model's are not used for search and the
    backfill replaces every one of them."""
    old = make_memory(embeddings=ConceptEmbeddings(size=4))
    _store(old.layers("u"))
    _drain(old)
    assert len(_vectors(old)) == 17
    new = make_memory(embeddings=ConceptEmbeddings(size=6))
    layers = new.layers("u")
    assert layers.search("episodic", "canine") == []  # the old vectors are not its own
    assert new.embed_missing() == 17
    embedder = new.context.embedder
    assert embedder is not None
    assert {model for _, model, _ in _vectors(new)} == {embedder.model}
    assert layers.search("episodic", "canine")[0].item.content.startswith("We adopted")
    assert new.embed_missing() == 0


def test_a_changed_text_is_embedded_again(make_memory: MemoryFactory) -> None:
    """A fact stored again with a new value gets the new value's vector; the same
    value again keeps its vector."""
    model = ConceptEmbeddings()
    memory = make_memory(embeddings=model)
    layers = memory.layers("u")
    layers.learn("favourite", "the beagle")
    _drain(memory)
    (before,) = _vectors(memory)
    layers.learn("favourite", "the beagle", {"again": True})
    _drain(memory)
    assert _vectors(memory) == [before]
    layers.learn("favourite", "the sedan")
    expected = encode_all(model.embed_documents(["favourite: the sedan"]), 1)[0]
    # The old vector went in the write's transaction (the worker may have stored the
    # new one already).
    assert _vectors(memory) in ([], [(before[0], before[1], expected)])
    _drain(memory)
    assert _vectors(memory) == [(before[0], before[1], expected)]
    assert layers.search("semantic", "automobile")[0].item.content == "the sedan"


def test_a_vector_of_an_outdated_text_is_not_stored(make_memory: MemoryFactory) -> None:
    """A vector embedded from a text that changed before it was stored is dropped
    (the write that changed it queued the new text); one of the current text is
    stored."""
    memory = make_memory()
    layers = memory.layers("u")
    layers.learn("favourite", "the sedan")
    engine = memory.database.engine
    with engine.connect() as conn:
        (stale,) = to_embed_items(conn, memory.project, "m")
    layers.learn("favourite", "the supper")
    vector = encode_all([[1.0, 0.0]], 1)[0]
    with engine.begin() as conn:
        assert store_item_vectors(conn, "m", [(stale, vector)]) == 0
    assert _vectors(memory) == []
    with engine.begin() as conn:
        (fresh,) = to_embed_items(conn, memory.project, "m")
        assert (fresh.id, fresh.content) == (stale.id, "the supper")
        assert store_item_vectors(conn, "m", [(fresh, vector)]) == 1
    assert _vectors(memory) == [(stale.id, "m", vector)]


def test_a_vector_stored_during_a_change_waits_for_it(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """A vector of the old text stored while another transaction changes the text
    waits for that transaction, then finds the text changed and stores nothing (on
    PostgreSQL the check's share lock waits; SQLite serializes the writers)."""
    memory = make_memory()
    memory.layers("u").learn("favourite", "the beagle")
    engine = memory.database.engine
    with engine.connect() as conn:
        (stale,) = to_embed_items(conn, memory.project, "m")
    vector = encode_all([[1.0, 0.0]], 1)[0]
    new = NewItem("semantic", "favourite", "the sedan", "{}", 2, 18)
    stored: list[int] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with engine.begin() as conn:
                stored.append(store_item_vectors(conn, "m", [(stale, vector)]))
        except BaseException as error:  # reported by the assertion below
            errors.append(error)

    with engine.begin() as conn:
        upsert_fact(conn, stale.scope_pk, new, clock(), DEFAULT_POLICY)
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join(0.5)  # it waits for this transaction
    thread.join(30)
    assert errors == []
    assert stored == [0]
    assert _vectors(memory) == []


def test_vectors_go_with_their_items(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """Compaction, clearing and pruning delete the vectors of the items they delete;
    a compaction's summary gets the vector of its own text; expired items are never
    found by meaning."""
    every_layer_expires = TierPolicy(expiring_layers=STORED_LAYERS)
    config = MemoryConfig(tier_policy=every_layer_expires)
    memory = make_memory(embeddings=ConceptEmbeddings(), config=config)
    layers = memory.layers("u")
    _store(layers)
    _drain(memory)
    ids = {row[0] for row in _vectors(memory)}
    result = layers.compact("episodic", keep_last=2)
    assert result.summary is not None
    _drain(memory)
    episodic = {item.id for item in layers.recent("episodic", 10)}
    kept = {row[0] for row in _vectors(memory)}
    assert episodic <= kept and kept <= ids
    assert len(kept) == len(ids) - result.removed
    layers.compact("procedural", keep_last=1, summarize_older=False)
    assert len(_vectors(memory)) == len(kept) - 1
    layers.clear("semantic")
    assert len(_vectors(memory)) == len(kept) - 3
    clock.advance(days=31)
    assert layers.search("procedural", "automobile car") == []  # expired
    memory.prune_expired()
    assert _vectors(memory) == []


def test_sync_and_async_agree(make_memory: MemoryFactory) -> None:
    """asearch/amatch_rules/aembed_missing run the same operations as their twins,
    with embeddings (the parity suite runs them without)."""
    memory = make_memory(embeddings=DeterministicFakeEmbedding(size=8))
    plain = make_memory()
    _store(plain.layers("u"))
    assert asyncio.run(memory.aembed_missing()) == 17
    assert memory.embed_missing() == 0
    layers = memory.layers("u")
    sync = layers.search("episodic", "old sedan")
    again = asyncio.run(layers.asearch("episodic", "old sedan"))
    assert [hit.item.id for hit in again] == [hit.item.id for hit in sync]
    assert [hit.score for hit in again] == [hit.score for hit in sync]
    assert sync[0].item.content == "I finally sold my old sedan."
    rules = layers.match_rules("automobile garage")
    arules = asyncio.run(layers.amatch_rules("automobile garage"))
    assert [(rule.id, rule.score) for rule in arules] == [(rule.id, rule.score) for rule in rules]
    assert rules[0].action == "suggest the garage"
