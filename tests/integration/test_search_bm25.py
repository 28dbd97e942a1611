"""Lexical search: stemmed words, stopwords ignored, BM25 ranking, common words."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from tiermem import ConversationMemory
from tiermem._storage import search

from ..conftest import MemoryFactory


def _contents(memory: ConversationMemory, query: str, limit: int = 10) -> list[str]:
    return [hit.entry.content for hit in memory.search(query, session_id="s", limit=limit)]


def test_stemming_matches_other_forms_of_a_word(memory: ConversationMemory) -> None:
    """'trips' finds 'trip', 'hiking' finds 'hiked'; unrelated words do not match."""
    memory.add_user_message("s", "We planned a trip to Lisbon.")
    memory.add_user_message("s", "She hiked up the ridge.")
    memory.add_user_message("s", "The tripod broke.")
    assert _contents(memory, "trips") == ["We planned a trip to Lisbon."]
    assert _contents(memory, "hiking") == ["She hiked up the ridge."]


def test_stopwords_neither_match_nor_count(memory: ConversationMemory) -> None:
    """'what did the ... ' adds nothing: only the content word selects; a query of
    stopwords only finds nothing."""
    memory.add_user_message("s", "What did the doctor say?")
    memory.add_user_message("s", "The lasagna recipe needs ricotta.")
    assert _contents(memory, "what did the recipe need") == ["The lasagna recipe needs ricotta."]
    assert _contents(memory, "what did the") == []


def test_bm25_prefers_the_rarer_word_and_the_shorter_entry(memory: ConversationMemory) -> None:
    """Of entries holding one query word each, the rarer word's wins; of two holding
    the same word, the shorter one ranks higher."""
    for n in range(6):
        memory.add_user_message("s", f"weather report number {n}")
    for n in range(10):  # FTS5's IDF is 0 for a word in half the entries or more
        memory.add_user_message("s", f"filler line {n}")
    memory.add_user_message("s", "volcano")
    long = "a long note that also mentions the volcano among many other words"
    memory.add_user_message("s", long)
    memory.add_user_message("s", "volcano weather")
    found = _contents(memory, "volcano weather", limit=3)
    assert found[0] == "volcano weather"
    assert found[1:] == ["volcano", long]


def test_common_words_give_way_to_rarer_ones(
    memory: ConversationMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With rarer words in the query, entries holding only a common word (in more than
    COMMON_ROWS entries) are not candidates; common words alone rank the newest
    entries holding them all."""
    monkeypatch.setattr(search, "COMMON_ROWS", 3)
    for n in range(6):
        memory.add_user_message("s", f"walrus sighting {n}")
    memory.add_user_message("s", "walrus and narwhal together")
    assert _contents(memory, "walrus narwhal") == ["walrus and narwhal together"]
    newest = _contents(memory, "walrus sighting")
    assert newest == ["walrus sighting 5", "walrus sighting 4", "walrus sighting 3"]
    monkeypatch.setattr(search, "COMMON_ROWS", 1000)
    assert len(_contents(memory, "walrus narwhal")) == 7


@pytest.mark.parametrize("common_rows", [1000, 3])
def test_project_search_is_not_crowded_out_by_other_projects(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch, common_rows: int
) -> None:
    """Another project's better and newer matches share the index; a project-wide
    search still finds this project's match, however many of them there are and
    however common the word is there."""
    monkeypatch.setattr(search, "COMMON_ROWS", common_rows)
    mine = make_memory(project="mine")
    mine.add_user_message("m", "a long note that mentions one walrus among many other words")
    other = make_memory(project="other")
    other.add_messages("o", [HumanMessage("walrus walrus walrus") for _ in range(150)])
    found = [hit.entry.session_id for hit in mine.search("walrus")]
    assert found == ["m"]


@pytest.mark.parametrize("backend", ["postgres"])
def test_recall_within_a_session_reads_a_bounded_number_of_rows_on_postgres(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recall runs on every turn: where every word of its query is common in the
    session, PostgreSQL scores only the newest rows holding the rarest words, at most
    SESSION_COMMON_ROWS of them, as SQLite's recall does; a search still ranks every
    match."""
    monkeypatch.setattr(search, "SESSION_COMMON_ROWS", 3)
    memory = make_memory()
    for n in range(8):
        memory.add_user_message("s", f"walrus sighting {n}")
    memory.add_user_message("s", "walrus alone")
    with memory.engine.connect() as conn:
        counts = search.session_counts(conn, memory.project, "s")
        pk = counts[0][0]
        words = ["walrus", "sighting"]
        recalled = search.entry_candidates(conn, memory.project, words, counts, pk, bounded=True)
        searched = search.entry_candidates(conn, memory.project, words, counts, pk)
    assert len(recalled) == 3
    assert len(searched) == 9
