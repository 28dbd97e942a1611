"""Manual compression: summarizer kinds, prompt, summary records, lossless originals."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.runnables import RunnableLambda
from sqlalchemy.engine import Engine

from tiermem import (
    CompressionResult,
    ConversationMemory,
    MemoryConfig,
    MemorySummary,
    is_summary_message,
)
from tiermem._core.render import SUMMARY_HEADER
from tiermem.errors import InvalidArgument, SummarizerOutputInvalid
from tiermem.testing import FakeSummarizer, ManualClock, SignalRecorder

from ..conftest import MemoryFactory
from .helpers import assert_provider_valid, dump_but_failure

_CALL_IDS = itertools.count()
MANUAL = MemoryConfig(auto_compress=False, recent_window=4, min_entries_to_compress=2)


def fill(memory: ConversationMemory, sid: str = "s", turns: int = 6, clock: Any = None) -> None:
    """``turns`` user/assistant pairs, with a tool group in the second turn."""
    for turn in range(turns):
        memory.add_user_message(sid, f"Question {turn}: how do I configure feature {turn}?")
        if turn == 1:
            call_id = f"call-{next(_CALL_IDS)}"  # ids are unique within a session
            memory.add_tool_call(sid, "docs_search", {"query": "feature 1"}, call_id=call_id)
            memory.add_tool_result(sid, "docs_search", "Error: index unavailable", call_id=call_id)
        memory.add_assistant_message(sid, f"For feature {turn}, open settings and enable it.")
        if clock is not None:
            clock.advance(minutes=1)


def test_compress_without_force_needs_a_trigger(make_memory: MemoryFactory) -> None:
    """Under budget, compress() does nothing; force=True compresses anyway."""
    memory = make_memory(config=MANUAL, summarizer=FakeSummarizer())
    fill(memory)
    assert memory.compress("s") is None
    assert memory.get_stats("s").summaries == 0
    result = memory.compress("s", force=True)
    assert result is not None and result.entries_compressed == 10


def test_compress_unknown_session(make_memory: MemoryFactory) -> None:
    """Compressing a session that does not exist raises SessionNotFound."""
    from tiermem.errors import SessionNotFound

    memory = make_memory(config=MANUAL, summarizer=FakeSummarizer())
    for force in (True, False):
        with pytest.raises(SessionNotFound):
            memory.compress("nobody", force=force)


def test_summary_record_and_lossless_originals(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """The MemorySummary describes its originals, which stay stored, linked and expandable."""
    summarizer = FakeSummarizer()
    memory = make_memory(config=MANUAL, summarizer=summarizer)
    fill(memory, clock=clock)
    before = memory.get_entries("s")
    result = memory.compress("s", force=True)
    assert isinstance(result, CompressionResult)
    summary = result.summary
    assert isinstance(summary, MemorySummary)
    covered = before[:10]
    assert summary.original_entry_ids == tuple(e.id for e in covered)
    assert summary.original_token_count == sum(e.token_count for e in covered)
    assert summary.token_count == memory.counter.count_text(summary.content)
    assert summary.compression_ratio == pytest.approx(
        summary.token_count / summary.original_token_count
    )
    assert summary.created_at == clock.now
    assert summary.time_range == (covered[0].timestamp, covered[-1].timestamp)
    assert summary.content.startswith("Digest of ") and len(summarizer.calls) == 1
    assert (summary.first_seq, summary.last_seq, summary.level) == (1, 10, 1)
    assert memory.get_summaries("s") == [summary]
    after = memory.get_entries("s")
    assert len(after) == len(before) == 14
    assert [e.message for e in after] == [e.message for e in before]
    assert all(e.compressed and e.summary_id == summary.id for e in after[:10])
    assert not any(e.compressed for e in after[10:])
    expanded = memory.expand_summary(summary.id)
    assert [e.id for e in expanded] == [e.id for e in covered]
    assert [e.message for e in expanded] == [e.message for e in covered]
    assert result.session_id == "s" and result.entries_compressed == 10
    assert result.tokens_saved == result.tokens_before - result.tokens_after > 0
    assert result.ratio == summary.compression_ratio and result.merged_summaries == 0


def test_get_messages_is_summary_then_active(make_memory: MemoryFactory) -> None:
    """get_messages (without recall: query="") is one system message with the summary, then
    the active entries."""
    memory = make_memory(config=MANUAL, summarizer=FakeSummarizer())
    fill(memory)
    result = memory.compress("s", force=True)
    assert result is not None
    messages = memory.get_messages("s", query="")
    head = messages[0]
    assert isinstance(head, SystemMessage) and is_summary_message(head)
    assert head.content == f"{SUMMARY_HEADER}\n{result.summary.content}"
    assert messages[1:] == [e.message for e in memory.get_active_entries("s")]
    assert_provider_valid(messages)


def test_default_prompt_and_target_length(make_memory: MemoryFactory) -> None:
    """The model gets the default prompt and a target of compression_ratio of the input."""
    summarizer = FakeSummarizer()
    config = MANUAL.replace(compression_ratio=0.25)
    memory = make_memory(config=config, summarizer=summarizer)
    fill(memory)
    result = memory.compress("s", force=True)
    assert result is not None
    prompt = summarizer.calls[0]
    for phrase in (
        "key topics",
        "decisions",
        "tools used and their outcomes",
        "errors",
        "context needed to continue",
    ):
        assert phrase in prompt
    target = max(int(result.summary.original_token_count * 0.25), 16)
    assert f"about {target} tokens" in prompt
    assert "User: Question 0: how do I configure feature 0?" in prompt
    assert 'Assistant called tools: docs_search({"query":"feature 1"})' in prompt
    assert "Tool result (docs_search): Error: index unavailable" in prompt
    assert "Question 5" not in prompt  # the recent window stays out


def test_custom_summary_prompt(make_memory: MemoryFactory) -> None:
    """A custom summary_prompt is filled with the conversation and the target length."""
    summarizer = FakeSummarizer()
    config = MANUAL.replace(summary_prompt="TL;DR in {target_tokens} tokens:\n{conversation}")
    memory = make_memory(config=config, summarizer=summarizer)
    fill(memory)
    memory.compress("s", force=True)
    prompt = summarizer.calls[0]
    assert prompt.startswith("TL;DR in ") and "Key topics" not in prompt
    assert prompt.splitlines()[1] == "User: Question 0: how do I configure feature 0?"


def _summarizers() -> dict[str, Any]:
    def plain(prompt: str) -> str:
        return "plain callable summary"

    async def coroutine(prompt: str) -> str:
        await asyncio.sleep(0)
        return "async callable summary"

    return {
        "chat model": GenericFakeChatModel(messages=iter([AIMessage("chat model summary")] * 9)),
        "runnable": RunnableLambda(lambda prompt: AIMessage("runnable summary")),
        "callable": plain,
        "async callable": coroutine,
        "lambda": lambda prompt: "lambda summary",
    }


def test_every_summarizer_kind(make_memory: MemoryFactory) -> None:
    """Chat models, Runnables, sync and async callables summarize, sync and async."""
    memory = make_memory(config=MANUAL)
    for kind, summarizer in _summarizers().items():
        memory.set_summarizer(summarizer)
        fill(memory, f"{kind}-sync")
        fill(memory, f"{kind}-async")
        sync = memory.compress(f"{kind}-sync", force=True)
        assert sync is not None and sync.summary.content.endswith("summary"), kind
        result = asyncio.run(memory.acompress(f"{kind}-async", force=True))
        assert result is not None and result.summary.content == sync.summary.content, kind


LABELS = {"User", "Assistant", "Assistant called", "Tool error (docs_search)"}


def test_set_summarizer_and_heuristic(make_memory: MemoryFactory) -> None:
    """set_summarizer swaps the model; None selects the seed's heuristic summary."""
    memory = make_memory(config=MANUAL.replace(recent_window=1))
    for sid in ("a", "b", "c"):
        fill(memory, sid)
    heuristic = memory.compress("a", force=True)
    assert heuristic is not None
    originals = memory.expand_summary(heuristic.summary.id)
    texts = [entry.content for entry in originals]
    for line in heuristic.summary.content.splitlines():  # word for word, with speakers
        assert any(line.split(": ", 1)[1] in text for text in texts), line
    content = heuristic.summary.content
    assert "Tool error (docs_search): Error: index unavailable" in content
    assert all(line.split(":")[0] in LABELS for line in content.splitlines())
    memory.set_summarizer(lambda prompt: "model summary")
    swapped = memory.compress("b", force=True)
    assert swapped is not None and swapped.summary.content == "model summary"
    memory.set_summarizer(None)
    back = memory.compress("c", force=True)
    assert back is not None and "Tool error (docs_search)" in back.summary.content


