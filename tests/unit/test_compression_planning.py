"""Pure compression code: entry selection, prompt, heuristic summary, output validation."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableLambda

from tiermem import DEFAULT_SUMMARY_PROMPT, EntryType, MemoryConfig, MemoryEntry
from tiermem._compression.policy import (
    build_prompt,
    conversation_lines,
    fit_prompt,
    heuristic_summary,
    select_entries,
)
from tiermem._compression.summarizer import Summarizer, normalize_output
from tiermem._core.messages import classify
from tiermem.errors import (
    InvalidArgument,
    SummarizerFailed,
    SummarizerOutputInvalid,
    SummarizerTimeout,
)
from tiermem.tokens import TokenCounter

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def entries(*messages: BaseMessage, pinned: Sequence[int] = ()) -> list[MemoryEntry]:
    """MemoryEntry values for ``messages`` with seqs 1..n (``pinned`` are indexes)."""
    result = []
    for index, message in enumerate(messages):
        kind, role = classify(message)
        result.append(
            MemoryEntry(
                id=index + 1,
                session_id="s",
                seq=index + 1,
                type=EntryType.CONTEXT if index in pinned else kind,
                role=role,
                content=str(message.content),
                timestamp=T0,
                token_count=10,
                compressed=False,
                summary_id=None,
                metadata={},
                pinned=index in pinned,
                message=message,
            )
        )
    return result


def call(*ids: str) -> AIMessage:
    """An assistant message calling tool ``t`` once per id."""
    return AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": i} for i in ids])


def result(call_id: str, text: str = "ok") -> ToolMessage:
    """The result of call ``call_id``."""
    return ToolMessage(text, tool_call_id=call_id, name="t")


def config(**changes: Any) -> MemoryConfig:
    """A config with recent_window 2 and min_entries_to_compress 2, plus ``changes``."""
    return MemoryConfig(recent_window=2, min_entries_to_compress=2).replace(**changes)


def seqs(chosen: Sequence[MemoryEntry]) -> list[int]:
    """The seqs of the chosen entries."""
    return [entry.seq for entry in chosen]


def test_selects_oldest_outside_the_recent_window() -> None:
    """The oldest entries are taken and the newest ``recent_window`` stay."""
    active = entries(*(HumanMessage(f"m{i}") for i in range(6)))
    assert seqs(select_entries(active, config(), force=False)) == [1, 2, 3, 4]
    assert seqs(select_entries(active, config(), force=False, keep=4)) == [1, 2]


def test_too_few_entries_is_nothing_unless_forced() -> None:
    """Below ``min_entries_to_compress`` nothing is selected, except with force."""
    active = entries(*(HumanMessage(f"m{i}") for i in range(3)))
    assert select_entries(active, config(), force=False) == []
    assert seqs(select_entries(active, config(), force=True)) == [1]


def test_never_splits_a_tool_group() -> None:
    """A boundary inside a tool group moves before the call."""
    active = entries(
        HumanMessage("a"),
        HumanMessage("b"),
        call("c1", "c2"),
        result("c1"),
        result("c2"),
        HumanMessage("x"),
        HumanMessage("y"),
    )
    # recent_window 3 would cut between the two results: the whole group stays.
    assert seqs(select_entries(active, config(recent_window=3), force=False)) == [1, 2]


def test_group_with_interleaved_message_moves_as_one() -> None:
    """A message appended between a call and its result never separates them."""
    active = entries(
        HumanMessage("a"),
        HumanMessage("b"),
        call("c1"),
        HumanMessage("meanwhile"),
        result("c1"),
        HumanMessage("x"),
        HumanMessage("y"),
    )
    assert seqs(select_entries(active, config(recent_window=3), force=False)) == [1, 2]
    assert seqs(select_entries(active, config(recent_window=2), force=False)) == [1, 2, 3, 4, 5]


def test_unanswered_call_is_never_taken() -> None:
    """The run stops before an unanswered call, even far outside the window."""
    active = entries(
        HumanMessage("a"),
        HumanMessage("b"),
        call("open"),
        *(HumanMessage(f"m{i}") for i in range(8)),
    )
    assert seqs(select_entries(active, config(), force=True)) == [1, 2]


def test_results_answered_out_of_order() -> None:
    """Results answering calls in another order still keep each group whole."""
    active = entries(
        call("c1", "c2", "c3"),
        result("c3"),
        result("c1"),
        result("c2"),
        HumanMessage("x"),
        HumanMessage("y"),
    )
    assert seqs(select_entries(active, config(), force=False)) == [1, 2, 3, 4]
    assert select_entries(active, config(recent_window=3), force=False) == []


def test_pinned_context_is_never_selected() -> None:
    """Pinned entries are skipped and do not count against the window."""
    active = entries(
        SystemMessage("rules"),
        HumanMessage("a"),
        HumanMessage("b"),
        HumanMessage("c"),
        HumanMessage("d"),
        pinned=[0],
    )
    chosen = select_entries(active, config(), force=False)
    assert seqs(chosen) == [2, 3]
    assert not any(entry.pinned for entry in chosen)


def test_run_is_capped_by_summarizer_input_budget() -> None:
    """No more than ``max_summarizer_input_tokens`` go to one summarizer call."""
    active = entries(*(HumanMessage(f"m{i}") for i in range(10)))  # 10 tokens each
    chosen = select_entries(active, config(max_summarizer_input_tokens=35), force=False)
    assert seqs(chosen) == [1, 2, 3]


@pytest.mark.parametrize("keep", [-1, True, 1.5, "2"])
def test_bad_keep_is_invalid(keep: Any) -> None:
    """A negative or non-int ``keep`` raises InvalidArgument."""
    with pytest.raises(InvalidArgument):
        select_entries(entries(HumanMessage("a")), config(), force=True, keep=keep)


def test_default_prompt_covers_the_seed_points() -> None:
    """The default prompt asks for topics, decisions, tools, errors and context to continue."""
    prompt = build_prompt("User: hi", 42).lower()
    for phrase in (
        "key topics",
        "decisions",
        "tools used and their outcomes",
        "errors",
        "context needed to continue",
        "about 42 tokens",
    ):
        assert phrase in prompt
    assert prompt.endswith("user: hi")
    assert (
        "{conversation}" in DEFAULT_SUMMARY_PROMPT and "{target_tokens}" in DEFAULT_SUMMARY_PROMPT
    )


def test_custom_prompt_is_filled() -> None:
    """A custom template gets the conversation and the target length."""
    assert build_prompt("C", 7, "Brief ({target_tokens}): {conversation}") == "Brief (7): C"


def test_a_prompt_within_the_limit_is_left_whole() -> None:
    """fit_prompt returns exactly build_prompt's text when it fits."""
    counter = TokenCounter()
    lines = ["User: hello", "Assistant: hi, how can I help?"]
    assert fit_prompt(lines, 20, counter, 200) == build_prompt("\n".join(lines), 20)


