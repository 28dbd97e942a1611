"""A prefix a prompt cache can keep: between compressions the context changes only
at its end, and when the summarizer fails the budget guard moves its cut in large
steps, so most of each context is the previous one's prefix."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from tiermem import ConversationMemory, MemoryConfig
from tiermem.evaluation.cache import CacheReplay, cacheable
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory

BUDGET = MemoryConfig(max_tokens=4_000)


def _replay(memory: ConversationMemory, turns: int) -> CacheReplay:
    """A chat of ``turns`` turns of about 120 tokens, each context as a model gets it."""
    replay = CacheReplay()
    budget = memory.config.max_tokens
    for turn in range(turns):
        question = HumanMessage(
            f"Turn {turn}: my neighbour Tomás asked about the {turn}th delivery of bricks "
            "for the garden wall; when will it arrive and who signs for it?"
        )
        context = memory.add_and_get_messages("s", [question])
        assert memory.counter.count_messages(context) <= budget
        replay.send(context)
        memory.add_messages(
            "s",
            [
                AIMessage(
                    f"Delivery {turn} of bricks arrives on Thursday morning; Tomás or you can "
                    "sign for it at the gate, and the driver needs ten minutes to unload."
                )
            ],
        )
    return replay


def test_the_cache_rule_counts_steps_of_128_from_1024() -> None:
    """Nothing under 1,024 shared tokens; then 1,024 plus whole steps of 128."""
    base = list(range(3_000))
    assert cacheable(base, base[:1_023] + [-1]) == 0
    assert cacheable(base, base[:1_100] + [-1]) == 1_024
    assert cacheable(base, base[:1_300]) == 1_280


def test_a_failing_summarizer_still_leaves_most_of_each_context_cacheable(
    make_memory: MemoryFactory,
) -> None:
    """Every compression fails, so the guard cuts; moving its cut in steps of a quarter
    of the budget, at least 80 % of the tokens sent over 150 turns are a cached prefix.
    With recall on as well: each turn's question is much like the turns in view (the
    same words, other numbers), so no block is added and the prefix stays."""
    failing = FakeSummarizer(mode="raise", error=ConnectionError("down"))
    memory = make_memory(config=BUDGET.replace(recall_share=0), summarizer=failing)
    replay = _replay(memory, 150)
    assert memory.get_stats("s").summaries == 0
    assert replay.share >= 0.8, replay.share
    recalling = make_memory(config=BUDGET, summarizer=failing, project="recalling")
    assert _replay(recalling, 150).share >= 0.8


def test_a_working_summarizer_keeps_the_prefix_between_compressions(
    make_memory: MemoryFactory,
) -> None:
    """With compressions rare and deep, at least 90 % of the tokens sent are cached,
    with recall on too: the compressed turns are much like those in view, so they
    bring no block."""
    memory = make_memory(config=BUDGET.replace(recall_share=0), summarizer=FakeSummarizer())
    replay = _replay(memory, 150)
    assert memory.get_stats("s").summaries >= 1
    assert replay.share >= 0.9, replay.share
    recalling = make_memory(config=BUDGET, summarizer=FakeSummarizer(), project="recalling")
    assert _replay(recalling, 150).share >= 0.9
