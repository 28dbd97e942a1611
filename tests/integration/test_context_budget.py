"""The context budget is a hard guarantee: whatever the summarizer does, what tiermem
hands a model fits ``max_tokens``; what it leaves out stays stored, active and
searchable, and a counted marker says how much was left out."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from tiermem import OMITTED_MARKER, ConversationMemory, MemoryConfig, is_summary_message
from tiermem._compression.policy import fit_summary, heuristic_summary
from tiermem.doctor import provider_shape_problems
from tiermem.errors import BudgetExceeded
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory

#: The configuration the budget was broken with: 60 short turns pass 150 tokens
#: many times over.
TIGHT = MemoryConfig(max_tokens=150, recent_window=4, min_entries_to_compress=4)


def _raise(prompt: str) -> str:
    raise ConnectionError("the model is down")


def _runs_out() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage("gist one"), AIMessage("gist two")]))


FAILURES: dict[str, Callable[[], Any]] = {
    "raises": lambda: _raise,
    "returns_empty": lambda: lambda prompt: "",
    "runs_out_of_answers": _runs_out,
    "no_summarizer": lambda: None,
}


def assert_fits(memory: ConversationMemory, messages: list[BaseMessage]) -> None:
    """Within max_tokens by the documented count, and provider-valid."""
    assert memory.counter.count_messages(messages) <= memory.config.max_tokens
    for provider in ("openai", "anthropic"):
        assert provider_shape_problems(messages, provider) == []


def chat(memory: ConversationMemory, turns: int = 60) -> None:
    """``turns`` short user/assistant turns, every context read checked on the way."""
    for turn in range(turns):
        memory.add_user_message("s", f"question {turn}: when does order {turn} ship?")
        memory.add_assistant_message("s", f"Order {turn} ships within two days of payment.")
        assert_fits(memory, memory.get_messages("s"))


@pytest.mark.parametrize("failure", list(FAILURES))
def test_every_context_fits_whatever_the_summarizer_does(
    make_memory: MemoryFactory, failure: str
) -> None:
    """A summarizer that raises, answers "", runs out of answers, or none at all:
    get_messages, add_and_get_messages, the text context and the history adapter all
    stay within 150 tokens over 60 turns, and all 120 messages stay stored."""
    memory = make_memory(config=TIGHT, summarizer=FAILURES[failure]())
    chat(memory)
    turn = memory.add_and_get_messages("s", [AIMessage("one more thing")])
    assert_fits(memory, turn)
    assert_fits(memory, memory.history("s").messages)
    text = memory.get_context_for_llm("s")
    assert memory.counter.count_text(text) <= TIGHT.max_tokens
    stats = memory.get_stats("s")
    assert stats.total_entries == 121
    assert len(memory.get_entries("s")) == 121
    if failure == "no_summarizer":  # the heuristic summary always fits: it compresses
        assert stats.summaries >= 1 and stats.compressed_entries > 100


def test_left_out_entries_stay_active_and_searchable_and_are_counted(
    make_memory: MemoryFactory,
) -> None:
    """The marker names exactly how many active messages the context leaves out; those
    stay active (compressed later) and search finds them."""
    memory = make_memory(config=TIGHT, summarizer=_raise)
    chat(memory, 30)
    context = memory.get_messages("s", query="")  # without recall, which adds a block
    head = context[0]
    assert isinstance(head, SystemMessage) and is_summary_message(head)
    shown = len(context) - 1
    active = memory.get_active_entries("s")
    assert len(active) == 60  # nothing was compressed, nothing was deleted
    assert head.additional_kwargs[OMITTED_MARKER] == 60 - shown
    assert f"{60 - shown} earlier messages are not shown" in str(head.content)
    assert context[1:] == [entry.message for entry in active[-shown:]]
    assert memory.search("order 0 ship", session_id="s")[0].entry.seq in (1, 2)
    # Once the summarizer works again, compression catches up and nothing is left out.
    memory.set_summarizer(FakeSummarizer(digest_words=3))
    memory.compress("s")
    caught_up = memory.get_messages("s")
    assert OMITTED_MARKER not in caught_up[0].additional_kwargs
    assert_fits(memory, caught_up)


def test_background_compression_never_lets_a_read_exceed_the_budget(
    make_memory: MemoryFactory,
) -> None:
    """With background=True and a model that blocks, reads made before it answers fit."""
    release = threading.Event()
    summarizer = FakeSummarizer(mode="sleep", release=release, delay=30)
    memory = make_memory(config=TIGHT.replace(background=True), summarizer=summarizer)
    try:
        chat(memory, 30)
        assert memory.get_stats("s").active_tokens > 3 * TIGHT.max_tokens
    finally:
        release.set()
        memory.close()


def test_a_timed_out_summarizer_never_lets_a_read_exceed_the_budget(
    make_memory: MemoryFactory,
) -> None:
    """A model that does not answer within summarizer_timeout backs compression off;
    every context still fits."""
    release = threading.Event()
    summarizer = FakeSummarizer(mode="sleep", release=release, delay=30)
    memory = make_memory(config=TIGHT.replace(summarizer_timeout=0.05), summarizer=summarizer)
    try:
        chat(memory, 20)
        assert memory.get_stats("s").summaries == 0
    finally:
        release.set()


def test_a_tool_call_is_never_split_from_its_results_by_the_budget(
    make_memory: MemoryFactory,
) -> None:
    """Cutting at a tool group leaves the whole group out (or keeps it whole)."""
    memory = make_memory(config=TIGHT.replace(auto_compress=False), summarizer=_raise)
    for turn in range(12):
        memory.add_user_message("s", f"look up order {turn}")
        calls = [
            {"name": "lookup", "args": {"order": turn, "part": i}, "id": f"c{turn}-{i}"}
            for i in range(2)
        ]
        memory.add_message("s", AIMessage("", tool_calls=calls))
        for i in (1, 0):
            memory.add_tool_result("s", "lookup", f"order {turn} part {i}: shipped", f"c{turn}-{i}")
        context = memory.get_messages("s")
        assert_fits(memory, context)
        first = context[1] if is_summary_message(context[0]) else context[0]
        assert not isinstance(first, ToolMessage)


def test_pinned_context_is_never_left_out(make_memory: MemoryFactory) -> None:
    """Pinned context stays in the context however far behind compression is."""
    memory = make_memory(config=TIGHT, summarizer=_raise)
    memory.add_context("s", "Always answer in French.", "policy", pinned=True)
    chat(memory, 30)
    context = memory.get_messages("s")
    assert "Always answer in French." in [message.content for message in context]
    assert_fits(memory, context)
    text = memory.get_context_for_llm("s")
    assert "Always answer in French." in text


def test_pinning_more_than_the_budget_is_refused_at_the_write(
    make_memory: MemoryFactory,
) -> None:
    """The write that would make pinned context larger than max_tokens raises
    BudgetExceeded and stores nothing; unpinned, the same text is accepted."""
    memory = make_memory(config=TIGHT, summarizer=_raise)
    memory.add_context("s", "rule " * 80, "policy", pinned=True)
    with pytest.raises(BudgetExceeded, match="max_tokens=150"):
        memory.add_context("s", "rule " * 80, "policy", pinned=True)
    assert memory.get_stats("s").total_entries == 1
    memory.add_context("s", "rule " * 80, "policy")
    assert memory.get_stats("s").total_entries == 2
    assert_fits(memory, memory.get_messages("s"))


def test_a_budget_lowered_below_the_pinned_context_is_a_typed_error(
    make_memory: MemoryFactory,
) -> None:
    """Reads under a max_tokens lowered below what was pinned raise BudgetExceeded
    rather than hand a model more than its budget."""
    memory = make_memory(config=TIGHT, summarizer=_raise)
    memory.add_context("s", "rule " * 80, "policy", pinned=True)
    memory.update_config(max_tokens=40)
    with pytest.raises(BudgetExceeded):
        memory.get_messages("s")
    with pytest.raises(BudgetExceeded):
        memory.get_context_for_llm("s")


@pytest.mark.parametrize("max_tokens", [20, 150, 2_000])
@pytest.mark.parametrize("entries", [1, 2, 8, 40])
def test_the_heuristic_summary_is_shorter_than_what_it_replaces(
    make_memory: MemoryFactory, max_tokens: int, entries: int
) -> None:
    """Cut to its target, the heuristic summary is shorter than its input at any size."""
    memory = make_memory(config=MemoryConfig(max_tokens=max_tokens))
    for turn in range(entries):
        memory.add_user_message("h", f"q{turn}")
    taken = memory.get_active_entries("h")
    original = sum(entry.token_count for entry in taken)
    text = fit_summary(
        lambda quote: heuristic_summary(taken, quote=quote),
        original,
        memory.config,
        memory.counter,
    )
    assert 0 < memory.counter.count_text(text) < original
