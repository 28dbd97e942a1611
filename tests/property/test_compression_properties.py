"""Property: compression never splits a tool group, never takes an unanswered call or a
pin, and always leaves a provider-valid context (hypothesis-generated conversations)."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem.doctor import provider_shape_problems
from tiermem.errors import BudgetExceeded, SessionNotFound, SummarizationError
from tiermem.testing import check_invariants

from ..conftest import MemoryFactory

Step = tuple[str, int]

STEPS = st.one_of(
    st.tuples(st.just("user"), st.integers(0, 40)),
    st.tuples(st.just("assistant"), st.integers(0, 40)),
    st.tuples(st.just("pin"), st.integers(0, 40)),
    st.tuples(st.just("context"), st.integers(0, 40)),
    st.tuples(st.just("calls"), st.integers(1, 3)),
    st.tuples(st.just("calls"), st.integers(1, 3)),
    st.tuples(st.just("answer"), st.integers(0, 9)),
    st.tuples(st.just("answer"), st.integers(0, 9)),
    st.tuples(st.just("compress"), st.integers(0, 4)),
)

CONFIGS = st.builds(
    MemoryConfig,
    auto_compress=st.booleans(),
    max_entries=st.integers(3, 12),
    max_tokens=st.sampled_from([120, 400, 100_000]),
    recent_window=st.integers(0, 3),
    min_entries_to_compress=st.integers(1, 3),
    summary_share=st.sampled_from([0.05, 0.5]),
)

_IDS = itertools.count()


def tiny_summary(prompt: str) -> str:
    """A one-token summary: always shorter than what it covers."""
    return "gist"


@dataclass
class Conversation:
    """Plays steps into a memory, keeping the expected stored messages."""

    memory: ConversationMemory
    sid: str
    added: list[BaseMessage] = field(default_factory=list)
    pending: list[tuple[str, str]] = field(default_factory=list)
    pins: int = 0

    def add(self, message: BaseMessage, *, pinned: bool = False) -> None:
        """Store one message (pinned context through add_context)."""
        if pinned:
            try:
                entry = self.memory.add_context(
                    self.sid, str(message.content), "rules", pinned=True
                )
            except BudgetExceeded:
                # Refused, and nothing written (check_storage): pins must fit max_tokens.
                pin = SystemMessage(str(message.content), additional_kwargs={"source": "rules"})
                tokens = self.memory.counter.count_message(pin)
                assert self.pinned_tokens() + tokens > self.memory.config.max_tokens
                return
            self.pins += 1
        else:
            entry = self.memory.add_message(self.sid, message)
        self.added.append(entry.message)

    def pinned_tokens(self) -> int:
        """Tokens of the pinned context stored so far."""
        return sum(e.token_count for e in self.memory.get_active_entries(self.sid) if e.pinned)

    def play(self, step: Step) -> None:
        """Apply one generated step."""
        kind, value = step
        if kind == "user":
            self.add(HumanMessage(f"user says {'word ' * value}".strip()))
        elif kind == "assistant":
            self.add(AIMessage(f"assistant says {'word ' * value}".strip()))
        elif kind in ("pin", "context"):
            text = f"fact {value}"
            if kind == "pin":
                self.add(HumanMessage(text), pinned=True)
            else:
                entry = self.memory.add_context(self.sid, text, "notes")
                self.added.append(entry.message)
        elif kind == "calls":
            calls = [(f"call_{next(_IDS)}", f"tool_{i}") for i in range(value)]
            self.add(
                AIMessage(
                    "",
                    tool_calls=[
                        {"name": n, "args": {"i": i}, "id": c} for i, (c, n) in enumerate(calls)
                    ],
                )
            )
            self.pending.extend(calls)
        elif kind == "answer" and self.pending:
            call_id, name = self.pending.pop(value % len(self.pending))
            self.add(ToolMessage(f"{name} output", tool_call_id=call_id, name=name))
        elif kind == "compress":
            self.compress(value)
        self.check_storage()

    def compress(self, keep: int) -> None:
        """Compress by hand; a refused summary (or no session yet) must change nothing."""
        try:
            self.memory.compress(self.sid, force=True, keep=keep)
        except (SummarizationError, SessionNotFound):
            pass

    def check_storage(self) -> None:
        """Lossless, in order; no pin or unanswered call compressed; groups on one side."""
        entries = self.memory.get_entries(self.sid)
        assert [e.message for e in entries] == self.added
        open_calls = {call_id for call_id, _ in self.pending}
        side: dict[str, int | None] = {}
        for entry in entries:
            message = entry.message
            if entry.pinned:
                assert not entry.compressed
            if isinstance(message, AIMessage):
                for call in message.tool_calls:
                    assert call["id"] is not None
                    side[call["id"]] = entry.summary_id
                    if call["id"] in open_calls:
                        assert not entry.compressed, "an unanswered call was compressed"
            if isinstance(message, ToolMessage):
                assert side[message.tool_call_id] == entry.summary_id, "a tool group was split"

    def finish(self, answer_order: list[int]) -> None:
        """Answer what is still pending (in a drawn order) unless the last message is the
        call itself, which may stay pending at the tail."""
        last = self.added[-1] if self.added else None
        tail = isinstance(last, AIMessage) and bool(last.tool_calls)
        tail_ids = (
            {c["id"] for c in last.tool_calls} if tail and isinstance(last, AIMessage) else set()
        )
        for index in answer_order:
            answerable = [p for p in self.pending if p[0] not in tail_ids]
            if not answerable:
                break
            self.play(("answer", self.pending.index(answerable[index % len(answerable)])))
        while [p for p in self.pending if p[0] not in tail_ids]:
            self.play(
                ("answer", next(i for i, p in enumerate(self.pending) if p[0] not in tail_ids))
            )


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    config=CONFIGS,
    steps=st.lists(STEPS, min_size=1, max_size=30),
    answer_order=st.lists(st.integers(0, 9), max_size=6),
    final_keep=st.integers(0, 3),
)
def test_compression_keeps_tool_groups_and_pins(
    engine: Engine,
    make_memory: MemoryFactory,
    config: MemoryConfig,
    steps: list[Step],
    answer_order: list[int],
    final_keep: int,
) -> None:
    """After any conversation and compressions the store is lossless, no group is split,
    no pin or unanswered call is compressed, and get_messages is provider-valid (I5)."""
    memory = make_memory(config=config, summarizer=tiny_summary)
    conversation = Conversation(memory, f"prop-{uuid.uuid4().hex[:8]}")
    for step in steps:
        conversation.play(step)
    conversation.finish(answer_order)
    conversation.compress(final_keep)
    conversation.check_storage()
    messages = memory.get_messages(conversation.sid)
    for provider in ("openai", "anthropic"):
        if any(m.type != "system" for m in messages) or provider == "openai":
            assert provider_shape_problems(messages, provider) == []
    active = memory.get_active_entries(conversation.sid)
    assert sum(e.pinned for e in active) == conversation.pins
    check_invariants(engine)
