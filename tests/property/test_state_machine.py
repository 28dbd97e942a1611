"""T37: a stateful model test. Hypothesis drives a ``ConversationMemory`` and a plain
Python model of it with the same random operations; after every step the store must
equal the model (messages, order, statuses, totals, access times, tiers) and every
invariant must hold (I1-I12)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_core.messages.tool import ToolCall
from sqlalchemy.engine import Engine

from tiermem import (
    MISSING_RESULT_MARKER,
    ConversationMemory,
    MemoryConfig,
    TierPolicy,
    calculate_tier,
    fts,
)
from tiermem._messages import render_text
from tiermem.errors import (
    InvalidContent,
    SessionNotFound,
    StorageError,
    SummarizationError,
)
from tiermem.invariants import find_violations, provider_shape_problems
from tiermem.rendering import MISSING_RESULT_TEXT
from tiermem.testing import FakeSummarizer, ManualClock
from tiermem.tokens import TokenCounter

from ..conftest import _create_schema, _drop_schema, pg_engine_for, sqlite_engine
from .strategies import SESSION_IDS, ToolGroupShape, messages, texts, tool_group_shapes

POLICY = TierPolicy()
CONFIG = MemoryConfig(
    auto_compress=False,
    max_tokens=1_000_000,
    max_entries=100_000,
    recent_window=2,
    min_entries_to_compress=1,
    max_summarizer_input_tokens=10_000_000,
)
#: Every this many steps, every session is compared in full and recounted.
FULL_CHECK_EVERY = 8
FAILING_MODES = ["raise", "empty", "whitespace", "none", "error_stub", "echo_x2", "tool_call"]
COUNTER = TokenCounter()
#: Words the search rule looks for (plain ASCII, so the model's word split is FTS5's).
MARKERS = ("kestrel", "osprey")


def _normal(message: BaseMessage) -> dict[str, Any]:
    """The JSON form of a message, as an export holds it."""
    return json.loads(json.dumps(message_to_dict(message)))  # type: ignore[no-any-return]


def _ids(message: BaseMessage) -> list[str]:
    return (
        [call["id"] or "" for call in message.tool_calls] if isinstance(message, AIMessage) else []
    )


@dataclass
class ModelEntry:
    """An entry as the model expects it."""

    message: BaseMessage
    tokens: int
    pinned: bool = False
    summary: int | None = None  # index into ModelSession.summaries


@dataclass
class ModelSession:
    """A session as the model expects it."""

    created: int
    last_accessed: datetime
    access_count: int = 0
    tier: str = "active"
    entries: list[ModelEntry] = field(default_factory=list)
    summaries: list[tuple[str, int]] = field(default_factory=list)  # (content, tokens)
    pending: dict[str, str] = field(default_factory=dict)

    def touch(self, now: datetime) -> None:
        """An access: reads and writes both count."""
        self.last_accessed = now
        self.access_count += 1
        self.tier = "active"

    def selection(self, keep: int) -> list[int]:
        """Indexes of the entries a forced compression takes: the oldest active unpinned
        ones outside the ``keep`` newest, cut before any call whose results lie beyond."""
        active = [i for i, e in enumerate(self.entries) if e.summary is None and not e.pinned]
        length = max(len(active) - keep, 0)
        answered_at = {
            message.tool_call_id: position
            for position, i in enumerate(active)
            if isinstance(message := self.entries[i].message, ToolMessage)
        }
        changed = True
        while changed and length:
            changed = False
            for position in range(length):
                calls = _ids(self.entries[active[position]].message)
                if any(answered_at.get(c, length) >= length for c in calls):
                    length, changed = position, True
                    break
        return active[:length]

    def rendered(self) -> list[BaseMessage]:
        """What ``get_messages`` hands a model: summaries, then active entries with each
        call's results right after it, in call order; a call that later messages
        follow without its result gets the documented stand-in error result."""
        active = [e.message for e in self.entries if e.summary is None]
        results = {m.tool_call_id: m for m in active if isinstance(m, ToolMessage)}
        groups: list[list[BaseMessage]] = []
        placed: set[str] = set()
        for message in active:
            if isinstance(message, ToolMessage):
                if message.tool_call_id not in placed:
                    groups.append([message])
                continue
            group = [message]
            for call_id in _ids(message):
                if call_id in results:
                    group.append(results[call_id])
                    placed.add(call_id)
            groups.append(group)
        out: list[BaseMessage] = []
        for position, group in enumerate(groups):
            head = group[0]
            if position < len(groups) - 1 and isinstance(head, AIMessage):
                group = [head] + [
                    results[call["id"] or ""] if call["id"] in results else _stand_in(call)
                    for call in head.tool_calls
                ]
            out.extend(group)
        return out


def _stand_in(call: ToolCall) -> ToolMessage:
    """The stand-in result the README documents for a call the talk went on without."""
    return ToolMessage(
        content=MISSING_RESULT_TEXT,
        tool_call_id=call["id"] or "",
        name=call["name"],
        status="error",
        id=f"tiermem-missing-{call['id']}",
        additional_kwargs={MISSING_RESULT_MARKER: True},
    )


def _summarize(prompt: str) -> str:
    """A summary of a few tokens: always shorter than any entry it covers."""
    return f"sum {len(prompt) % 997}"


class MemoryMachine(RuleBasedStateMachine):
    """ConversationMemory against :class:`ModelSession` objects on one backend."""

    backend = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.schemas: list[str] = []
        self.folder = tempfile.mkdtemp(prefix="tiermem-sm-")
        self.engine = self._engine("a")
        self.memory = self._memory(self.engine)
        self.other_engine = self._engine("b")
        self.other = self._memory(self.other_engine)
        self.model: dict[str, ModelSession] = {}
        self.created = 0
        self.next_call = 0
        self.other_changed = False
        self.dirty: set[str] = set()
        self.checks = 0

    # ------------------------------------------------------------------ plumbing

    def _engine(self, name: str) -> Engine:
        if self.backend == "sqlite":
            return sqlite_engine(Path(self.folder) / f"{name}.db")
        schema = _create_schema()
        self.schemas.append(schema)
        return pg_engine_for(schema)

    def _memory(self, engine: Engine) -> ConversationMemory:
        return ConversationMemory(
            engine=engine, config=CONFIG, summarizer=_summarize, clock=self.clock
        )

    def teardown(self) -> None:
        self.memory.close()
        self.other.close()
        self.engine.dispose()
        self.other_engine.dispose()
        for schema in self.schemas:
            _drop_schema(schema)
        for path in Path(self.folder).glob("*"):
            path.unlink()
        os.rmdir(self.folder)

    def _session(self, session_id: str) -> ModelSession:
        if session_id not in self.model:
            self.created += 1
            self.model[session_id] = ModelSession(created=self.created, last_accessed=self.clock())
        return self.model[session_id]

    def _call_id(self) -> str:
        self.next_call += 1
        return f"call_{self.next_call}"

    def _append(self, session_id: str, batch: list[BaseMessage], pinned: bool = False) -> None:
        """Append to store and model; a tool result without a pending call is refused."""
        self.dirty.add(session_id)
        pending = dict(self.model[session_id].pending) if session_id in self.model else {}
        valid = True
        for message in batch:
            if isinstance(message, ToolMessage) and pending.pop(message.tool_call_id, None) is None:
                valid = False
            for call in message.tool_calls if isinstance(message, AIMessage) else []:
                pending[call["id"] or ""] = call["name"]
        if not valid:
            with pytest.raises(InvalidContent):
                self.memory.add_messages(session_id, batch)
            return
        if pinned:
            stored = [self.memory.add_context(session_id, str(batch[0].content), "rule", True)]
        else:
            stored = self.memory.add_messages(session_id, batch)
        session = self._session(session_id)
        first = len(session.entries) + 1
        assert [e.seq for e in stored] == list(range(first, first + len(batch)))
        for message, entry in zip(batch, stored, strict=True):
            # Pinned context is stored as the system message add_context builds.
            expected = entry.message if pinned else message
            session.entries.append(ModelEntry(expected, COUNTER.count_message(message), pinned))
            assert _normal(entry.message) == _normal(expected)
        session.pending = pending
        session.touch(self.clock())

    # ------------------------------------------------------------------ rules: writing

    @initialize()
    def start(self) -> None:
        """Every example starts with one message, so the other rules have a session."""
        self._append("s1", [AIMessage("hello")])

    @rule(session_id=SESSION_IDS, message=messages())
    def add(self, session_id: str, message: BaseMessage) -> None:
        """add_message of a plain or multimodal message."""
        self._append(session_id, [message])

    @rule(session_id=SESSION_IDS, batch=st.lists(messages(), min_size=1, max_size=4))
    def add_batch(self, session_id: str, batch: list[BaseMessage]) -> None:
        """add_messages of several messages at once."""
        self._append(session_id, batch)

    @rule(session_id=SESSION_IDS, marker=st.sampled_from(MARKERS), text=texts)
    def add_marked(self, session_id: str, marker: str, text: str) -> None:
        """A message holding a known word, for the search rule."""
        self._append(session_id, [HumanMessage(f"{marker} {text}")])

    @rule(marker=st.sampled_from(MARKERS))
    def search(self, marker: str) -> None:
        """search finds exactly the entries holding the word, compressed or not, in every
        session, whatever the batched index has pending (a search indexes it first)."""
        expected = {
            (session_id, index + 1)
            for session_id, session in self.model.items()
            for index, entry in enumerate(session.entries)
            if marker in fts.words(render_text(entry.message))
        }
        hits = self.memory.search(marker, limit=10_000)
        assert {(hit.entry.session_id, hit.entry.seq) for hit in hits} == expected

    @rule(session_id=SESSION_IDS, shape=tool_group_shapes(), answer=st.booleans())
    def add_tool_group(self, session_id: str, shape: ToolGroupShape, answer: bool) -> None:
        """An assistant tool call turn, with all its results in the same batch or none
        (the calls then stay pending)."""
        ids = [self._call_id() for _ in shape.args]
        call = AIMessage(
            content=shape.text,
            tool_calls=[
                {"name": f"tool{i}", "args": args, "id": call_id}
                for i, (args, call_id) in enumerate(zip(shape.args, ids, strict=True))
            ],
        )
        results: list[BaseMessage] = [
            ToolMessage(content=shape.outputs[i], tool_call_id=ids[i], name=f"tool{i}")
            for i in shape.order
        ]
        self._append(session_id, [call, *results] if answer else [call])

    @rule(session_id=SESSION_IDS, output=texts, pick=st.integers(0, 5))
    def answer_pending(self, session_id: str, output: str, pick: int) -> None:
        """A tool result for one pending call (or, with none pending, an orphan result,
        which must be refused)."""
        pending = sorted(self.model[session_id].pending) if session_id in self.model else []
        call_id = pending[pick % len(pending)] if pending else "nobody"
        self._append(session_id, [ToolMessage(content=output, tool_call_id=call_id, name="t")])

    @rule(session_id=SESSION_IDS, text=texts)
    def add_pinned(self, session_id: str, text: str) -> None:
        """Pinned context: never compressed."""
        self._append(session_id, [SystemMessage(content=text)], pinned=True)

    @rule(session_id=SESSION_IDS, message=messages(), at=st.integers(1, 8))
    def add_with_fault(self, session_id: str, message: BaseMessage, at: int) -> None:
        """An append whose statement ``at`` fails: a no-op when it fires, normal otherwise."""
        seen: list[str] = []

        def fail(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            seen.append(statement)
            if len(seen) == at:
                raise sa.exc.OperationalError(statement, None, Exception("I/O error"))

        sa.event.listen(self.engine, "before_cursor_execute", fail)
        try:
            self._append(session_id, [message])
        except StorageError:
            assert len(seen) >= at
        finally:
            sa.event.remove(self.engine, "before_cursor_execute", fail)

    # ------------------------------------------------------------------ rules: compression

    @rule(session_id=SESSION_IDS, keep=st.integers(0, 4))
    def compress(self, session_id: str, keep: int) -> None:
        """A forced compression takes exactly the model's selection and links it."""
        self.dirty.add(session_id)
        if session_id not in self.model:
            with pytest.raises(SessionNotFound):
                self.memory.compress(session_id, force=True, keep=keep)
            return
        session = self.model[session_id]
        chosen = session.selection(keep)
        result = self.memory.compress(session_id, force=True, keep=keep)
        if not chosen:
            assert result is None
            return
        assert result is not None
        summary = result.summary
        assert (summary.first_seq, summary.last_seq) == (chosen[0] + 1, chosen[-1] + 1)
        assert result.entries_compressed == len(chosen)
        session.summaries.append((summary.content, COUNTER.count_text(summary.content)))
        for index in chosen:
            session.entries[index].summary = len(session.summaries) - 1

    @rule(session_id=SESSION_IDS, mode=st.sampled_from(FAILING_MODES))
    def compress_failing(self, session_id: str, mode: str) -> None:
        """A compression whose summarizer fails changes nothing."""
        self.dirty.add(session_id)
        if session_id not in self.model or not self.model[session_id].selection(0):
            return
        self.memory.set_summarizer(FakeSummarizer(mode=mode))
        try:
            with pytest.raises(SummarizationError):
                self.memory.compress(session_id, force=True, keep=0)
        finally:
            self.memory.set_summarizer(_summarize)

    # ------------------------------------------------------------------ rules: lifecycle

    @rule(session_id=SESSION_IDS)
    def clear(self, session_id: str) -> None:
        """clear_session removes the session and reports its entry count."""
        expected = len(self.model.pop(session_id).entries) if session_id in self.model else 0
        assert self.memory.clear_session(session_id) == expected

    @rule(session_id=SESSION_IDS)
    def read(self, session_id: str) -> None:
        """get_messages is the rendered model context (and records an access)."""
        self.dirty.add(session_id)
        got = self.memory.get_messages(session_id)
        if session_id not in self.model:
            assert got == []
            return
        session = self.model[session_id]
        session.touch(self.clock())
        body = got[1:] if session.summaries else got
        if session.summaries:
            assert isinstance(got[0], SystemMessage)
            assert all(content in str(got[0].content) for content, _ in session.summaries)
        assert [_normal(m) for m in body] == [_normal(m) for m in session.rendered()]
        for provider in ("openai", "anthropic"):
            assert provider_shape_problems(got, provider, pending=session.pending) == []

    @rule(session_id=SESSION_IDS)
    def track(self, session_id: str) -> None:
        """track_access records an access, or raises SessionNotFound."""
        self.dirty.add(session_id)
        if session_id not in self.model:
            with pytest.raises(SessionNotFound):
                self.memory.track_access(session_id)
            return
        info = self.memory.track_access(session_id)
        self.model[session_id].touch(self.clock())
        assert info.memory_tier == "active"

    @rule(delta=st.sampled_from([1, 59 * 60, 3600, 86_400, 10 * 86_400, 30 * 86_400 + 1]))
    def advance_clock(self, delta: int) -> None:
        """Time passes."""
        self.clock.advance(seconds=delta)

    @rule()
    def recalculate(self) -> None:
        """recalculate_tiers stores each session's tier by its last access."""
        changed = 0
        for session in self.model.values():
            tier = calculate_tier(session.last_accessed, self.clock(), POLICY).value
            changed += tier != session.tier
            session.tier = tier
        assert self.memory.recalculate_tiers() == changed

    @rule(limit=st.one_of(st.none(), st.integers(0, 3)))
    def prune(self, limit: int | None) -> None:
        """prune_expired deletes the oldest sessions idle for strictly more than 30 days."""
        cutoff = self.clock() - POLICY.expired_after
        expired = sorted(
            (s.last_accessed, s.created, sid)
            for sid, s in self.model.items()
            if s.last_accessed < cutoff
        )
        doomed = expired if limit is None else expired[:limit]
        assert self.memory.prune_expired(limit=limit) == len(doomed)
        for _, _, session_id in doomed:
            del self.model[session_id]

    # ------------------------------------------------------------------ rules: persistence

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def export_import(self, data: st.DataObject) -> None:
        """An export imports into a second store byte for byte, and back into this one as
        a copy that the model then tracks too."""
        session_id = data.draw(st.sampled_from(sorted(self.model)))
        state = self.memory.export_session(session_id)
        self.other.import_session(state, overwrite=True)
        self.other_changed = True
        assert self.other.export_session(session_id).to_json() == state.to_json()
        copy_id = f"copy-{session_id}"
        self.dirty.add(copy_id)
        existed = copy_id in self.model
        self.memory.import_session(state.to_json(), overwrite=True, session_id=copy_id)
        source = self.model[session_id]
        self.created += 1
        self.model[copy_id] = ModelSession(
            created=self.created,
            last_accessed=source.last_accessed,
            access_count=source.access_count,
            tier="active"
            if existed
            else calculate_tier(source.last_accessed, self.clock(), POLICY).value,
            entries=[ModelEntry(e.message, e.tokens, e.pinned, e.summary) for e in source.entries],
            summaries=list(source.summaries),
            pending=dict(source.pending),
        )

    @rule()
    def reopen(self) -> None:
        """Dispose the engine and open a new memory on the same file or schema."""
        self.memory.close()
        self.engine.dispose()
        if self.backend == "sqlite":
            self.engine = sqlite_engine(Path(self.folder) / "a.db")
        else:
            self.engine = pg_engine_for(self.schemas[0])
        self.memory = self._memory(self.engine)

    # ------------------------------------------------------------------ checks

    @invariant()
    def store_equals_model(self) -> None:
        """Every session's accesses, tier, entry count and context tokens match the model,
        and the sessions the step touched match it in full (messages, order, statuses,
        totals); every few steps every session is compared in full."""
        infos = {info.session_id: info for info in self.memory.list_sessions()}
        assert sorted(infos) == sorted(self.model)
        for session_id, session in self.model.items():
            info = infos[session_id]
            active = [e for e in session.entries if e.summary is None]
            context = sum(e.tokens for e in active) + sum(t for _, t in session.summaries)
            assert (info.last_accessed, info.access_count, info.memory_tier) == (
                session.last_accessed,
                session.access_count,
                session.tier,
            )
            assert (info.total_entries, info.context_tokens) == (len(session.entries), context)
        self.checks += 1
        everything = self.checks % FULL_CHECK_EVERY == 0
        for session_id in sorted(self.model if everything else self.dirty & set(self.model)):
            self._compare_fully(session_id)
        self.dirty.clear()

    def _compare_fully(self, session_id: str) -> None:
        session = self.model[session_id]
        state = self.memory.export_session(session_id)
        assert [e.seq for e in state.entries] == list(range(1, len(session.entries) + 1))
        assert [e.message for e in state.entries] == [_normal(e.message) for e in session.entries]
        assert [e.summary for e in state.entries] == [e.summary for e in session.entries]
        assert [e.pinned for e in state.entries] == [e.pinned for e in session.entries]
        assert [s.content for s in state.summaries] == [c for c, _ in session.summaries]
        assert state.last_accessed == session.last_accessed
        assert state.access_count == session.access_count
        stats = self.memory.get_stats(session_id)
        active = [e for e in session.entries if e.summary is None]
        assert (stats.total_entries, stats.active_entries, stats.summaries) == (
            len(session.entries),
            len(active),
            len(session.summaries),
        )
        assert stats.total_tokens == sum(e.tokens for e in session.entries)
        assert stats.active_tokens == sum(e.tokens for e in active)
        assert stats.summary_tokens == sum(t for _, t in session.summaries)

    @invariant()
    def invariants_hold(self) -> None:
        """I1-I12 on the store after every step (with the deep recount every few steps:
        the model comparison already checks every message and every total), and on the
        second store after each import into it."""
        engines = [self.engine, self.other_engine] if self.other_changed else [self.engine]
        self.other_changed = False
        deep = self.checks % FULL_CHECK_EVERY == 0
        for engine in engines:
            problems = find_violations(
                engine, now=self.clock(), deep=deep, claim_ttl=CONFIG.claim_ttl, policy=POLICY
            )
            assert problems == [], problems


