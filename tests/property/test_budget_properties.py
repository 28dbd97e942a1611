"""Property: whatever the summarizer does (answers, raises, returns junk, is missing,
runs in the background), every context tiermem builds fits ``max_tokens`` by the
documented count and is provider-valid, and nothing stored is lost."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage, HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem.doctor import provider_shape_problems
from tiermem.testing import check_invariants

from ..conftest import MemoryFactory
from .test_compression_properties import STEPS, Conversation, Step


def _raise(prompt: str) -> str:
    raise ConnectionError("the model is down")


#: What the summarizer does from a step on: answer, fail, answer junk, or be absent
#: (then tiermem's heuristic summary is used).
SUMMARIZERS: dict[str, Callable[[str], str] | None] = {
    "ok": lambda prompt: "gist",
    "raise": _raise,
    "empty": lambda prompt: "",
    "too_long": lambda prompt: prompt + prompt,
    "none": None,
}

BUDGET_STEPS = st.one_of(
    STEPS,
    st.tuples(st.just("summarizer"), st.integers(0, len(SUMMARIZERS) - 1)),
    st.tuples(st.just("turn"), st.integers(0, 40)),
)

CONFIGS = st.builds(
    MemoryConfig,
    auto_compress=st.booleans(),
    max_entries=st.integers(3, 12),
    max_tokens=st.sampled_from([60, 120, 400]),
    recent_window=st.integers(0, 4),
    min_entries_to_compress=st.integers(1, 4),
    summary_share=st.sampled_from([0.05, 0.5]),
    background=st.booleans(),
)


def assert_within_budget(memory: ConversationMemory, messages: list[BaseMessage]) -> None:
    """``messages`` fit the budget by the documented count and are provider-valid."""
    assert memory.counter.count_messages(messages) <= memory.config.max_tokens
    for provider in ("openai", "anthropic"):
        if any(m.type != "system" for m in messages) or provider == "openai":
            assert provider_shape_problems(messages, provider) == []


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    config=CONFIGS,
    steps=st.lists(BUDGET_STEPS, min_size=1, max_size=40),
    first=st.integers(0, len(SUMMARIZERS) - 1),
)
def test_every_context_fits_the_budget_whatever_the_summarizer_does(
    engine: Engine,
    make_memory: MemoryFactory,
    config: MemoryConfig,
    steps: list[Step],
    first: int,
) -> None:
    """After every step (appends, tool calls and results, pins, manual compressions,
    whole turns, the summarizer switching between working and failing), the messages,
    the turn's context, the text context and the history adapter each fit max_tokens,
    and the store still holds every message in order."""
    memory = make_memory(config=config, summarizer=list(SUMMARIZERS.values())[first])
    conversation = Conversation(memory, f"budget-{uuid.uuid4().hex[:8]}")
    for kind, value in steps:
        if kind == "summarizer":
            memory.set_summarizer(list(SUMMARIZERS.values())[value])
            continue
        if kind == "turn":
            message = HumanMessage(f"turn says {'word ' * value}".strip())
            assert_within_budget(memory, memory.add_and_get_messages(conversation.sid, [message]))
            conversation.added.append(message)
        else:
            conversation.play((kind, value))
        if not conversation.added:
            continue
        assert_within_budget(memory, memory.get_messages(conversation.sid))
        assert_within_budget(memory, memory.history(conversation.sid).messages)
        text = memory.get_context_for_llm(conversation.sid)
        assert memory.counter.count_text(text) <= memory.config.max_tokens
    memory.close()  # drains background compression before the final checks
    conversation.check_storage()
    check_invariants(engine)
