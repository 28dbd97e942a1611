"""T37: a stateful model test. Hypothesis drives a ``ConversationMemory`` and a plain
Python model of it with the same random operations; after every step the store must
equal the model (messages, order, statuses, summaries, totals, access times, tiers) and
every invariant must hold (I1-I12). Storage faults are injected into appends,
compressions, prunes, imports and accesses (each must fail typed and change nothing);
a second configuration with a small budget makes summaries merge, and the model
follows each merge."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
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
    OMITTED_MARKER,
    RECALL_MARKER,
    TRUNCATED_MARKER,
    CompressionResult,
    ConversationMemory,
    MemoryConfig,
    TierPolicy,
    calculate_tier,
    is_summary_message,
)
from tiermem._core.budget import omitted_note
from tiermem._core.messages import render_text
from tiermem._core.render import MISSING_RESULT_TEXT, SUMMARY_HEADER
from tiermem._storage import fts
from tiermem.doctor import find_violations, provider_shape_problems
from tiermem.errors import (
    BudgetExceeded,
    InvalidContent,
    SessionNotFound,
    StorageError,
    SummarizationError,
)
from tiermem.testing import FakeSummarizer, ManualClock
from tiermem.tokens import MESSAGE_OVERHEAD, TokenCounter

from ..conftest import _create_schema, _drop_schema, pg_engine_for, sqlite_engine
from ..reliability.statement_faults import Fault, injected
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
#: A budget small enough that summaries merge (the share is drawn per run, see
#: MergingMachine.configure).
MERGE_CONFIG = CONFIG.replace(max_tokens=120)
#: Every this many steps, every session is compared in full and recounted (and always
#: once more at the end of a run, in teardown).
FULL_CHECK_EVERY = 8
FAILING_MODES = ["raise", "empty", "whitespace", "none", "error_stub", "echo_x2", "tool_call"]
COUNTER = TokenCounter()
#: The system message framing the summaries in a rendered context, as the budget check
#: counts it (plus 2 tokens per summary).
FRAME_TOKENS = MESSAGE_OVERHEAD + COUNTER.count_text("system " + SUMMARY_HEADER)
#: Words the search rule looks for (plain ASCII, so the model's word split is FTS5's).
MARKERS = ("kestrel", "osprey")


def _normal(message: BaseMessage) -> dict[str, Any]:
    """The JSON form of a message, as an export holds it."""
    return json.loads(json.dumps(message_to_dict(message)))  # type: ignore[no-any-return]


def _same_context(got: list[BaseMessage], expected: list[BaseMessage]) -> bool:
    """Whether ``got`` is ``expected`` as a context shows it: equal message by message,
    except that a message of the current turn may be shown truncated (marked with its
    whole count, its text a prefix of the original's)."""
    if len(got) != len(expected):
        return False
    for shown, whole in zip(got, expected, strict=True):
        if _normal(shown) == _normal(whole):
            continue
        marked = shown.additional_kwargs.get(TRUNCATED_MARKER)
        if marked != COUNTER.count_message(whole) or type(shown) is not type(whole):
            return False
        prefix = str(shown.content).split("\n[... truncated to fit the token budget")[0]
        if not render_text(whole).startswith(prefix) and not str(whole.content).startswith(prefix):
            return False
    return True


def _without_recalled_block(messages: list[BaseMessage]) -> list[BaseMessage]:
    """``messages`` without the recalled block (which the model does not follow), after
    checking there is at most one, just before the newest human message (or last)."""
    blocks = [i for i, m in enumerate(messages) if RECALL_MARKER in m.additional_kwargs]
    assert len(blocks) <= 1
    if not blocks:
        return messages
    at = blocks[0]
    humans = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, HumanMessage) and not is_summary_message(m)
    ]
    assert at == (humans[-1] - 1 if humans else len(messages) - 1)
    return messages[:at] + messages[at + 1 :]


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
    summary: int | None = None  # index into ModelSession.summaries (a level-1 summary)


@dataclass
class ModelSummary:
    """A summary as the model expects it: level 1 covers entries; a merge covers the
    top-level summaries of its time (its children, whose ``parent`` it becomes)."""

    content: str
    tokens: int
    level: int
    first_seq: int
    last_seq: int
    parent: int | None = None  # index into ModelSession.summaries