@pytest.mark.parametrize("filler", ["word ", "QUJD", "\U0001f600", "\u6f22\u5b57"])
def test_long_lines_are_cut_until_the_whole_prompt_fits(filler: str) -> None:
    """Past the limit, the longest lines are cut to a common length (keeping their start,
    marked ``[...truncated]``) until the whole prompt, template included, fits; short
    lines and every entry's start stay. Emoji and CJK cost several tokens per
    character, so the cut is by tokens, not characters."""
    counter = TokenCounter()
    lines = [
        "User: short question",
        "Tool result (search): " + filler * 3_000,
        "Assistant: " + filler * 1_500,
        "User: thanks",
    ]
    template = "Summarize in {target_tokens} tokens.\n{conversation}"
    for limit in (300, 1_000, 2_500):
        prompt = fit_prompt(lines, 50, counter, limit, template)
        assert counter.count_text(prompt) <= limit
        assert counter.count_text(prompt) > limit * 0.8  # cut to the limit, not far below
        body = prompt.split("\n", 1)[1].split("\n")
        assert body[0] == "User: short question" and body[3] == "User: thanks"
        assert body[1].startswith("Tool result (search): ") and body[2].startswith("Assistant: ")
        assert body[1].endswith(" [...truncated]") and body[2].endswith(" [...truncated]")


def test_a_limit_below_the_prompts_own_words_is_refused() -> None:
    """A max_summarizer_input_tokens the template alone fills is a typed error."""
    counter = TokenCounter()
    with pytest.raises(InvalidArgument, match="no room for the conversation"):
        fit_prompt(["User: " + "word " * 400], 50, counter, 40)


def test_conversation_rendering_uses_placeholders() -> None:
    """Tool calls, results and media are rendered as labelled lines; base64 never appears."""
    image = "data:image/png;base64," + "QUJD" * 100
    text = "\n".join(
        conversation_lines(
            entries(
                HumanMessage(
                    content=[
                        {"type": "text", "text": "see"},
                        {"type": "image_url", "image_url": {"url": image}},
                    ]
                ),
                call("c1"),
                ToolMessage("boom", tool_call_id="c1", name="t", status="error"),
            ),
            ["older summary"],
        )
    )
    assert text.splitlines() == [
        "[Earlier summary] older summary",
        "User: see\n[image]".splitlines()[0],
        "[image]",
        "Assistant called tools: t({})",
        "Tool result (error) (t): boom",
    ]
    assert "QUJD" not in text


