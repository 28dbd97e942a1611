"""Export is deterministic and round-trips byte for byte; import is validated and atomic."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig, SessionState
from tiermem.errors import ImportValidationError
from tiermem.testing import FakeSummarizer, ManualClock, SignalRecorder

from ..conftest import MemoryFactory
from .helpers import canonical_dump

CONFIG = MemoryConfig(auto_compress=False, summary_share=0.01, max_tokens=1_000)


def build_session(memory: ConversationMemory, sid: str = "s") -> None:
    """A session with every entry kind, exotic text, summaries and a merged summary."""
    memory.add_context(sid, "Always answer in French", source="rules", pinned=True)
    for turn in range(6):
        memory.add_user_message(sid, f"question {turn}: what about \x00 and 😀 <|endoftext|>?")
        memory.add_message(
            sid,
            AIMessage(
                "",
                tool_calls=[{"name": "search", "args": {"q": f"q{turn}"}, "id": f"c{turn}"}],
                id=f"ai-{turn}",
            ),
        )
        memory.add_tool_result(sid, "search", f"result {turn}", call_id=f"c{turn}")
        memory.add_message(
            sid,
            HumanMessage(
                content=[
                    {"type": "text", "text": f"see picture {turn}"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
                additional_kwargs={"turn": turn, "nested": {"list": [1, None, "x"]}},
            ),
        )
        if turn in (1, 3):
            memory.compress(sid, force=True, keep=4)
    memory.add_tool_call(sid, "pending_tool", {"a": 1}, call_id="open")


@pytest.fixture(name="memory")
def fixture_memory(make_memory: MemoryFactory) -> ConversationMemory:
    """A memory with a fake summarizer that merges summaries eagerly."""
    return make_memory(config=CONFIG, summarizer=FakeSummarizer())


def test_export_is_deterministic(memory: ConversationMemory) -> None:
    """Two exports of an unchanged session are byte-identical canonical JSON."""
    build_session(memory)
    first = memory.export_session("s")
    second = memory.export_session("s")
    assert first.to_json() == second.to_json()
    text = first.to_json()
    assert json.loads(text) == first.model_dump(mode="json")
    assert text == json.dumps(
        json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert first.schema_version == 1 and first.session_id == "s"
    assert [e.seq for e in first.entries] == list(range(1, len(first.entries) + 1))
    assert any(s.parent is not None for s in first.summaries), "a merged summary is exported"


def test_json_round_trip_is_byte_identical(
    memory: ConversationMemory, make_memory: MemoryFactory
) -> None:
    """export -> JSON -> import -> export gives the same bytes (I10), on a fresh memory too."""
    build_session(memory)
    original = memory.export_session("s").to_json()
    assert SessionState.from_json(original).to_json() == original
    assert SessionState.from_json(original.encode("utf-8")).to_json() == original
    entries_before = [e.message for e in memory.get_entries("s")]
    memory.clear_session("s")
    assert memory.import_session(original) == "s"
    assert memory.export_session("s").to_json() == original
    other = make_memory(config=CONFIG)
    assert other.import_session(SessionState.from_json(original), overwrite=True) == "s"
    assert other.export_session("s").to_json() == original
    assert [e.message for e in other.get_entries("s")] == entries_before


def test_imported_session_works(memory: ConversationMemory) -> None:
    """An imported session reads, expands, answers its pending call and compresses."""
    build_session(memory)
    # Without a recalled block: its entry ids are the copy's own.
    expected_messages = memory.get_messages("s", query="")
    expected_stats = memory.get_stats("s")
    state = memory.export_session("s")
    assert memory.import_session(state, session_id="copy") == "copy"
    assert memory.get_messages("copy", query="")[1:] == expected_messages[1:]
    stats = memory.get_stats("copy")
    assert (stats.total_entries, stats.active_entries, stats.summaries, stats.total_tokens) == (
        expected_stats.total_entries,
        expected_stats.active_entries,
        expected_stats.summaries,
        expected_stats.total_tokens,
    )
    top = memory.get_summaries("copy")[0]
    assert [e.seq for e in memory.expand_summary(top.id)] == [
        e.seq for e in memory.get_entries("copy") if e.compressed
    ]
    memory.add_tool_result("copy", "pending_tool", "answered")
    assert memory.compress("copy", force=True, keep=1) is not None
    copied = memory.export_session("copy")
    assert copied.session_id == "copy"


def test_import_existing_needs_overwrite(engine: Engine, memory: ConversationMemory) -> None:
    """Importing over an existing session fails unless overwrite=True, which replaces it."""
    build_session(memory)
    state = memory.export_session("s")
    memory.clear_session("s")
    memory.add_user_message("s", "a different conversation")
    before = canonical_dump(engine)
    with pytest.raises(ImportValidationError) as info:
        memory.import_session(state)
    assert info.value.path == "$.session_id"
    assert canonical_dump(engine) == before
    memory.import_session(state, overwrite=True)
    assert memory.export_session("s").to_json() == state.to_json()
    assert "a different conversation" not in [e.content for e in memory.get_entries("s")]


def _valid(memory: ConversationMemory) -> dict[str, Any]:
    memory.add_user_message("src", "hello")
    memory.add_tool_call("src", "search", {"q": "x"}, call_id="c1")
    memory.add_tool_result("src", "search", "found", call_id="c1")
    memory.add_assistant_message("src", "done")
    data: dict[str, Any] = json.loads(memory.export_session("src").to_json())
    memory.clear_session("src")
    return data


def _edit(change: Callable[[dict[str, Any]], object]) -> Callable[[dict[str, Any]], str]:
    def build(data: dict[str, Any]) -> str:
        change(data)
        return json.dumps(data)

    return build


def _text(change: Callable[[str], str]) -> Callable[[dict[str, Any]], str]:
    return lambda data: change(json.dumps(data))


_ACCESS_COUNT = re.compile(r'"access_count": \d+')


def _deep(data: dict[str, Any]) -> str:
    nested = '{"a":' * 1_000 + "1" + "}" * 1_000
    return json.dumps(data).replace('"metadata": {}', f'"metadata": {nested}', 1)


def _entry_type(value: str) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["entries"][0]["message"]["type"] = value

    return change


MALFORMED: dict[str, tuple[Callable[[dict[str, Any]], str], str]] = {
    "truncated": (_text(lambda t: t[: len(t) // 2]), "$"),
    "not json": (_text(lambda t: "schema_version: 1"), "$"),
    "bom": (_text(lambda t: "\ufeff" + t), "$"),
    "list top level": (_text(lambda t: f"[{t}]"), "$"),
    "deep nesting": (_deep, "$"),
    "nan": (_text(lambda t: _ACCESS_COUNT.sub('"access_count": NaN', t)), "$"),
    "infinity": (_text(lambda t: _ACCESS_COUNT.sub('"access_count": -Infinity', t)), "$"),
    "duplicate keys": (_text(lambda t: '{"session_id": "dup", ' + t[1:]), "$"),
    "missing schema_version": (_edit(lambda d: d.pop("schema_version")), "$.schema_version"),
    "future schema_version": (_edit(lambda d: d.update(schema_version=2)), "$.schema_version"),
    "string seq": (_edit(lambda d: d["entries"][0].update(seq="1")), "$.entries[0].seq"),
    "seq gap": (_edit(lambda d: d["entries"][1].update(seq=3)), "$.entries[1].seq"),
    "seq duplicate": (_edit(lambda d: d["entries"][1].update(seq=1)), "$.entries[1].seq"),
    "negative access_count": (_edit(lambda d: d.update(access_count=-1)), "$.access_count"),
    "unknown field": (_edit(lambda d: d.update(extra=1)), "$.extra"),
    "missing entries": (_edit(lambda d: d.pop("entries")), "$.entries"),
    "unknown message type": (_edit(_entry_type("alien")), "$.entries[0].message"),
    "type mismatch": (
        _edit(lambda d: d["entries"][0].update(role="assistant")),
        "$.entries[0].type",
    ),
    "call removed, seq gap": (_edit(lambda d: d["entries"].pop(1)), "$.entries[1].seq"),
    "orphan result, dense": (
        _edit(
            lambda d: [
                d["entries"].pop(1),
                [e.update(seq=i + 1) for i, e in enumerate(d["entries"])],
            ]
        ),
        "$.entries[1].message",
    ),
    "summary index out of range": (
        _edit(lambda d: d["entries"][0].update(summary=5)),
        "$.entries[0].summary",
    ),
    "lone surrogate": (_text(lambda t: t.replace('"hello"', '"bad \\ud800"')), "$"),
    "empty session id": (_edit(lambda d: d.update(session_id="")), "$.session_id"),
    "newline session id": (_edit(lambda d: d.update(session_id="x\n")), "$.session_id"),
    "long session id": (_edit(lambda d: d.update(session_id="x" * 256)), "$.session_id"),
    "naive datetime": (_edit(lambda d: d.update(created_at="2026-01-01T12:00:00")), "$.created_at"),
}


def _refusals(memory: ConversationMemory, case: str, payload: str) -> list[ImportValidationError]:
    """The errors importing ``payload`` raises, as text and as UTF-8 bytes; the test
    fails if either imports."""
    errors = []
    for attempt in (payload, payload.encode("utf-8", "surrogatepass")):
        try:
            memory.import_session(attempt)
        except ImportValidationError as error:
            errors.append(error)
        else:
            pytest.fail(f"{case}: imported without an error")
    return errors


def test_malformed_import_changes_nothing(engine: Engine, memory: ConversationMemory) -> None:
    """Each malformed export raises ImportValidationError with its JSON path; nothing changes."""
    data = _valid(memory)
    memory.add_user_message("bystander", "must survive")
    before = canonical_dump(engine)
    with SignalRecorder(memory).recording() as recorder:
        for case, (build, path) in MALFORMED.items():
            for error in _refusals(memory, case, build(json.loads(json.dumps(data)))):
                assert error.path.startswith(path), f"{case}: {error}"
                assert str(error).startswith(error.path), case
    assert recorder.events == []
    assert canonical_dump(engine) == before


def test_valid_corpus_base_imports(memory: ConversationMemory) -> None:
    """The unmodified base document of the malformed corpus imports (the cases are real)."""
    data = _valid(memory)
    assert memory.import_session(json.dumps(data)) == "src"
    assert [e.content for e in memory.get_entries("src")][0] == "hello"


def test_import_rejects_other_types(engine: Engine, memory: ConversationMemory) -> None:
    """Only a SessionState, str or bytes is accepted."""
    memory.add_user_message("s", "x")
    before = canonical_dump(engine)
    for bad in ({"session_id": "s"}, 42, None):
        with pytest.raises(ImportValidationError):
            memory.import_session(bad)  # type: ignore[arg-type]
    assert canonical_dump(engine) == before


def test_import_of_oversized_export(
    monkeypatch: pytest.MonkeyPatch, memory: ConversationMemory
) -> None:
    """An export over the size cap is refused before it is parsed."""
    from tiermem import state

    data = json.dumps(_valid(memory))
    monkeypatch.setattr(state, "MAX_IMPORT_BYTES", len(data) - 1)
    with pytest.raises(ImportValidationError, match="larger"):
        memory.import_session(data)


def test_import_under_bad_target_id(memory: ConversationMemory) -> None:
    """A bad session_id= override is refused like a bad id in the document."""
    data = json.dumps(_valid(memory))
    with pytest.raises(ImportValidationError) as info:
        memory.import_session(data, session_id=" padded ")
    assert info.value.path == "$.session_id"


def test_round_trip_of_tool_message_details(memory: ConversationMemory) -> None:
    """Tool results keep status, artifact and name through export and import."""
    memory.add_message("t", AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "k"}]))
    result = ToolMessage("boom", tool_call_id="k", name="f", status="error", artifact={"a": 1})
    memory.add_message("t", result)
    state = memory.export_session("t")
    memory.import_session(state.to_json(), session_id="t2")
    assert memory.get_entries("t2")[1].message == result


# --------------------------------------------------------------------------- summary structure

#: Indexes of the summaries in the export of :func:`_summarized` (by first seq, then
#: level): two level-1 summaries merged into a level-2 one, then a level-1 summary
#: left unmerged.
FIRST, MERGED, SECOND, LATE = 0, 1, 2, 3
#: Index of the first entry of turn ``t`` (user, tool call, tool result, answer).
TURN = [1 + 4 * turn for turn in range(4)]
PENDING = 17


def _summarized(memory: ConversationMemory) -> dict[str, Any]:
    """A valid export with summaries: a pinned entry inside the compressed prefix, two
    compressions merged into a level-2 summary, a third compression left unmerged after
    it, an active tail and an unanswered call. The session is cleared afterwards."""
    sid = "sum"
    memory.add_context(sid, "Always answer in French", source="rules", pinned=True)
    for turn in range(4):
        memory.add_user_message(sid, f"question {turn}: what do the archives say about it")
        memory.add_tool_call(sid, "search", {"q": f"archives {turn}"}, call_id=f"c{turn}")
        memory.add_tool_result(sid, "search", f"result {turn}: three old letters", f"c{turn}")
        memory.add_assistant_message(sid, f"answer {turn}: the letters mention a journey")
        if turn >= 1:
            memory.compress(sid, force=True, keep=4)
        if turn == 2:
            memory.update_config(summary_share=0.9)  # the third summary stays unmerged
    memory.add_tool_call(sid, "search", {"q": "open"}, call_id="open")
    data: dict[str, Any] = json.loads(memory.export_session(sid).to_json())
    memory.clear_session(sid)
    return data


def _check_layout(data: dict[str, Any]) -> None:
    """The structure the summary corpus below edits."""
    assert [
        (s["level"], s["parent"], s["first_seq"], s["last_seq"]) for s in data["summaries"]
    ] == [
        (1, MERGED, 2, 5),
        (2, None, 2, 9),
        (1, MERGED, 6, 9),
        (1, None, 10, 13),
    ]
    assert [e["summary"] for e in data["entries"]] == (
        [None] + [FIRST] * 4 + [SECOND] * 4 + [LATE] * 4 + [None] * 5
    )
    assert [e["pinned"] for e in data["entries"]] == [True] + [False] * 17
    assert data["entries"][PENDING]["message"]["data"]["tool_calls"][0]["id"] == "open"


def _unlink(summary: int) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        for entry in data["entries"]:
            if entry["summary"] == summary:
                entry["summary"] = None

    return change


def _summary(index: int, **fields: object) -> Callable[[dict[str, Any]], None]:
    return lambda data: data["summaries"][index].update(fields)


def _entry(index: int, **fields: object) -> Callable[[dict[str, Any]], None]:
    return lambda data: data["entries"][index].update(fields)


def _unmerge(data: dict[str, Any]) -> None:
    data["summaries"][FIRST]["parent"] = data["summaries"][SECOND]["parent"] = None


def _hole_in_prefix(data: dict[str, Any]) -> None:
    # The first summary gives up its first entry (and its range shrinks to match):
    # that entry is active although later entries are compressed.
    data["summaries"][FIRST]["first_seq"] = 3
    data["entries"][TURN[0]]["summary"] = None


def _call_without_id(data: dict[str, Any]) -> None:
    data["entries"][TURN[2] + 1]["message"]["data"]["tool_calls"][0]["id"] = ""


#: case -> (edit of the valid document, exact JSON path, words of the error message).
SUMMARY_MALFORMED: dict[str, tuple[Callable[[dict[str, Any]], None], str, str]] = {
    "summary covering 0 entries": (_unlink(LATE), f"$.summaries[{LATE}]", "covers no entry"),
    "inverted seq range": (_summary(LATE, first_seq=14), f"$.summaries[{LATE}]", "bad seq range"),
    "range past the last entry": (
        _summary(LATE, last_seq=99),
        f"$.summaries[{LATE}]",
        "bad seq range",
    ),
    "range wider than its entries": (
        _summary(LATE, last_seq=14),
        f"$.summaries[{LATE}]",
        "range does not match its entries",
    ),
    "entry linked to the wrong summary": (
        _entry(TURN[0], summary=SECOND),
        f"$.summaries[{FIRST}]",
        "range does not match its entries",
    ),
    "overlapping top-level ranges": (
        _summary(MERGED, last_seq=10),
        "$.summaries",
        "summary ranges overlap",
    ),
    "parent index out of range": (
        _summary(FIRST, parent=9),
        f"$.summaries[{FIRST}].parent",
        "parent index out of range",
    ),
    "summary is its own parent": (
        _summary(MERGED, parent=MERGED),
        f"$.summaries[{MERGED}].parent",
        "parent index out of range",
    ),
    "parent at the child's level": (
        _summary(FIRST, level=2),
        f"$.summaries[{FIRST}].parent",
        "parent must be higher and cover the child",
    ),
    "parent not covering the child": (
        _summary(LATE, parent=MERGED),
        f"$.summaries[{LATE}].parent",
        "parent must be higher and cover the child",
    ),
    "merged summary without children": (
        _unmerge,
        f"$.summaries[{MERGED}]",
        "merged summary has no children",
    ),
    "active entry inside the compressed prefix": (
        _hole_in_prefix,
        "$.entries",
        "active entry inside the compressed prefix",
    ),
    "compressed pinned entry": (
        _entry(TURN[0], pinned=True),
        f"$.entries[{TURN[0]}].pinned",
        "pinned entries are never compressed",
    ),
    "tool call and result split by a summary": (
        _entry(TURN[2] + 2, summary=None),
        f"$.entries[{TURN[2] + 2}].summary",
        "different sides of a summary",
    ),
    "compressed unanswered call": (
        _entry(PENDING, summary=LATE),
        "$.entries",
        "unanswered tool call is compressed",
    ),
    "result of a tool call without an id": (
        _call_without_id,
        f"$.entries[{TURN[2] + 2}].message",
        "tool result without its call",
    ),
    "empty summary content": (
        _summary(FIRST, content=""),
        f"$.summaries[{FIRST}].content",
        "at least 1 character",
    ),
    "summary level 0": (
        _summary(FIRST, level=0),
        f"$.summaries[{FIRST}].level",
        "greater than or equal",
    ),
    "summary seq 0": (
        _summary(LATE, first_seq=0),
        f"$.summaries[{LATE}].first_seq",
        "greater than",
    ),
    "naive entry timestamp": (
        lambda data: data["entries"][TURN[1]].update(timestamp="2026-01-02T03:04:05"),
        f"$.entries[{TURN[1]}].timestamp",
        "must carry a UTC offset",
    ),
    "naive summary time": (
        _summary(SECOND, end_time="2026-01-02T03:04:05"),
        f"$.summaries[{SECOND}].end_time",
        "must carry a UTC offset",
    ),
    "summary without last_seq": (
        lambda data: data["summaries"][LATE].pop("last_seq"),
        f"$.summaries[{LATE}].last_seq",
        "Field required",
    ),
}


def test_summary_corpus_base_imports(memory: ConversationMemory) -> None:
    """The base document of the summary corpus has the structure the cases edit, and
    imports unchanged (so each case fails only for its own edit)."""
    data = _summarized(memory)
    _check_layout(data)
    text = json.dumps(data)
    assert memory.import_session(text) == "sum"
    assert memory.export_session("sum").to_json() == SessionState.from_json(text).to_json()


def test_malformed_summary_structure_changes_nothing(
    engine: Engine, memory: ConversationMemory
) -> None:
    """Each broken summary structure raises ImportValidationError naming the offending
    JSON path and the rule it breaks; nothing is written and no signal is sent."""
    data = _summarized(memory)
    _check_layout(data)
    memory.add_user_message("bystander", "must survive")
    before = canonical_dump(engine)
    with SignalRecorder(memory).recording() as recorder:
        for case, (change, path, reason) in SUMMARY_MALFORMED.items():
            broken = copy.deepcopy(data)
            change(broken)
            for error in _refusals(memory, case, json.dumps(broken)):
                assert error.path == path, f"{case}: {error}"
                assert str(error).startswith(f"{path}: "), f"{case}: {error}"
                assert reason in str(error), f"{case}: {error}"
    assert recorder.events == []
    assert canonical_dump(engine) == before


# --------------------------------------------------------------------------- time


def test_future_last_accessed_is_clamped_on_import(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """An export stamped a year ahead (written by a host whose clock ran fast) imports
    with created_at and last_accessed clamped to now, as a new session and over an
    existing one: ACTIVE, kept by a prune at exactly 30 days, pruned one second later,
    never early and never made immortal."""
    memory = make_memory(config=CONFIG)
    data = _valid(memory)
    ahead = (clock.now + timedelta(days=365)).isoformat()
    data.update(created_at=ahead, last_accessed=ahead)
    memory.add_user_message("replaced", "an older conversation")
    imported_at = clock.advance(hours=2)
    assert memory.import_session(json.dumps(data), session_id="new") == "new"
    assert (
        memory.import_session(json.dumps(data), session_id="replaced", overwrite=True) == "replaced"
    )
    sessions = {info.session_id: info for info in memory.list_sessions()}
    assert set(sessions) == {"new", "replaced"}
    for sid, info in sessions.items():
        assert (info.created_at, info.last_accessed) == (imported_at, imported_at), sid
        assert info.memory_tier == "active", sid
        exported = memory.export_session(sid)
        assert (exported.created_at, exported.last_accessed) == (imported_at, imported_at), sid
    clock.advance(days=30)
    assert memory.get_tier_stats().archived == 2
    assert memory.prune_expired() == 0
    assert {info.session_id for info in memory.list_sessions()} == {"new", "replaced"}
    clock.advance(seconds=1)
    assert memory.get_tier_stats().expired == 2
    assert memory.prune_expired() == 2
    assert memory.list_sessions() == []