class PostgresMachine(MemoryMachine):
    """The same machine on PostgreSQL (a fresh schema per example)."""

    backend = "postgres"


def _settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


MACHINES = {"sqlite": MemoryMachine, "postgres": PostgresMachine}


@pytest.mark.parametrize("backend", sorted(MACHINES))
def test_memory_matches_model(backend: str) -> None:
    """Short random programs keep the store equal to the model (fast profile)."""
    run_state_machine_as_test(MACHINES[backend], settings=_settings(10, 15))


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(MACHINES))
def test_memory_matches_model_long(backend: str) -> None:
    """Longer random programs keep the store equal to the model (slow profile)."""
    run_state_machine_as_test(MACHINES[backend], settings=_settings(50, 40))


def test_model_selection_never_splits_a_group() -> None:
    """The model's own selection stops before a call whose results come later."""
    session = ModelSession(created=1, last_accessed=datetime(2026, 1, 1, tzinfo=UTC))
    call = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c"}])
    for message in [SystemMessage("a"), call, SystemMessage("b")]:
        session.entries.append(ModelEntry(message, 5))
    assert session.selection(0) == [0]
    session.entries.append(ModelEntry(ToolMessage("r", tool_call_id="c"), 5))
    assert session.selection(0) == [0, 1, 2, 3]
    assert session.selection(1) == [0]
