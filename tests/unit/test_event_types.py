"""The typed change events of :mod:`tiermem.events`: one frozen class per kind, whose
signal has the kind's name, and each of tiermem's own kinds recorded in the example
that keeps their payloads unchanged."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from tiermem import signals
from tiermem.events import (
    KINDS,
    DocumentPut,
    EntryAdded,
    Event,
    LayerCleared,
    Pruned,
    Recorded,
    TierChanged,
    load_payload,
)
from tiermem.types import EntryType, MemoryEntry

RECORDED = Path(__file__).parents[1] / "integration" / "event_payloads.jsonl"

#: Recorded by the LangGraph store's own test (``test_store_events.py``).
STORE_KINDS = {"document:put", "document:deleted"}


def _entry(entry_id: int = 7) -> MemoryEntry:
    text = 'say "hi" ü'
    return MemoryEntry(
        id=entry_id,
        session_id="s",
        seq=3,
        type=EntryType.MESSAGE,
        role="user",
        content=text,
        timestamp=datetime(2026, 1, 1, tzinfo=UTC),
        token_count=5,
        compressed=False,
        summary_id=None,
        metadata={},
        pinned=False,
        message=HumanMessage(text),
    )


def test_every_kind_is_a_frozen_dataclass_named_once() -> None:
    """Each kind is a frozen dataclass of its own, listed under its wire name."""
    assert len(set(KINDS.values())) == len(KINDS)
    for kind, event_type in KINDS.items():
        assert issubclass(event_type, Event) and event_type.kind == kind
        assert dataclasses.is_dataclass(event_type)
        assert event_type.__dataclass_params__.frozen


def test_each_signal_belongs_to_the_kind_of_its_name() -> None:
    """Every tiermem signal is sent for exactly one kind, the one of its name."""
    signalled = {kind: t.signal for kind, t in KINDS.items() if t.signal is not None}
    assert sorted(signalled) == sorted(signals.SIGNAL_NAMES)
    for kind, signal in signalled.items():
        assert signal is signals.signal(kind)


def test_every_kind_is_in_the_recorded_example() -> None:
    """A kind without a recorded example could change its payload unnoticed."""
    lines = RECORDED.read_text(encoding="utf-8").splitlines()
    recorded = {json.loads(line)[0] for line in lines}
    assert set(KINDS) - STORE_KINDS <= recorded


def test_events_are_frozen() -> None:
    """An event cannot be changed after it is built."""
    event = TierChanged(("a",), "active", "p")
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.tier = "recent"  # type: ignore[misc]


def test_signal_arguments_are_the_fields() -> None:
    """A signal's receivers get the event's fields as keyword arguments."""
    entry = _entry()
    assert EntryAdded("s", entry).arguments() == {"session_id": "s", "entry": entry}
    assert Pruned(("a",), (), "p").arguments() == {
        "session_ids": ("a",),
        "item_ids": (),
        "project": "p",
    }


def test_an_entry_payload_splits_around_its_id() -> None:
    """The head and tail an append writes around the id its insert gives make the
    same stored payload as the event's row, which reads back as the whole payload,
    with and without content."""
    entry = _entry(entry_id=1234)
    for content in (False, True):
        head, tail = EntryAdded.parts(_entry(entry_id=-1), content)
        (row,) = EntryAdded("s", entry).rows(content)
        assert f"{head}1234{tail}" == row.payload
        assert load_payload(row.kind, row.payload) == EntryAdded.payload(entry, content)


def test_an_entry_payload_is_stored_as_its_values() -> None:
    """An entry's event stores its values alone, not an object repeating each key,
    its type and role as numbers, and reads back as the object's JSON, keys sorted
    as before; a payload stored as an object, or as an array of strings (by earlier
    versions), reads as it was."""
    entry = dataclasses.replace(_entry(entry_id=7), pinned=True)
    (row,) = EntryAdded("s", entry).rows(True)
    whole = json.dumps(EntryAdded.payload(entry, True), separators=(",", ":"), sort_keys=True)
    assert json.loads(row.payload) == [7, 3, 5, 1, 0, 0, 'say "hi" ü']
    assert len(row.payload) < len(whole) - 60
    assert json.dumps(load_payload(row.kind, row.payload), separators=(",", ":")) == whole
    assert load_payload(row.kind, whole) == EntryAdded.payload(entry, True)
    spelled = '[7,3,5,1,"message","user","say \\"hi\\" \\u00fc"]'
    assert load_payload(row.kind, spelled) == EntryAdded.payload(entry, True)


@pytest.mark.parametrize("entry_type", list(EntryType))
@pytest.mark.parametrize("role", ["user", "assistant", "tool", "system", "critic", "0"])
def test_every_type_and_role_reads_back(entry_type: EntryType, role: str) -> None:
    """Every entry type, and the four frequent roles, are stored as numbers; any other
    role as its string (a role spelled like a number stays a string), and each reads
    back as it was."""
    entry = dataclasses.replace(_entry(), type=entry_type, role=role)
    (row,) = EntryAdded("s", entry).rows(False)
    values = json.loads(row.payload)
    assert isinstance(values[4], int)
    assert isinstance(values[5], int) == (role in ("user", "assistant", "tool", "system"))
    assert load_payload(row.kind, row.payload) == EntryAdded.payload(entry, False)


@pytest.mark.parametrize(
    ("event", "rows"),
    [
        (
            TierChanged(("a", "b"), "recent", "p"),
            [
                ("tier_changed", "a", '{"tier":"recent"}'),
                ("tier_changed", "b", '{"tier":"recent"}'),
            ],
        ),
        (Pruned((), (), "p"), []),
        (
            LayerCleared("scope", None, 2),
            [("layer:cleared", None, '{"layer":null,"removed":2,"scope":"scope"}')],
        ),
        (
            DocumentPut(("a", "b"), "k"),
            [("document:put", None, '{"key":"k","namespace":["a","b"]}')],
        ),
        (Recorded("x:y", {"b": 1, "a": [2]}, "s"), [("x:y", "s", '{"a":[2],"b":1}')]),
    ],
)
def test_rows(event: Event, rows: list[tuple[str, str | None, str]]) -> None:
    """Rows per session where a kind names several, none for an empty batch, compact
    JSON with sorted keys."""
    assert [(r.kind, r.session_id, r.payload) for r in event.rows(False)] == rows
