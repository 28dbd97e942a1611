"""An import accepts exactly what the doctor accepts, and only what both backends store:
the structural rules, integer and date ranges, the entry size limit, message ids,
and overwrite imports racing each other."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig, SessionState
from tiermem._ops import transfer as state_module
from tiermem.doctor import find_violations
from tiermem.errors import EntryTooLarge, ImportValidationError, InvalidContent
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory
from .helpers import canonical_dump
from .test_state_export_import import (
    CONFIG,
    FIRST,
    LATE,
    MERGED,
    _check_layout,
    _summarized,
)

Edit = Callable[[dict[str, Any]], None]


def _link_late_to_merged(data: dict[str, Any]) -> None:
    # The last level-1 summary goes; its entries link straight to the merged summary,
    # whose range grows over them.
    data["summaries"].pop(LATE)
    data["summaries"][MERGED]["last_seq"] = 13
    for entry in data["entries"]:
        if entry["summary"] == LATE:
            entry["summary"] = MERGED


def _set(index: int, **fields: object) -> Edit:
    return lambda data: data["summaries"][index].update(fields)


#: States the doctor reports broken, which the import used to accept:
#: case -> (edit of the valid document, JSON path, words of the error).
DOCTOR_REJECTS: dict[str, tuple[Edit, str, str]] = {
    "entry linked to a merged summary": (
        _link_late_to_merged,
        "$.entries[9].summary",
        "linked to a merged summary",
    ),
    "merged summary wider than its children": (
        _set(MERGED, first_seq=1),
        f"$.summaries[{MERGED}]",
        "children span 2..9",
    ),
    "summary created before its entries": (
        _set(LATE, created_at="2000-01-01T00:00:00Z"),
        f"$.summaries[{LATE}].created_at",
        "created before the entries it covers",
    ),
    "merged summary created before its entries": (
        _set(MERGED, created_at="2000-01-01T00:00:00Z"),
        f"$.summaries[{MERGED}].created_at",
        "created before the entries it covers",
    ),
    "summary longer than what it covers": (
        _set(FIRST, content="a very long summary " * 40),
        f"$.summaries[{FIRST}].content",
        "not shorter than what it covers",
    ),
    "error stub as a summary": (
        _set(LATE, content="Error: rate limited"),
        f"$.summaries[{LATE}].content",
        "error stub",
    ),
}


@pytest.fixture(name="memory")
def fixture_memory(make_memory: MemoryFactory) -> ConversationMemory:
    """A memory like the export/import tests' (its summarizer merges eagerly)."""
    return make_memory(config=CONFIG, summarizer=FakeSummarizer())


def _broken(data: dict[str, Any], edit: Edit) -> str:
    changed = copy.deepcopy(data)
    edit(changed)
    return json.dumps(changed)


@pytest.mark.parametrize("case", list(DOCTOR_REJECTS))
def test_import_refuses_what_the_doctor_reports(
    engine: Engine, memory: ConversationMemory, case: str
) -> None:
    """Each state the doctor reports broken is refused by the import, with its JSON path
    and the rule, and nothing is written."""
    data = _summarized(memory)
    _check_layout(data)
    edit, path, reason = DOCTOR_REJECTS[case]
    before = canonical_dump(engine)
    with pytest.raises(ImportValidationError) as info:
        memory.import_session(_broken(data, edit))
    assert info.value.path == path, info.value
    assert reason in str(info.value), info.value
    assert canonical_dump(engine) == before