def test_keep_overrides_the_window(make_memory: MemoryFactory) -> None:
    """keep=N leaves the newest N entries active (the group boundary permitting)."""
    memory = make_memory(config=MANUAL, summarizer=FakeSummarizer())
    fill(memory)
    result = memory.compress("s", force=True, keep=1)
    assert result is not None
    assert [e.seq for e in memory.get_active_entries("s")] == [14]
    # keep=10 would cut between the tool call (seq 4) and its result (seq 5).
    fill(memory, "t")
    split = memory.compress("t", force=True, keep=10)
    assert split is not None
    assert [e.seq for e in memory.expand_summary(split.summary.id)] == [1, 2, 3]


def test_pinned_context_stays(make_memory: MemoryFactory) -> None:
    """Pinned context is never compressed and keeps its place in get_messages."""
    memory = make_memory(config=MANUAL, summarizer=FakeSummarizer())
    memory.add_context("s", "The user is an administrator.", source="profile", pinned=True)
    fill(memory)
    memory.add_context("s", "Mid-conversation pin.", source="ops", pinned=True)
    fill(memory, turns=2)
    result = memory.compress("s", force=True, keep=0)
    assert result is not None
    active = memory.get_active_entries("s")
    assert [e.content for e in active] == ["The user is an administrator.", "Mid-conversation pin."]
    assert all(e.pinned for e in active)
    assert len(memory.expand_summary(result.summary.id)) == len(memory.get_entries("s")) - 2
    messages = memory.get_messages("s")
    assert is_summary_message(messages[0]) and len(messages) == 3


