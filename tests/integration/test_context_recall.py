"""Recall: a read given a query (by default the newest human message) brings the
kept originals most relevant to it that are out of view into one block just before
the newest human message, in time order with time and speaker, counted in the
budget, their entry ids in the block's metadata."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tiermem import (
    OMITTED_MARKER,
    RECALL_MARKER,
    RECALLED_ITEMS_MARKER,
    ConversationMemory,
    MemoryConfig,
    is_summary_message,
)
from tiermem._ops import recall
from tiermem.errors import InvalidArgument, StorageError
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory

CONFIG = MemoryConfig(max_tokens=800)
FACT = "My sister Ana moved to Lisbon in 2019 and works at a bakery called Pastelaria Rosa."


def _talk(memory: ConversationMemory, sid: str = "s", turns: int = 60) -> None:
    memory.add_user_message(sid, FACT)
    memory.add_assistant_message(sid, "Noted: Ana lives in Lisbon and bakes at Pastelaria Rosa.")
    for turn in range(turns):
        memory.add_user_message(sid, f"Garden question {turn}: should I water tomato {turn} daily?")
        memory.add_assistant_message(sid, f"Water tomato {turn} every other morning.")


def _block(messages: list[BaseMessage]) -> tuple[int, BaseMessage]:
    found = [(i, m) for i, m in enumerate(messages) if RECALL_MARKER in m.additional_kwargs]
    assert len(found) == 1, "exactly one recalled block"
    return found[0]


def _memory(make_memory: MemoryFactory, config: MemoryConfig = CONFIG) -> ConversationMemory:
    return make_memory(config=config, summarizer=FakeSummarizer())


def test_the_newest_question_recalls_a_compressed_fact_before_itself(
    make_memory: MemoryFactory,
) -> None:
    """The fact was compressed long ago; asking about it brings it back word for word,
    with its time and speaker, just before the question, within max_tokens."""
    memory = _memory(make_memory)
    _talk(memory)
    assert memory.get_entries("s")[0].compressed
    memory.add_user_message("s", "What is the bakery where my sister works called?")
    messages = memory.get_messages("s")
    assert memory.counter.count_messages(messages) <= CONFIG.max_tokens
    index, block = _block(messages)
    assert index == len(messages) - 2 and str(messages[-1].content).startswith("What is the bakery")
    assert isinstance(block, HumanMessage) and is_summary_message(block)
    assert FACT in str(block.content)
    assert re.search(r"\[\d{4}-\d\d-\d\d \d\d:\d\d\] user: My sister Ana", str(block.content))
    entries = {e.id: e for e in memory.get_entries("s")}
    ids = block.additional_kwargs[RECALL_MARKER]
    assert ids and all(entries[i].compressed for i in ids)  # never what is in view
    assert ids == sorted(ids, key=lambda i: entries[i].seq)  # time order
    assert entries[ids[0]].content == FACT or FACT in [entries[i].content for i in ids]


def test_an_explicit_query_recalls_and_an_empty_one_or_no_share_does_not(
    make_memory: MemoryFactory,
) -> None:
    """query= picks what is recalled; query="" and recall_share=0 leave the block out,
    as does a session with nothing compressed."""
    memory = _memory(make_memory)
    _talk(memory)
    _, block = _block(memory.get_messages("s", query="Pastelaria Rosa bakery"))
    assert FACT in str(block.content)
    plain = memory.get_messages("s", query="")
    assert not any(RECALL_MARKER in m.additional_kwargs for m in plain)
    memory.update_config(recall_share=0)
    assert memory.get_messages("s", query="Pastelaria Rosa") == plain
    fresh = _memory(make_memory)
    fresh.add_user_message("t", FACT)
    fresh.add_user_message("t", "Where does Ana work?")
    assert not any(
        RECALL_MARKER in m.additional_kwargs for m in fresh.get_messages("t", query="bakery")
    )


def test_a_hit_brings_its_neighbouring_turn(make_memory: MemoryFactory) -> None:
    """With recall_window=1 the assistant's answer next to the user's fact comes too;
    with 0 (the default) only the hit."""
    memory = _memory(make_memory)
    _talk(memory)
    _, alone = _block(memory.get_messages("s", query="moved in 2019"))
    assert FACT in str(alone.content) and "Noted: Ana" not in str(alone.content)
    memory.update_config(recall_window=1)
    _, block = _block(memory.get_messages("s", query="moved in 2019"))
    assert FACT in str(block.content)
    assert "assistant: Noted: Ana lives in Lisbon" in str(block.content)


def test_add_and_get_messages_text_and_history_recall_too(make_memory: MemoryFactory) -> None:
    """The turn call recalls with the human message it adds; the text context ends
    with a recalled section; the history adapter shows the block; async the same."""
    memory = _memory(make_memory)
    _talk(memory)
    turn = memory.add_and_get_messages("s", [HumanMessage("Which bakery is Ana at?")])
    assert memory.counter.count_messages(turn) <= CONFIG.max_tokens
    index, block = _block(turn)
    assert index == len(turn) - 2 and FACT in str(block.content)
    text = memory.get_context_for_llm("s")
    assert memory.counter.count_text(text) <= CONFIG.max_tokens
    assert "=== Recalled From Earlier ===" in text and FACT in text
    assert FACT in str(_block(memory.history("s").messages)[1].content)
    answered = memory.add_and_get_messages("s", [AIMessage("Pastelaria Rosa.")])
    _block(answered)  # the newest human message still asks about the bakery
    async_turn = asyncio.run(memory.aget_messages("s", query="Pastelaria"))
    assert FACT in str(_block(async_turn)[1].content)
    assert FACT in asyncio.run(memory.aget_context_for_llm("s", query="Pastelaria"))


def test_project_scope_recalls_other_sessions(make_memory: MemoryFactory) -> None:
    """recall_scope="project" also brings entries of the project's other sessions,
    labelled with their session."""
    memory = _memory(make_memory, CONFIG.replace(recall_scope="project"))
    memory.add_user_message("old-chat", FACT)
    memory.add_user_message("new-chat", "Hello again!")
    memory.add_user_message("new-chat", "Remind me where my sister Ana works?")
    _, block = _block(memory.get_messages("new-chat"))
    assert f"(session old-chat) user: {FACT}" in str(block.content)
    only_session = _memory(make_memory)
    only_session.add_user_message("n", "Remind me where my sister Ana works?")
    assert not any(RECALL_MARKER in m.additional_kwargs for m in only_session.get_messages("n"))


def test_recall_never_pushes_pinned_context_or_the_question_out(
    make_memory: MemoryFactory,
) -> None:
    """Pinned context that nearly fills the budget still reads (no BudgetExceeded):
    the block only takes what pinned context and the current turn leave."""
    memory = _memory(make_memory)
    _talk(memory)
    memory.add_context("s", "Rule: " + "always answer politely. " * 100, "policy", pinned=True)
    memory.add_user_message("s", "Which bakery does Ana work at?")
    messages = memory.get_messages("s")
    assert memory.counter.count_messages(messages) <= CONFIG.max_tokens
    assert messages[-1].content == "Which bakery does Ana work at?"


class WordConcepts(Embeddings):
    """A tiny model mapping words to concepts: 'baker' and 'pastry' mean the same."""

    CONCEPTS = {"bakery": 0, "pastelaria": 0, "pastry": 0, "croissants": 0, "garden": 1}

    def _vector(self, text: str) -> list[float]:
        vector = [0.0, 0.0, 0.05]
        for word in re.findall(r"\w+", text.lower()):
            if word in self.CONCEPTS:
                vector[self.CONCEPTS[word]] += 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def test_recall_uses_embeddings_when_the_memory_has_them(make_memory: MemoryFactory) -> None:
    """A question sharing no word with the fact finds it by meaning."""
    memory = make_memory(config=CONFIG, summarizer=FakeSummarizer(), embeddings=WordConcepts())
    _talk(memory)
    memory.embed_missing()
    _, block = _block(memory.get_messages("s", query="croissants?"))
    assert FACT in str(block.content)


def test_what_the_budget_left_out_is_recalled_when_compression_fails(
    make_memory: MemoryFactory,
) -> None:
    """Every compression fails, so the guard leaves the oldest entries out; asking
    about one brings it back (it is active, but out of view)."""
    memory = make_memory(config=CONFIG, summarizer=FakeSummarizer(mode="raise"))
    _talk(memory)
    assert memory.get_stats("s").compressed_entries == 0
    memory.add_user_message("s", "Which bakery does my sister work at?")
    messages = memory.get_messages("s")
    assert memory.counter.count_messages(messages) <= CONFIG.max_tokens
    _, block = _block(messages)
    assert FACT in str(block.content)
    shown = [m for m in messages if RECALL_MARKER not in m.additional_kwargs]
    assert not any(FACT == m.content for m in shown)  # recalled, not shown twice


def test_a_failed_recall_leaves_the_block_out_and_the_read_succeeds(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A storage error in the recall's own read costs the block only: the context is
    the plain one, and a turn whose append committed is not reported as failed."""
    memory = _memory(make_memory)
    _talk(memory)

    def broken(*args: object, **kwargs: object) -> list[object]:
        raise StorageError("the search failed")

    monkeypatch.setattr(recall, "find", broken)
    memory.add_user_message("s", "Which bakery does Ana work at?")
    assert memory.get_messages("s") == memory.get_messages("s", query="")
    turn = memory.add_and_get_messages("s", [HumanMessage("And where does she live?")])
    assert not any(RECALL_MARKER in m.additional_kwargs for m in turn)
    assert memory.get_entries("s")[-1].content == "And where does she live?"


