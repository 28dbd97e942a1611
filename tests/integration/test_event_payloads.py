"""Every kind of change-feed event keeps its wire name, session and payload byte for
byte: a scenario that produces each kind is compared with the events it gave when they
were recorded (``event_payloads.jsonl``: kind, session and payload per line; both
backends give the same). The feed delivers each payload as recorded; every kind but
``entry:added`` is also stored so (an entry's payload is stored as an array of its
values, delivered as the same object)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from tiermem import ConversationMemory, MemoryConfig
from tiermem.errors import InvalidArgument, SummarizerFailed
from tiermem.events import DocumentPut
from tiermem.testing import FakeSummarizer, ManualClock, wait_for_feed

from ..conftest import MemoryFactory

CONFIG = MemoryConfig(
    max_tokens=120,
    min_entries_to_compress=2,
    recent_window=2,
    summary_share=0.5,  # the recorded scenario's merges; payloads, not policy, are tested
    event_content=True,
    event_retention=timedelta(days=3650),
)


def _scenario(memory: ConversationMemory, clock: ManualClock) -> None:
    """Changes that write every kind of event tiermem itself records."""
    for number in range(8):
        memory.add_user_message("a", f"message number {number} about the weather " * 3)
    memory.set_summarizer(FakeSummarizer(mode="raise", error=RuntimeError("model down")))
    with pytest.raises(SummarizerFailed):
        memory.compress("a", force=True)
    memory.set_summarizer(FakeSummarizer())
    memory.add_assistant_message("a", 'a "quoted" reply, ünïcødé')
    memory.add_user_message("b", "another conversation")
    state = memory.export_session("b")
    memory.import_session(state, session_id="copy")
    layers = memory.layers("research")
    layers.learn("capital", "Paris")
    layers.add_rule("when asked", "answer")
    for number in range(3):
        layers.append("episodic", f"episode {number}")
    layers.compact("episodic", keep_last=1, summarize_older=False)
    layers.clear("semantic")
    memory.rename_session("b", "b2")  # b's earlier events carry the new id from now on
    memory.database.run(
        lambda conn: memory.feed.record(conn, "custom:thing", {"n": 1, "b": [1, "x"]}, "a")
    )
    clock.advance(days=40)
    memory.recalculate_tiers()
    memory.get_messages("a")  # an access wakes it
    memory.add_user_message("gone", "to be forgotten")
    memory.forget(sessions=["gone"])
    memory.clear_session("copy")
    clock.advance(days=400)
    memory.prune_expired()


def _rows(memory: ConversationMemory) -> list[tuple[str, str | None, str]]:
    with memory.engine.connect() as conn:
        return [
            (str(kind), session, str(payload))
            for kind, session, payload in conn.execute(
                sa.text("SELECT kind, session_id, payload FROM tiermem_event ORDER BY id")
            )
        ]


def _delivered(memory: ConversationMemory) -> list[tuple[str, str | None, str]]:
    """The events as the feed gives them, each payload as compact JSON, keys sorted."""
    wait_for_feed(memory)
    return [
        (
            event.kind,
            event.session_id,
            json.dumps(event.payload, separators=(",", ":"), sort_keys=True),
        )
        for event in memory.feed.changes(limit=1_000)
    ]


def test_every_kind_keeps_its_recorded_payload(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """The events of every kind are exactly those recorded, as the feed delivers them
    and, but for ``entry:added`` (stored with an empty kind and its values' array),
    as stored."""
    memory = make_memory(config=CONFIG, summarizer=FakeSummarizer())
    _scenario(memory, clock)
    recorded = (Path(__file__).parent / "event_payloads.jsonl").read_text(encoding="utf-8")
    expected = [tuple(json.loads(line)) for line in recorded.splitlines()]
    assert _delivered(memory) == expected
    stored = _rows(memory)
    assert [row[0] for row in stored if row[0] in ("", "entry:added")] == [""] * sum(
        row[0] == "entry:added" for row in expected
    )
    assert [row for row in stored if row[0] != ""] == [
        row for row in expected if row[0] != "entry:added"
    ]


def test_record_takes_an_event_or_a_kind_with_its_payload(make_memory: MemoryFactory) -> None:
    """``ChangeFeed.record`` writes an event of ``tiermem.events`` or an extension's
    kind with its payload; an event with a payload or session of its own, a kind
    without a payload, or an empty kind (the stored kind of ``entry:added``), is
    refused with nothing written."""
    memory = make_memory()
    put = DocumentPut(("users", "ada"), "prefs")
    for call in (
        lambda conn: memory.feed.record(conn, put, {"key": "other"}),
        lambda conn: memory.feed.record(conn, put, session_id="s"),
        lambda conn: memory.feed.record(conn, "custom:thing"),
        lambda conn: memory.feed.record(conn, "", {"key": "other"}),
    ):
        with pytest.raises(InvalidArgument):
            memory.database.run(call)
    assert _rows(memory) == []
    memory.database.run(lambda conn: memory.feed.record(conn, put))
    assert _rows(memory) == [("document:put", None, '{"key":"prefs","namespace":["users","ada"]}')]