@dataclass
class ModelSession:
    """A session as the model expects it."""

    created: int
    last_accessed: datetime
    access_count: int = 0
    tier: str = "active"
    entries: list[ModelEntry] = field(default_factory=list)
    summaries: list[ModelSummary] = field(default_factory=list)  # in creation order
    pending: dict[str, str] = field(default_factory=dict)

    def touch(self, now: datetime) -> None:
        """An access: reads and writes both count."""
        self.last_accessed = now
        self.access_count += 1
        self.tier = "active"

    def top(self) -> list[int]:
        """Indexes of the top-level (unmerged) summaries, oldest first: what the model
        is handed."""
        top = [i for i, s in enumerate(self.summaries) if s.parent is None]
        return sorted(top, key=lambda i: self.summaries[i].first_seq)

    def context_tokens(self) -> int:
        """Active entries plus top-level summaries."""
        active = sum(e.tokens for e in self.entries if e.summary is None)
        return active + sum(self.summaries[i].tokens for i in self.top())

    def export_order(self) -> list[int]:
        """Indexes of all summaries in export order (by first seq, then level)."""
        return sorted(
            range(len(self.summaries)),
            key=lambda i: (self.summaries[i].first_seq, self.summaries[i].level),
        )

    def merge_due(self, config: MemoryConfig) -> bool:
        """Whether a compression round ends with a merge: two or more top-level
        summaries past their share of ``max_tokens``, or the context (framing
        included) still over it."""
        top = self.top()
        tokens = sum(self.summaries[i].tokens for i in top)
        active = [e for e in self.entries if e.summary is None]
        frame = FRAME_TOKENS + 2 * len(top) if top else 0
        over = sum(e.tokens for e in active) + tokens + frame > config.max_tokens or (
            config.max_entries is not None and len(active) > config.max_entries
        )
        mergeable = tokens > config.summary_share * config.max_tokens
        return len(top) >= 2 and (mergeable or over)

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


def _expect_injected(fault: Fault, error: StorageError) -> None:
    """A StorageError is only acceptable from the injected fault, with the driver error
    kept as its cause."""
    assert fault.fired, f"StorageError without an injected fault: {error!r}"
    assert isinstance(error.__cause__, sa.exc.DBAPIError)