def test_heuristic_summary_keeps_the_informative_sentences_with_their_speakers() -> None:
    """Extractive: names, numbers, dates, decisions, tool results and errors are kept
    word for word, with the speaker, in order; greetings are not."""
    chosen = entries(
        HumanMessage("hi"),
        HumanMessage("My sister Ana lands in Lisbon on May 3 at 14:20."),
        AIMessage("Hello! Sure."),
        call("c1"),
        ToolMessage("Error: flight TP1234 not found", tool_call_id="c1", name="flights"),
        AIMessage("We decided to book the Hotel Avenida for 4 nights."),
    )
    text = heuristic_summary(chosen)
    assert text.splitlines() == [
        "User: My sister Ana lands in Lisbon on May 3 at 14:20.",
        "Assistant called: t({})",
        "Tool error (flights): Error: flight TP1234 not found",
        "Assistant: We decided to book the Hotel Avenida for 4 nights.",
    ]
    assert heuristic_summary(chosen) == text  # deterministic


def test_heuristic_summary_keeps_the_best_within_its_budget_and_merges_without_nesting() -> None:
    """A small budget keeps the most informative sentence; a merge picks among the
    summaries' sentences, with no header, and merging a merge adds none either."""
    chosen = entries(
        HumanMessage("I like tea. I moved to Oslo in 2019 with Maria and our dog Rex."),
        AIMessage("That sounds nice."),
    )
    assert heuristic_summary(chosen, quote=80) == (
        "User: I moved to Oslo in 2019 with Maria and our dog Rex."
    )
    first = "User: I moved to Oslo in 2019.\nAssistant: That sounds nice."
    second = "User: Maria starts at Equinor on June 2.\nTool result (calendar): June 2 is free"
    merged = heuristic_summary([], [first, second], quote=200)
    assert merged.splitlines() == [
        "User: I moved to Oslo in 2019.",
        "User: Maria starts at Equinor on June 2.",
        "Tool result (calendar): June 2 is free",
    ]
    again = heuristic_summary([], [merged, "User: The lease ends on 30 September."], quote=500)
    assert "summary" not in again.lower() and again.count("User: I moved to Oslo") == 1


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  a summary  ", "a summary"),
        (AIMessage("from a message"), "from a message"),
        ([{"type": "text", "text": "one"}, {"type": "text", "text": "two"}], "one\ntwo"),
        (AIMessage(content=[{"type": "text", "text": "blocks"}, {"type": "image"}]), "blocks"),
    ],
)
def test_normalize_accepts_text(raw: object, expected: str) -> None:
    """Strings, messages and lists of text blocks are normalized to stripped text."""
    assert normalize_output(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "  \n\t",
        None,
        42,
        AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "1"}]),
        "Error generating summary: rate limited",
        "I'm sorry, I cannot help with that",
        "Summarize the conversation below so that ...",
        [{"type": "image", "url": "https://example.com/x.png"}],
    ],
)
def test_normalize_rejects_unusable_output(raw: object) -> None:
    """Empty text, non-text, tool calls, error stubs and prompt echoes are rejected."""
    with pytest.raises(SummarizerOutputInvalid):
        normalize_output(raw)


def sync_fn(prompt: str) -> str:
    """A plain summarizer function."""
    return f"fn saw {len(prompt)} chars"


async def async_fn(prompt: str) -> str:
    """An async summarizer function."""
    await asyncio.sleep(0)
    return f"async fn saw {len(prompt)} chars"


TARGETS: dict[str, Any] = {
    "chat_model": lambda: GenericFakeChatModel(messages=iter([AIMessage("model summary")] * 2)),
    "runnable": lambda: RunnableLambda(lambda prompt: f"runnable saw {len(prompt)} chars"),
    "callable": lambda: sync_fn,
    "async_callable": lambda: async_fn,
}


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("timeout", [None, 5.0])
def test_summarizer_accepts_every_kind(kind: str, timeout: float | None) -> None:
    """Chat models, Runnables, sync and async callables all summarize, timed or not."""
    text = Summarizer(TARGETS[kind]()).summarize("hello", timeout)
    assert text in (
        "model summary",
        "runnable saw 5 chars",
        "fn saw 5 chars",
        "async fn saw 5 chars",
    )


@pytest.mark.parametrize("kind", sorted(TARGETS))
async def test_async_summarizer_accepts_every_kind(kind: str) -> None:
    """The async path (``ainvoke`` / awaiting) works for every kind."""
    text = await Summarizer(TARGETS[kind]()).asummarize("hello", 5.0)
    assert text in (
        "model summary",
        "runnable saw 5 chars",
        "fn saw 5 chars",
        "async fn saw 5 chars",
    )


def test_summarizer_errors_are_typed() -> None:
    """An exception becomes SummarizerFailed with the original as __cause__."""

    def fail(prompt: str) -> str:
        raise ConnectionError("down")

    for timeout in (None, 5.0):
        with pytest.raises(SummarizerFailed) as info:
            Summarizer(fail).summarize("x", timeout)
        assert isinstance(info.value.__cause__, ConnectionError)


def test_summarizer_timeout() -> None:
    """A call slower than the timeout raises SummarizerTimeout promptly."""
    import threading

    gate = threading.Event()

    def slow(prompt: str) -> str:
        gate.wait(10)
        return "late"

    try:
        with pytest.raises(SummarizerTimeout):
            Summarizer(slow).summarize("x", 0.2)
    finally:
        gate.set()
