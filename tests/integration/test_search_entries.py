"""``ConversationMemory.search``: full-text search over entries, compressed ones included."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig, create_tables
from tiermem._storage import fts
from tiermem._storage.database import Database
from tiermem.errors import InvalidArgument
from tiermem.testing import FakeSummarizer, ManualClock

from ..conftest import MemoryFactory
from ..unit.test_fts_query import HOSTILE

FACT = "The vault combination is 7391-ALPHA, written on the blue card."
FILLER = "We talked about the {topic} and agreed to revisit the plan for item {n} later."
TOPICS = ["weather", "budget", "schedule", "menu", "garden", "printer", "roadmap"]


def _compressing(make_memory: MemoryFactory) -> ConversationMemory:
    return make_memory(
        config=MemoryConfig(
            max_tokens=300, max_entries=20, recent_window=4, min_entries_to_compress=2
        ),
        summarizer=FakeSummarizer(digest_words=6),
    )


def test_search_finds_an_exact_fact_after_it_was_compressed(make_memory: MemoryFactory) -> None:
    """A fact summarized away is still found, compressed, and quoted exactly."""
    memory = _compressing(make_memory)
    for n in range(3):
        memory.add_user_message("s", FILLER.format(topic="intro", n=n))
    memory.add_user_message("s", FACT)
    for n in range(60):
        memory.add_assistant_message("s", FILLER.format(topic=TOPICS[n % len(TOPICS)], n=n))
    assert memory.get_stats("s").compressed_entries > 50
    assert all("7391" not in summary.content for summary in memory.get_summaries("s"))
    hits = memory.search("what was the vault combination?")
    assert hits[0].entry.content == FACT
    assert hits[0].entry.compressed and hits[0].entry.summary_id is not None
    assert memory.search("7391 alpha", session_id="s")[0].entry.content == FACT


def test_relevant_entry_ranks_first_among_hundreds(make_memory: MemoryFactory) -> None:
    """The one entry about the query outranks three hundred distractors sharing its words."""
    memory = make_memory(config=MemoryConfig(auto_compress=False))
    distractors: list[BaseMessage] = []
    for n in range(100):
        distractors.append(HumanMessage(FILLER.format(topic=TOPICS[n % len(TOPICS)], n=n)))
        distractors.append(AIMessage(f"The combination of ideas number {n} is interesting."))
    memory.add_messages("s", [*distractors[:120], HumanMessage(FACT), *distractors[120:]])
    memory.add_messages("t", [HumanMessage(FILLER.format(topic="vault", n=n)) for n in range(100)])
    hits = memory.search("vault combination blue card", limit=5)
    assert hits[0].entry.content == FACT
    assert hits[0].score > hits[1].score


def test_session_filter_and_project_isolation(make_memory: MemoryFactory) -> None:
    """A session filter keeps to that session; another project's entries never appear."""
    ours = make_memory(project="ours")
    theirs = make_memory(project="theirs")
    ours.add_user_message("a", "penguins live in the south")
    ours.add_user_message("b", "penguins also visit the zoo")
    theirs.add_user_message("a", "penguins everywhere")
    assert {hit.entry.session_id for hit in ours.search("penguins")} == {"a", "b"}
    assert [hit.entry.content for hit in ours.search("penguins", session_id="b")] == [
        "penguins also visit the zoo"
    ]
    assert ours.search("penguins", session_id="missing") == []
    assert [hit.entry.content for hit in theirs.search("penguins")] == ["penguins everywhere"]


def test_special_character_queries_are_text(memory: ConversationMemory) -> None:
    """Quotes, FTS operators, SQL and unicode are searched as words, never parsed."""
    for n, query in enumerate(HOSTILE):
        memory.add_user_message(f"s{n}", f"literal {query} inside")
    for n, query in enumerate(HOSTILE):
        hits = memory.search(query, session_id=f"s{n}")
        if fts.query_words(query):
            assert [hit.entry.content for hit in hits] == [f"literal {query} inside"], query
        else:
            assert hits == [], query
        assert isinstance(memory.search(query), list)


def test_quoted_and_hyphenated_fact_is_found(memory: ConversationMemory) -> None:
    """A query copied with quotes and punctuation still finds the fact."""
    memory.add_user_message("s", FACT)
    memory.add_user_message("s", "unrelated chatter about lunch")
    assert memory.search('"7391-ALPHA"')[0].entry.content == FACT
    assert memory.search("NEAR(vault AND -combination)")[0].entry.content == FACT


