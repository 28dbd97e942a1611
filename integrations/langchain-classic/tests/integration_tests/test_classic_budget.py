"""max_token_limit: TieredConversationMemory keeps about as many recent messages as
ConversationSummaryBufferMemory, and its context never passes the limit."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain_classic.memory import ConversationSummaryBufferMemory
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.tools import BaseTool
from tiermem import ConversationMemory
from tiermem.testing import check_invariants
from tiermem.tokens import TokenCounter

from tiermem_classic import TieredConversationMemory

COUNTER = TokenCounter()
SUMMARY = "The customer asked about orders, parcels and refunds; the assistant answered."
WORDS = (
    "order parcel refund invoice courier warehouse tracking number address payment "
    "week price the a to is of and delivery support label return"
).split()


class CountingChatModel(FakeListChatModel):
    """A fake chat model that counts its calls and counts tokens as a chat model's
    provider does: the framing of each message, its role and its text (tiermem's
    count; the default count would need the transformers package)."""

    calls: int = 0

    def _call(self, *args: Any, **kwargs: Any) -> str:
        """Count the call, then answer with the scripted summary."""
        self.calls += 1
        return super()._call(*args, **kwargs)

    def get_num_tokens_from_messages(
        self,
        messages: list[BaseMessage],
        tools: Sequence[dict[str, Any] | type | BaseTool] | None = None,
    ) -> int:
        """Tokens of ``messages`` with their framing."""
        return COUNTER.count_messages(messages)


def _model() -> CountingChatModel:
    return CountingChatModel(responses=[SUMMARY])


def _conversation(turns: int, seed: int = 7) -> Iterator[tuple[str, str]]:
    """Deterministic exchanges: questions of 5-40 words, answers of 20-120."""
    rng = random.Random(seed)

    def text(low: int, high: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))) + "."

    for _ in range(turns):
        yield text(5, 40), text(20, 120)


def _verbatim(messages: list[BaseMessage]) -> int:
    """The conversation messages of a context (not its summary)."""
    return sum(not isinstance(message, SystemMessage) for message in messages)


@pytest.fixture(name="mem")
def fixture_mem(backend_url: str) -> Iterator[ConversationMemory]:
    """A memory with the default config, checked for invariants afterwards."""
    with ConversationMemory(url=backend_url) as mem:
        yield mem
        check_invariants(mem.engine)


def test_keeps_about_as_many_messages_as_the_summary_buffer(mem: ConversationMemory) -> None:
    """At max_token_limit=2000, side by side with ConversationSummaryBufferMemory on
    the same conversation and the same fake model: tiermem shows at least 90 % of
    its verbatim messages on average, never passes 2000 tokens (its summary
    included, which the incumbent does not count), and asks the model no more often."""
    incumbent_model, tiered_model = _model(), _model()
    incumbent = ConversationSummaryBufferMemory(
        llm=incumbent_model, max_token_limit=2000, return_messages=True
    )
    tiered = TieredConversationMemory(
        memory=mem, session_id="s", llm=tiered_model, max_token_limit=2000, return_messages=True
    )
    shown: list[tuple[int, int]] = []
    for question, answer in _conversation(120):
        incumbent.save_context({"input": question}, {"output": answer})
        tiered.save_context({"input": question}, {"output": answer})
        theirs = incumbent.load_memory_variables({})["history"]
        ours = tiered.load_memory_variables({})["history"]
        assert COUNTER.count_messages(ours) <= 2000
        if incumbent.moving_summary_buffer:  # both past the limit
            shown.append((_verbatim(theirs), _verbatim(ours)))
    assert len(shown) > 80
    theirs_total = sum(theirs for theirs, _ in shown)
    ours_total = sum(ours for _, ours in shown)
    assert ours_total >= 0.9 * theirs_total
    assert tiered.moving_summary_buffer  # summarized by the llm given
    assert 0 < tiered_model.calls <= incumbent_model.calls
    assert mem.config.max_tokens == 50_000  # the memory's own budget is untouched


@pytest.mark.parametrize("limit", [60, 300, 1000])
@pytest.mark.parametrize("return_messages", [True, False])
def test_the_limit_is_never_passed(
    mem: ConversationMemory, limit: int, return_messages: bool
) -> None:
    """Every loaded context fits max_token_limit, as messages or as text, at small and
    large limits, while every exchange stays stored; the memory keeps its own budget."""
    memory = TieredConversationMemory(
        memory=mem,
        session_id="s",
        llm=_model(),
        max_token_limit=limit,
        return_messages=return_messages,
    )
    for question, answer in _conversation(30, seed=limit):
        memory.save_context({"input": question}, {"output": answer})
        history = memory.load_memory_variables({})["history"]
        if return_messages:
            assert COUNTER.count_messages(history) <= limit
        else:
            assert COUNTER.count_text(history) <= limit
    assert mem.get_stats("s").total_entries == 60
    assert mem.config.max_tokens == 50_000


async def test_the_limit_holds_async(mem: ConversationMemory) -> None:
    """asave_context and aload_memory_variables keep the same budget."""
    memory = TieredConversationMemory(
        memory=mem, session_id="a", llm=_model(), max_token_limit=300, return_messages=True
    )
    for question, answer in _conversation(20):
        await memory.asave_context({"input": question}, {"output": answer})
        history = (await memory.aload_memory_variables({}))["history"]
        assert COUNTER.count_messages(history) <= 300
    assert (await mem.aget_stats("a")).summaries >= 1


def test_a_limit_set_later_takes_effect(mem: ConversationMemory) -> None:
    """Assigning max_token_limit, as code written for the incumbent may, rebudgets."""
    memory = TieredConversationMemory(
        memory=mem, session_id="s", llm=_model(), return_messages=True
    )
    for question, answer in _conversation(10):
        memory.save_context({"input": question}, {"output": answer})
    assert COUNTER.count_messages(memory.load_memory_variables({})["history"]) > 200
    memory.max_token_limit = 200
    assert COUNTER.count_messages(memory.load_memory_variables({})["history"]) <= 200