def test_recall_searches_only_what_is_out_of_view(make_memory: MemoryFactory) -> None:
    """A question whose words fill the window still recalls the one compressed entry
    holding them: the search is bounded to what the context does not show, so the
    hits read (a few, sized to the block) are never spent on messages in view."""
    memory = _memory(make_memory, MemoryConfig(max_tokens=2_000, auto_compress=False))
    memory.add_user_message("s", "For the record: the marathon in Porto starts at seven on Sunday.")
    memory.add_assistant_message("s", "Noted.")
    memory.compress("s", force=True, keep=0)
    for _ in range(45):  # more than the most hits a recall reads (40)
        memory.add_user_message("s", "When does the marathon in Porto start?")
    _, block = _block(memory.get_messages("s"))
    assert "starts at seven on Sunday" in str(block.content)
    compressed = {e.id for e in memory.get_entries("s", include_compressed=True) if e.compressed}
    assert set(block.additional_kwargs[RECALL_MARKER]) <= compressed


def test_a_long_question_searches_its_longest_words_only(make_memory: MemoryFactory) -> None:
    """A pasted page as the question costs a recall what a short question does: the
    search takes its twelve longest words (in their order), and the compressed fact
    its rare name points to still comes back."""
    words = recall.key_words(" ".join(f"w{i}" for i in range(40)) + " Pastelaria questions")
    assert words.split() == [f"w{i}" for i in range(10, 40)][:10] + ["pastelaria", "questions"]
    memory = _memory(make_memory, MemoryConfig(max_tokens=3_000))
    _talk(memory, turns=200)
    assert memory.get_entries("s", include_compressed=True)[0].compressed
    filler = " ".join(["and so on we go"] * 60)
    memory.add_user_message("s", f"{filler} Where is Pastelaria Rosa, again? {filler}")
    _, block = _block(memory.get_messages("s"))
    assert FACT in str(block.content)