def test_the_doctor_reports_each_refused_state(
    engine: Engine, memory: ConversationMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same states, written without the structural validation, are each reported
    by the doctor: import and doctor apply one set of rules."""
    data = _summarized(memory)
    assert memory.import_session(json.dumps(data)) == "sum"
    assert find_violations(engine) == []
    memory.clear_session("sum")
    monkeypatch.setattr(state_module, "session_problems", lambda entries, summaries: iter(()))
    for case, (edit, _, reason) in DOCTOR_REJECTS.items():
        memory.import_session(_broken(data, edit), session_id="raw")
        problems = find_violations(engine)
        memory.clear_session("raw")
        assert any("session 'raw'" in p and reason in p for p in problems), (case, problems)


# --------------------------------------------------------------------------- values


def _valid(memory: ConversationMemory) -> dict[str, Any]:
    memory.add_user_message("src", "hello")
    memory.add_assistant_message("src", "hi there")
    data: dict[str, Any] = json.loads(memory.export_session("src").to_json())
    memory.clear_session("src")
    return data


def _top(**fields: object) -> Edit:
    return lambda data: data.update(fields)


def _entry(**fields: object) -> Edit:
    return lambda data: data["entries"][1].update(fields)


#: Values one backend or the other cannot store: case -> (edit, JSON path).
UNSTORABLE: dict[str, tuple[Edit, str]] = {
    "access_count 2**64": (_top(access_count=2**64), "$.access_count"),
    "access_count 2**31": (_top(access_count=2**31), "$.access_count"),
    "seq 2**63": (_entry(seq=2**63), "$.entries[1].seq"),
    "created_at past year 9999 in UTC": (
        _top(created_at="9999-12-31T23:59:59-05:00"),
        "$.created_at",
    ),
    "last_accessed before year 1 in UTC": (
        _top(last_accessed="0001-01-01T00:00:00+05:00"),
        "$.last_accessed",
    ),
    "timestamp no time zone can show": (
        _entry(timestamp="9999-12-31T12:00:00Z"),
        "$.entries[1].timestamp",
    ),
}


@pytest.mark.parametrize("case", list(UNSTORABLE))
def test_unstorable_values_are_refused_with_their_path(
    engine: Engine, memory: ConversationMemory, case: str
) -> None:
    """Integers beyond an INTEGER column and dates beyond the years 1-9999 (in UTC, with a
    day to spare for the time zone PostgreSQL shows them in) raise ImportValidationError
    naming the field, on both backends; nothing is written."""
    edit, path = UNSTORABLE[case]
    data = _valid(memory)
    before = canonical_dump(engine)
    with pytest.raises(ImportValidationError) as info:
        memory.import_session(_broken(data, edit))
    assert info.value.path == path, info.value
    assert canonical_dump(engine) == before


def test_the_largest_storable_values_round_trip(memory: ConversationMemory) -> None:
    """The bounds themselves import and export unchanged."""
    data = _valid(memory)
    data.update(access_count=2**31 - 1)
    data["entries"][0]["timestamp"] = "0001-01-02T00:00:00Z"
    data["entries"][1]["timestamp"] = "9999-12-30T23:59:59.999999Z"
    text = SessionState.from_json(json.dumps(data)).to_json()
    memory.import_session(text)
    assert memory.export_session("src").to_json() == text


# --------------------------------------------------------------------------- sizes and ids


def test_metadata_counts_toward_max_entry_chars(engine: Engine, make_memory: MemoryFactory) -> None:
    """max_entry_chars bounds the message and its metadata together: large metadata
    raises EntryTooLarge before any SQL, whichever method stores it."""
    memory = make_memory(config=MemoryConfig(max_entry_chars=10_000))
    memory.add_user_message("s", "small", note="fits")
    before = canonical_dump(engine)
    big = "m" * 5_000_000
    with pytest.raises(EntryTooLarge) as info:
        memory.add_user_message("s", "hello", note=big)
    assert info.value.limit == 10_000 and info.value.size > 5_000_000
    with pytest.raises(EntryTooLarge):
        memory.add_message("s", HumanMessage("hello"), metadata={"note": "n" * 9_900})
    with pytest.raises(EntryTooLarge):
        memory.add_context("s", "rules", source="s" * 10_000)
    assert canonical_dump(engine) == before


def test_imported_entries_obey_max_entry_chars(engine: Engine, make_memory: MemoryFactory) -> None:
    """An imported entry whose message and metadata exceed the importing memory's
    max_entry_chars is refused with its path; one within it imports."""
    source = make_memory(config=CONFIG)
    source.add_user_message("src", "x" * 3_000)
    source.add_user_message("src", "short", note="y" * 3_000)
    text = source.export_session("src").to_json()
    source.clear_session("src")
    small = make_memory(config=MemoryConfig(max_entry_chars=2_000))
    before = canonical_dump(engine)
    with pytest.raises(ImportValidationError) as info:
        small.import_session(text)
    assert info.value.path == "$.entries[0]" and "max_entry_chars=2000" in str(info.value)
    fitting = json.loads(text)
    fitting["entries"][0]["message"]["data"]["content"] = "x"
    with pytest.raises(ImportValidationError) as info:
        small.import_session(json.dumps(fitting))
    assert info.value.path == "$.entries[1]"
    assert canonical_dump(engine) == before
    assert make_memory(config=MemoryConfig(max_entry_chars=4_000)).import_session(text) == "src"


def test_message_ids_have_one_limit_on_both_backends(
    engine: Engine, memory: ConversationMemory
) -> None:
    """A message id of 255 characters is stored and exported; a longer one is refused
    before any SQL, by add_* (InvalidContent) and by the import (with its path)."""
    memory.add_message("s", HumanMessage("fits", id="i" * 255))
    text = memory.export_session("s").to_json()
    memory.clear_session("s")
    memory.import_session(text)
    assert memory.get_entries("s")[0].message.id == "i" * 255
    before = canonical_dump(engine)
    with pytest.raises(InvalidContent, match="255"):
        memory.add_message("s", HumanMessage("too long", id="i" * 256))
    with pytest.raises(InvalidContent, match="255"):
        memory.add_messages("t", [HumanMessage("ok"), HumanMessage("too long", id="j" * 300)])
    data = json.loads(text)
    data["entries"][0]["message"]["data"]["id"] = "i" * 256
    with pytest.raises(ImportValidationError) as info:
        memory.import_session(json.dumps(data), session_id="copy")
    assert info.value.path == "$.entries[0].message"
    assert canonical_dump(engine) == before


# --------------------------------------------------------------------------- races


def test_concurrent_overwrite_imports_of_one_session(
    engine: Engine, make_memory: MemoryFactory
) -> None:
    """Two overwrite imports of one session started together: both succeed, one after the
    other, and the session is then exactly one of the two exports, round after round."""
    source = make_memory(config=CONFIG)
    exports = []
    for name in ("one", "two"):
        for turn in range(3):
            source.add_user_message(name, f"{name} question {turn}")
        exports.append(source.export_session(name).model_copy(update={"session_id": "s"}))
        source.clear_session(name)
    texts = {state.to_json() for state in exports}
    importers = [make_memory(config=CONFIG) for _ in exports]
    for importer in importers:
        importer.list_sessions()  # schema checks done before the race
    rounds = 15
    barrier = threading.Barrier(len(importers))
    errors: list[BaseException] = []

    def run(importer: ConversationMemory, state: SessionState) -> None:
        try:
            for _ in range(rounds):
                barrier.wait(30)
                importer.import_session(state, overwrite=True)
                barrier.wait(30)
        except BaseException as exc:  # handed back to the test
            errors.append(exc)
            barrier.abort()

    threads = [
        threading.Thread(target=run, args=(importer, state))
        for importer, state in zip(importers, exports, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert importers[0].export_session("s").to_json() in texts
    assert [info.session_id for info in importers[0].list_sessions()] == ["s"]