def test_no_match_and_wordless_queries_return_nothing(memory: ConversationMemory) -> None:
    """A query without matches or without words returns an empty list."""
    memory.add_user_message("s", "hello world")
    assert memory.search("zeppelin") == []
    assert memory.search("?!* ()") == []
    assert memory.search("") == []


def test_bad_arguments_raise_before_any_sql(memory: ConversationMemory) -> None:
    """A non-str query or a limit below one raises InvalidArgument."""
    with pytest.raises(InvalidArgument):
        memory.search(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        memory.search("x", limit=0)


def test_index_follows_clear_and_import(memory: ConversationMemory) -> None:
    """Cleared entries vanish from the index; imported entries are indexed."""
    memory.add_user_message("s", "the kraken sleeps under the ice")
    state = memory.export_session("s")
    memory.clear_session("s")
    assert memory.search("kraken") == []
    memory.import_session(state, session_id="copy")
    assert [hit.entry.session_id for hit in memory.search("kraken")] == ["copy"]


def test_index_follows_content_updates(memory: ConversationMemory, engine: Engine) -> None:
    """Rewriting an entry's content in SQL re-indexes it in the same transaction."""
    entry = memory.add_user_message("s", "original wording about otters")
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE tiermem_entry SET content = :c WHERE id = :i"),
            {"c": "replacement wording about beavers", "i": entry.id},
        )
    assert memory.search("otters") == []
    assert [hit.entry.id for hit in memory.search("beavers")] == [entry.id]
    with engine.begin() as conn:  # restore it: the message itself still says otters
        conn.execute(
            sa.text("UPDATE tiermem_entry SET content = :c WHERE id = :i"),
            {"c": entry.content, "i": entry.id},
        )
    assert [hit.entry.id for hit in memory.search("otters")] == [entry.id]
    assert memory.search("beavers") == []


def test_recency_and_session_tier_shape_the_score(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """Equal text scores 1 + recency bonus + tier boost: fresh 1.8, expired and old 0.8."""
    memory = make_memory()
    old = memory.add_user_message("old", "identical words here")
    clock.advance(days=40)
    new = memory.add_user_message("new", "identical words here")
    hits = memory.search("identical words")
    assert [hit.entry.id for hit in hits] == [new.id, old.id]
    assert hits[0].score == pytest.approx(1.8, abs=1e-3)
    assert hits[1].score == pytest.approx(0.8, abs=1e-3)


def test_index_installed_over_existing_entries_finds_them(
    memory: ConversationMemory, engine: Engine
) -> None:
    """An upgraded database indexes the entries it already holds."""
    memory.add_user_message("s", "entries from before the upgrade mention narwhals")
    with engine.begin() as conn:
        fts.uninstall(conn, fts.ENTRY_INDEX)
    with engine.begin() as conn:
        create_tables(conn)
    assert len(memory.search("narwhals")) == 1


def test_concurrent_schema_creation_is_safe(engine: Engine) -> None:
    """Several processes' first calls creating the schema and indexes at once all succeed."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def create() -> None:
        database = Database(engine=engine)
        barrier.wait()
        try:
            database.ensure_schema()
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    Database(engine=engine).ensure_schema()


def test_huge_entry_indexes_quickly(memory: ConversationMemory) -> None:
    """A 10 MB entry is stored and indexed in seconds; its first 100,000 characters are
    searchable, the rest is stored but not indexed."""
    head = "quokka " + "filler words without meaning " * 4000
    huge = head + ("x" * 1000 + " ") * 9_900 + " wombat"
    assert len(huge) > 10_000_000 and fts.MAX_INDEXED_CHARS < len(head) + 1000
    started = time.perf_counter()
    memory.add_context("s", huge, source="dump")
    assert time.perf_counter() - started < 30
    assert [hit.entry.content == huge for hit in memory.search("quokka")] == [True]
    assert memory.search("wombat") == []


async def test_async_search_matches_sync(memory: ConversationMemory) -> None:
    """asearch returns what search returns."""
    await memory.aadd_user_message("s", "asynchronous armadillo")
    sync = memory.search("armadillo")
    assert [hit.entry.id for hit in await memory.asearch("armadillo")] == [
        hit.entry.id for hit in sync
    ]