def test_unanswered_call_stays_active(make_memory: MemoryFactory) -> None:
    """A pending tool call and everything after it stay active until it is answered."""
    memory = make_memory(config=MANUAL, summarizer=FakeSummarizer())
    fill(memory, turns=2)
    memory.add_tool_call("s", "slow_tool", {}, call_id="pending")
    fill(memory, turns=3)
    first = memory.compress("s", force=True, keep=0)
    assert first is not None and first.summary.last_seq == 6
    assert memory.compress("s", force=True, keep=0) is None
    memory.add_tool_result("s", "slow_tool", "finally", call_id="pending")
    second = memory.compress("s", force=True, keep=0)
    assert second is not None
    assert memory.get_active_entries("s") == []
    assert_provider_valid(memory.get_messages("s"))


async def test_acompress_matches_compress(make_memory: MemoryFactory) -> None:
    """acompress stores the same kind of summary and sends the compressed signal."""
    memory = make_memory(config=MANUAL, summarizer=FakeSummarizer())
    fill(memory)
    with SignalRecorder(memory).recording() as recorder:
        result = await memory.acompress("s", force=True)
    assert result is not None
    assert recorder.of("compressed") == [{"session_id": "s", "result": result}]
    assert await memory.aget_summaries("s") == [result.summary]
    assert [e.id for e in await memory.aexpand_summary(result.summary.id)] == list(
        result.summary.original_entry_ids
    )


def test_a_summary_carried_forward_cannot_grow_past_the_caps(
    engine: Engine, make_memory: MemoryFactory
) -> None:
    """A summarizer that repeats its previous answer in each new one (a rolling summary)
    grows by a digest per call. tiermem caps what it stores: a summary must have fewer
    tokens than the entries it covers, and those entries are capped at
    max_summarizer_input_tokens. Over 10 rounds every stored summary stays below both
    caps, the growing answer is refused as not shorter (state unchanged) from the round
    it reaches its input on, and the context never holds more summary tokens than it
    compressed (T04)."""
    cap = 150
    answers: list[str] = []
    digest = FakeSummarizer(digest_words=8)

    def rolling(prompt: str) -> str:
        answer = str(digest.invoke(prompt).content)
        if answers:
            answer = f"{answer} Before that: {answers[-1]}"
        answers.append(answer)
        return answer

    memory = make_memory(config=MANUAL.replace(max_summarizer_input_tokens=cap), summarizer=rolling)
    outcomes: list[str] = []
    for round_ in range(10):
        # More than the cap per round: from the second round on, each input is at the cap.
        for turn in range(5):
            memory.add_user_message("s", f"Round {round_}, question {turn}: what comes next?")
            memory.add_assistant_message("s", f"Round {round_}, answer {turn}: the next step.")
        before = dump_but_failure(engine)
        try:
            result = memory.compress("s", force=True)
        except SummarizerOutputInvalid as exc:
            assert "not shorter" in str(exc)
            assert dump_but_failure(engine) == before
            outcomes.append("refused")
            continue
        assert result is not None and result.summary.content == answers[-1]
        outcomes.append("stored")
    assert len(answers) == 10
    stored = outcomes.count("stored")
    # Stored while the answer fitted, then refused for good: it only grows, its input
    # cannot grow past the cap.
    assert stored >= 3 and outcomes == ["stored"] * stored + ["refused"] * (10 - stored)
    assert memory.counter.count_text(answers[-1]) > cap, "the answer never outgrew the cap"
    summaries = memory.get_summaries("s")
    assert len(summaries) == stored
    for summary in summaries:
        assert summary.token_count == memory.counter.count_text(summary.content)
        assert summary.token_count < summary.original_token_count <= cap
    stats = memory.get_stats("s")
    compressed = [e for e in memory.get_entries("s") if e.compressed]
    assert stats.summary_tokens == sum(s.token_count for s in summaries)
    assert stats.summary_tokens < sum(e.token_count for e in compressed)


def test_a_cap_the_prompt_alone_fills_is_refused_and_changes_nothing(
    engine: Engine, make_memory: MemoryFactory
) -> None:
    """A max_summarizer_input_tokens smaller than the prompt's own words leaves no room
    for the conversation: compress() raises InvalidArgument before calling the model,
    nothing is written (the claim it took is released, so the next call is refused for
    the same reason, not as CompressionInProgress), and a larger cap then compresses."""
    fake = FakeSummarizer()
    memory = make_memory(config=MANUAL.replace(max_summarizer_input_tokens=30), summarizer=fake)
    for index in range(8):
        memory.add_user_message("s", f"message {index} with a handful of words")
    before = dump_but_failure(engine)
    for _ in range(2):
        with pytest.raises(InvalidArgument, match="no room for the conversation"):
            memory.compress("s", force=True)
    assert fake.calls == []
    assert dump_but_failure(engine) == before
    memory.update_config(max_summarizer_input_tokens=1_000)
    result = memory.compress("s", force=True)
    assert result is not None and result.entries_compressed == 4