def test_recall_brings_what_the_layers_know_when_asked(make_memory: MemoryFactory) -> None:
    """With ``recall_layers``, a question brings the matching semantic fact and
    episode of the scope ``recall_layer_scope`` into the block, marked as layer
    memory with the items' ids in RECALLED_ITEMS_MARKER, even in a session with
    nothing compressed; without it, such a session recalls nothing."""
    plain = _memory(make_memory)
    layers = plain.layers("user-ana")
    fact = layers.learn("sister's bakery", "Ana's sister works at Pastelaria Rosa in Lisbon")
    episode = layers.append("episodic", "Ana flew to Lisbon on May 1 to visit the bakery")
    layers.append("semantic", "Ana is allergic to cats", {"key": "allergy"})
    question = "Which bakery in Lisbon does my sister work at?"
    plain.add_user_message("s", question)
    assert not any(RECALL_MARKER in m.additional_kwargs for m in plain.get_messages("s"))

    memory = plain.with_config(
        recall_layers=("semantic", "episodic"), recall_layer_scope="user-ana"
    )
    messages = memory.get_messages("s")
    index, block = _block(messages)
    assert index == len(messages) - 2 and messages[-1].content == question
    text = str(block.content)
    assert "(semantic memory) sister's bakery: Ana's sister works at Pastelaria Rosa" in text
    assert "(episodic memory) Ana flew to Lisbon on May 1" in text
    assert "allergic" not in text
    items = set(block.additional_kwargs[RECALLED_ITEMS_MARKER])
    assert {episode.id} <= items and block.additional_kwargs[RECALL_MARKER] == []
    assert len(items) == 2 and memory.counter.count_messages(messages) <= CONFIG.max_tokens
    assert fact.key == "sister's bakery"