class MemoryMachine(RuleBasedStateMachine):
    """ConversationMemory against :class:`ModelSession` objects on one backend."""

    backend = "sqlite"
    config = CONFIG

    def __init__(self) -> None:
        super().__init__()
        # The exception (if any) being handled when the run began: teardown skips its
        # final checks while a different one, from a failed step, is on its way out.
        self.outer_error = sys.exc_info()[1]
        self.outputs: list[str] = []  # every summary the summarizer produced, in order
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
            engine=engine, config=self.config, summarizer=self._summarize, clock=self.clock
        )

    def _summarize(self, prompt: str) -> str:
        """A summary of a few tokens (always shorter than what it covers), recorded so
        the model knows each summary's text, merged ones included."""
        text = f"sum {len(prompt) % 997}"
        self.outputs.append(text)
        return text

    def teardown(self) -> None:
        """After a run whose steps all passed, compare every session with the model in
        full and run the deep invariants on both stores (the per-step checks do that
        only every few steps); then close and delete everything."""
        try:
            if sys.exc_info()[1] is self.outer_error:
                self._compare(everything=True)
                self._check_invariants([self.engine, self.other_engine], deep=True)
        finally:
            self.memory.close()
            self.other.close()
            self.engine.dispose()
            self.other_engine.dispose()
            for schema in self.schemas:
                _drop_schema(schema)
            for path in Path(self.folder).glob("*"):
                path.unlink()
            os.rmdir(self.folder)

    def _fault(self, at: int) -> AbstractContextManager[Fault]:
        """Fail the ``at``-th statement run on the store's engine inside the block."""
        return injected(self.engine, Fault(at))

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
            model = self.model.get(session_id)
            held = sum(e.tokens for e in model.entries if e.pinned) if model else 0
            if held + COUNTER.count_message(batch[0]) > self.memory.config.max_tokens:
                with pytest.raises(BudgetExceeded):  # pinned context must fit the budget
                    self.memory.add_context(session_id, str(batch[0].content), "rule", True)
                return
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
        """An append whose statement ``at`` fails: a typed StorageError and a no-op when
        it fires (the step's checks compare the session with the unchanged model),
        normal otherwise."""
        with self._fault(at) as fault:
            try:
                self._append(session_id, [message])
            except StorageError as error:
                _expect_injected(fault, error)
            else:
                assert not fault.fired, f"the append hid the fault at statement {at}"

    # ------------------------------------------------------------------ rules: compression

    def _compress(self, session_id: str, keep: int) -> None:
        """Compress in store and model (see :meth:`_follow_compress`)."""
        self.dirty.add(session_id)
        if session_id not in self.model:
            with pytest.raises(SessionNotFound):
                self.memory.compress(session_id, force=True, keep=keep)
            return
        session = self.model[session_id]
        chosen = session.selection(keep)
        start = len(self.outputs)
        result = self.memory.compress(session_id, force=True, keep=keep)
        self._follow_compress(session, chosen, result, self.outputs[start:], fired=False)

    def _follow_compress(
        self,
        session: ModelSession,
        chosen: list[int],
        result: CompressionResult | None,
        outputs: list[str],
        *,
        fired: bool,
    ) -> None:
        """Apply what a forced compression with an explicit ``keep`` did (one round of
        compressor._op_compress): summarize the chosen entries, then, when
        :meth:`ModelSession.merge_due`, merge every top-level summary into one of the
        next level (store.commit_merge), unless that summary is not shorter than its
        children. ``outputs`` are the summarizer's answers during the call. ``fired``:
        an injected storage fault fired and the call still returned, which only a
        merge may absorb (a merge that fails is skipped: the compression stands and
        its summaries stay unmerged)."""
        answers = list(outputs)
        if chosen:
            text = answers.pop(0)
            tokens = COUNTER.count_text(text)
            assert tokens < sum(session.entries[i].tokens for i in chosen)
            session.summaries.append(ModelSummary(text, tokens, 1, chosen[0] + 1, chosen[-1] + 1))
            for index in chosen:
                session.entries[index].summary = len(session.summaries) - 1
        merged: list[int] = []
        absorbed = False
        if session.merge_due(self.config):
            children = session.top()
            if not answers:
                assert fired, "the model expected a merge the store did not attempt"
                absorbed = True
            else:
                text = answers.pop(0)
                tokens = COUNTER.count_text(text)
                if tokens >= sum(session.summaries[i].tokens for i in children):
                    absorbed = True  # rejected: released, signalled, summaries unmerged
                elif fired and (result is None or not result.merged_summaries):
                    absorbed = True  # its commit failed: skipped like a failed plan
                else:
                    merged = children
                    session.summaries.append(
                        ModelSummary(
                            text,
                            tokens,
                            max(session.summaries[i].level for i in children) + 1,
                            session.summaries[children[0]].first_seq,
                            session.summaries[children[-1]].last_seq,
                        )
                    )
                    for index in children:
                        session.summaries[index].parent = len(session.summaries) - 1
        assert answers == [], f"unexpected summarizer calls: {answers}"
        assert not fired or absorbed, "the compression hid an injected storage fault"
        if not chosen and not merged:
            assert result is None
            return
        assert result is not None
        made = session.summaries[-1]
        got = result.summary
        assert (got.content, got.level, got.first_seq, got.last_seq) == (
            made.content,
            made.level,
            made.first_seq,
            made.last_seq,
        )
        assert (result.entries_compressed, result.merged_summaries) == (
            (0, len(merged)) if merged else (len(chosen), 0)
        )

    @rule(session_id=SESSION_IDS, keep=st.integers(0, 4))
    def compress(self, session_id: str, keep: int) -> None:
        """A forced compression takes exactly the model's selection and links it (and
        merges the summaries exactly when the model says a merge is due)."""
        self._compress(session_id, keep)

    @rule(session_id=SESSION_IDS, keep=st.integers(0, 4), at=st.integers(1, 20))
    def compress_with_fault(self, session_id: str, keep: int, at: int) -> None:
        """A forced compression whose statement ``at`` fails (while planning or at the
        commit): a typed StorageError and no effect (the claim is released, so the next
        compression works). A fault in the merge that may follow only skips the merge.
        The full effect when ``at`` lies past the last statement."""
        self.dirty.add(session_id)
        session = self.model.get(session_id)
        chosen = session.selection(keep) if session else []
        start = len(self.outputs)
        with self._fault(at) as fault:
            try:
                result = self.memory.compress(session_id, force=True, keep=keep)
            except StorageError as error:
                _expect_injected(fault, error)
                if session is not None:
                    stats = self.memory.get_stats(session_id)  # records no access
                    assert (stats.active_entries, stats.summaries) == (
                        sum(e.summary is None for e in session.entries),
                        len(session.top()),
                    ), f"compress raised {error!r} at statement {at} but changed the store"
                return
            except SessionNotFound:
                assert session is None and not fault.fired
                return
        assert session is not None
        self._follow_compress(
            session, chosen, result, self.outputs[start:], fired=bool(fault.fired)
        )

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
            self.memory.set_summarizer(self._summarize)

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
        whole = self.memory.get_messages(session_id)
        if session_id not in self.model:
            assert whole == []
            return
        session = self.model[session_id]
        session.touch(self.clock())
        top = session.top()
        assert COUNTER.count_messages(whole) <= self.memory.config.max_tokens
        got = _without_recalled_block(whole)
        head = got[0] if got and is_summary_message(got[0]) else None
        body = got[1:] if head is not None else got
        rendered = session.rendered()
        pinned = {id(e.message) for e in session.entries if e.pinned and e.summary is None}
        kept = [
            [m for i, m in enumerate(rendered) if id(m) in pinned or i >= cut]
            for cut in range(len(rendered) + 1)
        ]
        if head is None and (top or not _same_context(body, rendered)):
            # The marker gave way: the newest part (the current turn) fits only alone.
            matches = [k for k in kept if _same_context(body, k)]
            assert matches, "the context is not the newest part of the conversation"
            note = SystemMessage(omitted_note(len(rendered) - len(matches[0]), len(top)))
            assert COUNTER.count_messages([note, *body]) > self.memory.config.max_tokens
        elif head is None or OMITTED_MARKER not in head.additional_kwargs:
            if top:
                assert isinstance(head, SystemMessage)
                assert all(session.summaries[i].content in str(head.content) for i in top)
            assert _same_context(body, rendered), (body, rendered)
        else:  # over the budget: the oldest unpinned units were left out, and counted
            shown = [i for i in top if session.summaries[i].content in str(head.content)]
            assert shown == top[len(top) - len(shown) :]
            matches = [k for k in kept if _same_context(body, k)]
            assert matches, "the context is not the newest part of the conversation"
            assert head.additional_kwargs[OMITTED_MARKER] == len(rendered) - len(matches[0])
        for provider in ("openai", "anthropic"):
            assert provider_shape_problems(got, provider, pending=session.pending) == []

    @rule(session_id=SESSION_IDS)
    def read_all(self, session_id: str) -> None:
        """get_entries(include_compressed=True) returns every entry ever appended, in
        order, compressed or not (no compression or merge loses one), and
        get_summaries the top-level summaries with the entries each covers; each call
        records an access."""
        self.dirty.add(session_id)
        entries = self.memory.get_entries(session_id, include_compressed=True)
        summaries = self.memory.get_summaries(session_id)
        if session_id not in self.model:
            assert (entries, summaries) == ([], [])
            return
        session = self.model[session_id]
        session.touch(self.clock())
        session.touch(self.clock())
        assert [e.seq for e in entries] == list(range(1, len(session.entries) + 1))
        assert [_normal(e.message) for e in entries] == [
            _normal(e.message) for e in session.entries
        ]
        assert [e.summary_id is not None for e in entries] == [
            e.summary is not None for e in session.entries
        ]
        expected = []
        for index in session.top():
            s = session.summaries[index]
            covered = session.entries[s.first_seq - 1 : s.last_seq]
            count = sum(e.summary is not None for e in covered)
            expected.append((s.content, s.level, s.first_seq, s.last_seq, count))
        assert [
            (s.content, s.level, s.first_seq, s.last_seq, len(s.original_entry_ids))
            for s in summaries
        ] == expected

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

    @rule(
        session_id=SESSION_IDS,
        how=st.sampled_from(["track_access", "get_messages"]),
        at=st.integers(1, 4),
    )
    def touch_with_fault(self, session_id: str, how: str, at: int) -> None:
        """An access (track_access or get_messages) whose statement ``at`` fails: a typed
        StorageError and no access recorded; normal when ``at`` lies past its end."""
        self.dirty.add(session_id)
        with self._fault(at) as fault:
            try:
                if how == "track_access":
                    self.memory.track_access(session_id)
                else:
                    self.memory.get_messages(session_id)
            except StorageError as error:
                _expect_injected(fault, error)
                return
            except SessionNotFound:
                assert how == "track_access" and session_id not in self.model
                assert not fault.fired
                return
        assert not fault.fired, f"{how} hid the fault at statement {at}"
        if session_id in self.model:
            self.model[session_id].touch(self.clock())

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

    def _doomed(self, limit: int | None) -> list[str]:
        """The sessions a prune deletes: idle for strictly more than 30 days, oldest
        first, at most ``limit``."""
        cutoff = self.clock() - POLICY.expired_after
        expired = sorted(
            (s.last_accessed, s.created, sid)
            for sid, s in self.model.items()
            if s.last_accessed < cutoff
        )
        return [sid for _, _, sid in (expired if limit is None else expired[:limit])]

    @rule(limit=st.one_of(st.none(), st.integers(0, 3)))
    def prune(self, limit: int | None) -> None:
        """prune_expired deletes the oldest sessions idle for strictly more than 30 days."""
        doomed = self._doomed(limit)
        assert self.memory.prune_expired(limit=limit) == len(doomed)
        for session_id in doomed:
            del self.model[session_id]

    @rule(
        limit=st.one_of(st.none(), st.integers(1, 3)),
        batch=st.integers(1, 2),
        at=st.integers(1, 16),
    )
    def prune_with_fault(self, limit: int | None, batch: int, at: int) -> None:
        """A prune in batches of ``batch`` sessions whose statement ``at`` fails: a typed
        StorageError; the batches that reported progress are gone (oldest first) and
        the failing one deleted nothing. Normal when ``at`` lies past its end."""
        doomed = self._doomed(limit)
        done = [0]
        with self._fault(at) as fault:
            try:
                removed = self.memory.prune_expired(
                    limit=limit, batch_size=batch, progress=lambda d, _total: done.append(d)
                )
            except StorageError as error:
                _expect_injected(fault, error)
                removed = done[-1]
            else:
                assert not fault.fired, f"the prune hid the fault at statement {at}"
                assert removed == len(doomed) == done[-1]
        for session_id in doomed[:removed]:
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
        self.memory.import_session(state.to_json(), overwrite=True, session_id=copy_id)
        self._copied(session_id, copy_id)

    def _copied(self, session_id: str, copy_id: str) -> None:
        """The model of an import of ``session_id``'s export as ``copy_id``."""
        source = self.model[session_id]
        existed = copy_id in self.model
        self.created += 1
        self.model[copy_id] = ModelSession(
            created=self.created,
            last_accessed=source.last_accessed,
            access_count=source.access_count,
            tier="active"
            if existed
            else calculate_tier(source.last_accessed, self.clock(), POLICY).value,
            entries=[replace(e) for e in source.entries],
            summaries=[replace(s) for s in source.summaries],
            pending=dict(source.pending),
        )

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), at=st.integers(1, 12))
    def import_with_fault(self, data: st.DataObject, at: int) -> None:
        """An import (over a copy that may exist) whose statement ``at`` fails: a typed
        StorageError and no effect, the earlier copy intact or none created; normal
        when ``at`` lies past its end."""
        session_id = data.draw(st.sampled_from(sorted(self.model)))
        state = self.memory.export_session(session_id).to_json()
        copy_id = f"copy-{session_id}"
        self.dirty.add(copy_id)
        with self._fault(at) as fault:
            try:
                self.memory.import_session(state, overwrite=True, session_id=copy_id)
            except StorageError as error:
                _expect_injected(fault, error)
                return
        assert not fault.fired, f"the import hid the fault at statement {at}"
        self._copied(session_id, copy_id)

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
        summaries, totals); every few steps every session is compared in full."""
        self.checks += 1
        self._compare(everything=self.checks % FULL_CHECK_EVERY == 0)

    def _compare(self, *, everything: bool) -> None:
        infos = {info.session_id: info for info in self.memory.list_sessions()}
        assert sorted(infos) == sorted(self.model)
        for session_id, session in self.model.items():
            info = infos[session_id]
            assert (info.last_accessed, info.access_count, info.memory_tier) == (
                session.last_accessed,
                session.access_count,
                session.tier,
            )
            assert (info.total_entries, info.context_tokens) == (
                len(session.entries),
                session.context_tokens(),
            )
        for session_id in sorted(self.model if everything else self.dirty & set(self.model)):
            self._compare_fully(session_id)
        self.dirty.clear()

    def _compare_fully(self, session_id: str) -> None:
        session = self.model[session_id]
        state = self.memory.export_session(session_id)
        assert [e.seq for e in state.entries] == list(range(1, len(session.entries) + 1))
        assert [e.message for e in state.entries] == [_normal(e.message) for e in session.entries]
        order = session.export_order()
        position = {index: at for at, index in enumerate(order)}
        assert [e.summary for e in state.entries] == [
            None if e.summary is None else position[e.summary] for e in session.entries
        ]
        assert [e.pinned for e in state.entries] == [e.pinned for e in session.entries]
        assert [
            (s.content, s.level, s.first_seq, s.last_seq, s.parent) for s in state.summaries
        ] == [
            (
                s.content,
                s.level,
                s.first_seq,
                s.last_seq,
                None if s.parent is None else position[s.parent],
            )
            for s in (session.summaries[i] for i in order)
        ]
        assert state.last_accessed == session.last_accessed
        assert state.access_count == session.access_count
        stats = self.memory.get_stats(session_id)
        active = [e for e in session.entries if e.summary is None]
        top = [session.summaries[i] for i in session.top()]
        assert (stats.total_entries, stats.active_entries, stats.summaries) == (
            len(session.entries),
            len(active),
            len(top),
        )
        assert stats.total_tokens == sum(e.tokens for e in session.entries)
        assert stats.active_tokens == sum(e.tokens for e in active)
        assert stats.summary_tokens == sum(s.tokens for s in top)

    @invariant()
    def invariants_hold(self) -> None:
        """I1-I12 on the store after every step (with the deep recount every few steps:
        the model comparison already checks every message and every total), and on the
        second store after each import into it."""
        engines = [self.engine, self.other_engine] if self.other_changed else [self.engine]
        self.other_changed = False
        self._check_invariants(engines, deep=self.checks % FULL_CHECK_EVERY == 0)

    def _check_invariants(self, engines: list[Engine], *, deep: bool) -> None:
        for engine in engines:
            problems = find_violations(
                engine, now=self.clock(), deep=deep, claim_ttl=self.config.claim_ttl, policy=POLICY
            )
            assert problems == [], problems


class PostgresMachine(MemoryMachine):
    """The same machine on PostgreSQL (a fresh schema per example)."""

    backend = "postgres"


class MergingMachine(MemoryMachine):
    """The machine with a budget of 120 tokens, so summaries merge: the model follows
    each merge (level, range, children) and every entry stays retrievable."""

    config = MERGE_CONFIG

    @initialize(share=st.sampled_from([0.025, 0.07]))
    def configure(self, share: float) -> None:
        """Each run merges at the second summary (3 tokens of summaries allowed) or only
        after several (8.4), besides merging whenever the context is over budget; it
        starts with rounds of one message and a compression, up to the first merge."""
        self.config = self.memory.update_config(summary_share=share)
        for round_ in range(8):
            self._append("s1", [HumanMessage(f"round {round_}")])
            self._compress("s1", keep=0)
            if any(s.level > 1 for s in self.model["s1"].summaries):
                return
        raise AssertionError("eight compressions of s1 never merged its summaries")

    @rule(session_id=SESSION_IDS, words=st.lists(texts, min_size=2, max_size=3))
    def churn(self, session_id: str, words: list[str]) -> None:
        """Rounds of one message then a forced compression keeping nothing: summaries
        pile up fast enough to merge within a short run."""
        for text in words:
            self._append(session_id, [HumanMessage(text)])
            self._compress(session_id, keep=0)


class PostgresMergingMachine(MergingMachine):
    """The merging machine on PostgreSQL."""

    backend = "postgres"


def _settings(examples: int, steps: int) -> settings:
    """Explicit settings for a machine run; under the ``soak`` profile (see
    tests/conftest.py) its example count replaces ``examples``, which would otherwise
    override it."""
    profile = settings.get_current_profile_name()
    if profile == "soak":
        examples = settings.get_profile(profile).max_examples
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


MACHINES = {"sqlite": MemoryMachine, "postgres": PostgresMachine}
MERGING = {"sqlite": MergingMachine, "postgres": PostgresMergingMachine}


@pytest.mark.parametrize("backend", sorted(MACHINES))
def test_memory_matches_model(backend: str) -> None:
    """Short random programs keep the store equal to the model (fast profile)."""
    run_state_machine_as_test(MACHINES[backend], settings=_settings(10, 15))


@pytest.mark.parametrize("backend", sorted(MERGING))
def test_merges_match_model(backend: str) -> None:
    """Short random programs with merging summaries keep the store equal to the model."""
    run_state_machine_as_test(MERGING[backend], settings=_settings(2, 15))


# Long by design: 50 programs of 40 steps, each step checked against the model.
@pytest.mark.timeout(1200)
@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(MACHINES))
def test_memory_matches_model_long(backend: str) -> None:
    """Longer random programs keep the store equal to the model (slow profile)."""
    run_state_machine_as_test(MACHINES[backend], settings=_settings(50, 40))


# Long by design: 50 programs of 40 steps, each step checked against the model.
@pytest.mark.timeout(1200)
@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(MERGING))
def test_merges_match_model_long(backend: str) -> None:
    """Longer random programs with merging summaries keep the store equal to the model."""
    run_state_machine_as_test(MERGING[backend], settings=_settings(50, 40))


def test_soak_profile_sets_the_machine_examples() -> None:
    """Under the soak profile the machines run its 1,000 examples; under the default
    profile they keep their own counts (which the profile's 30 does not raise)."""
    previous = settings.get_current_profile_name()
    try:
        settings.load_profile("soak")
        assert _settings(10, 15).max_examples == 1000
        assert _settings(50, 40).max_examples == 1000
        settings.load_profile("default")
        assert _settings(10, 15).max_examples == 10
        assert _settings(50, 40).max_examples == 50
    finally:
        settings.load_profile(previous)


@pytest.mark.parametrize("damage", ["message", "entry_tokens"])
@pytest.mark.parametrize("backend", sorted(MACHINES))
def test_teardown_checks_everything(backend: str, damage: str) -> None:
    """The end of a run compares every session in full and runs the deep invariants on
    both stores, whatever step the periodic full check last ran at. Each damage below
    passes the step's own checks and only one of the two final checks finds it (a
    rewritten message of an untouched session: the model comparison; an entry's token
    count in the second store, its counters agreeing: the deep recount), so teardown
    fails only if it runs both."""
    machine = MACHINES[backend]()
    machine.start()  # s1: "hello"
    machine.add("s2", AIMessage("world"))
    machine.other.add_messages("x", [AIMessage("hello")])
    machine.other_changed = True
    machine.store_equals_model()  # checks = 1: compares the touched sessions in full
    machine.invariants_hold()
    if damage == "message":
        engine, changes = (
            machine.engine,
            [
                "UPDATE tiermem_entry SET message = REPLACE(message, 'hello', 'world'), "
                "content = 'world' WHERE content = 'hello'"
            ],
        )
    else:
        engine, changes = (
            machine.other_engine,
            [
                "UPDATE tiermem_entry SET token_count = token_count + 1",
                "UPDATE tiermem_session SET entry_tokens = entry_tokens + 1, "
                "active_tokens = active_tokens + 1",
            ],
        )
    with engine.begin() as conn:
        for change in changes:
            conn.exec_driver_sql(change)
    machine.other_changed = True
    machine.store_equals_model()  # checks = 2: the counters only, which still match
    machine.invariants_hold()  # not deep at this step
    if damage == "message":
        machine._check_invariants([machine.engine, machine.other_engine], deep=True)
    else:
        machine._compare(everything=True)
    with pytest.raises(AssertionError):
        machine.teardown()


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