@pytest.mark.parametrize(
    "changes",
    [
        {"recall_layers": ("procedural",)},
        {"recall_layers": "semantic"},
        {"recall_layer_scope": ""},
    ],
)
def test_recall_layer_settings_are_checked(changes: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument, match=next(iter(changes))):
        MemoryConfig(**changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("embeddings", [None, WordConcepts()], ids=["words", "hybrid"])
def test_recall_on_sqlite_scores_within_the_session(
    tmp_path: Path, embeddings: WordConcepts | None
) -> None:
    """On SQLite a recall never asks FTS5's ``bm25()``, which counts a word's
    documents over the whole index (every session of every project in the file), so
    its cost would grow with the project; it scores by the session's own statistics
    and still brings the fact back. With embeddings too: the words half of the
    fusion is the ranking recall by words alone makes."""
    memory = ConversationMemory(
        f"sqlite:///{tmp_path / 'm.db'}",
        config=CONFIG,
        summarizer=FakeSummarizer(),
        embeddings=embeddings,
    )
    with memory:
        for other in range(3):  # other sessions holding the same words
            memory.add_user_message(f"other-{other}", "Pastelaria Rosa bakery sister Lisbon")
        _talk(memory)
        if embeddings is not None:
            memory.embed_missing()
        memory.add_user_message("s", "What is the bakery where my sister works called?")
        statements: list[str] = []

        def seen(*args: object) -> None:
            statements.append(str(args[2]))

        sa.event.listen(memory.database.engine, "before_cursor_execute", seen)
        try:
            _, block = _block(memory.get_messages("s"))
        finally:
            sa.event.remove(memory.database.engine, "before_cursor_execute", seen)
        assert FACT in str(block.content)
        assert any("MATCH" in statement for statement in statements)
        assert not any("bm25(" in statement for statement in statements)


def test_a_context_that_fits_is_never_cut_for_the_block(make_memory: MemoryFactory) -> None:
    """A call left without its result gets a stand-in result in the context, which
    the stored counts do not hold. With room to spare, the block takes what the
    context leaves unused, and nothing is left out to make room for it (a random
    program once saw a message cut from a context far below its budget)."""
    memory = _memory(make_memory, MemoryConfig(max_tokens=100_000, auto_compress=False))
    _talk(memory, turns=3)
    memory.compress("s", force=True, keep=0)
    for turn in range(3):
        call = AIMessage(
            "", tool_calls=[{"name": "lookup", "args": {"n": turn}, "id": f"call-{turn}"}]
        )
        memory.add_messages("s", [call])  # no result: a stand-in is shown for it
    memory.add_user_message("s", "What is the bakery where my sister works called?")
    messages = memory.get_messages("s")
    assert not any(OMITTED_MARKER in m.additional_kwargs for m in messages)
    _, block = _block(messages)
    assert FACT in str(block.content)
    assert sum(isinstance(m, ToolMessage) for m in messages) == 3
