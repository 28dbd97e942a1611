"""Evaluate what the model is handed (``tiermem eval context``).

Each conversation of a dataset (the format of ``tiermem eval retrieval``) is loaded
into a fresh memory at each token budget, as ``MemoryConfig(max_tokens=B)`` with
everything else default (the heuristic summary: no model is called). Each question
is then asked at the end and the context is judged: is every / any evidence turn in
it word for word, does the labelled answer string appear, how many tokens does it
take. A plain read is also judged on its messages alone (its summaries and recalled
block left out): where a summary quotes an evidence turn whole (this dataset's turns
are mostly one sentence) the full figure counts it, which a dataset of longer turns
would not. Beside tiermem, in the same process: a plain buffer (the most recent turns
that fit ``B``), one of 60 % of ``B``, and "the last 10 turns, then plain BM25 hits
for the question until ``B`` is full". A prompt-cache replay
(:mod:`tiermem.evaluation.cache`) sends a conversation turn by turn and counts what a
prefix cache could serve, with a working (a digest of a line), an always-failing and
the heuristic summarizer, beside a summarization-middleware-like strategy (summarize
all but the last 20 messages into one message once over ``B``), and how much of each
call is messages word for word.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from .._core.messages import render_text
from .._core.recall_block import RECALL_MARKER
from .._core.render import is_summary_message
from ..testing import FakeSummarizer, ManualClock
from ..tokens import TokenCounter
from ..types import MemoryConfig
from .baseline import BM25Baseline
from .cache import CacheReplay
from .dataset import Conversation, Dataset, Question, Turn
from .runner import QUERY_DELAY, evaluation_memory, load

__all__ = [
    "BUDGETS",
    "ContextFigures",
    "ContextReport",
    "ReplayFigures",
    "run_context",
    "verbatim_messages",
]

#: The token budgets every figure is taken at.
BUDGETS = (2_000, 4_000, 8_000)
#: Turns "last 10 turns + BM25" keeps before its hits.
RECENT_TURNS = 10
#: The share of the budget the smaller plain buffer fills: with no query, a read
#: should show at least the evidence that one holds.
SMALL_BUFFER = 0.6
#: Messages the summarization-middleware-like strategy keeps verbatim.
KEEP_MESSAGES = 20
#: What a cached input token costs, as a share of an uncached one: half (OpenAI's
#: older models)...
CACHED_PRICE = 0.5
#: ...and a tenth (Anthropic's cache reads, OpenAI's newer models).
CHEAP_CACHED_PRICE = 0.1

#: A method: the context handed to the model for a question at a budget.
Method = Callable[[Question, int], list[BaseMessage]]


@dataclass
class ContextFigures:
    """One method at one budget."""

    method: str
    budget: int
    questions: int = 0
    evidence_any: int = 0
    evidence_all: int = 0
    answer: int = 0
    tokens: int = 0
    over_budget: int = 0
    seconds: float = 0.0
    #: The questions none of whose evidence turns is in their context, by id.
    missed: list[str] = field(default_factory=list)

    def add(self, question: Question, turns: Mapping[str, Turn], context: str, tokens: int) -> None:
        """Judge one context."""
        found = [turns[turn_id].content in context for turn_id in question.evidence]
        self.questions += 1
        self.evidence_any += any(found)
        if not any(found):
            self.missed.append(question.id)
        self.evidence_all += all(found)
        answer = question.answer
        self.answer += answer is not None and answer.lower() in context.lower()
        self.tokens += tokens
        self.over_budget += tokens > self.budget

    def as_dict(self) -> dict[str, Any]:
        """Shares of the questions, and mean tokens and milliseconds per question."""
        n = max(self.questions, 1)
        return {
            "method": self.method,
            "budget": self.budget,
            "questions": self.questions,
            "evidence_any": round(self.evidence_any / n, 4),
            "evidence_all": round(self.evidence_all / n, 4),
            "answer": round(self.answer / n, 4),
            "mean_tokens": round(self.tokens / n, 1),
            "over_budget": self.over_budget,
            "mean_ms": round(1000 * self.seconds / n, 2),
            "missed": list(self.missed),
        }


@dataclass
class ReplayFigures:
    """One strategy's prompt-cache replay."""

    strategy: str
    budget: int
    calls: int
    cached_share: float
    billed_per_call: float
    #: Billed per call when a cached token costs :data:`CHEAP_CACHED_PRICE` of one.
    cheap_billed_per_call: float
    #: The mean share of the budget a call gives to messages word for word (neither a
    #: summary nor a recalled block).
    verbatim_share: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """The figures under stable keys."""
        return {
            "strategy": self.strategy,
            "budget": self.budget,
            "calls": self.calls,
            "cached_share": round(self.cached_share, 4),
            "billed_per_call": round(self.billed_per_call, 1),
            "cheap_billed_per_call": round(self.cheap_billed_per_call, 1),
            "verbatim_share": round(self.verbatim_share, 4),
        }


@dataclass
class ContextReport:
    """What ``tiermem eval context`` measured."""

    dataset: str
    backend: str
    conversations: int
    turns: int
    figures: list[ContextFigures] = field(default_factory=list)
    replay: list[ReplayFigures] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict with stable keys (``--json``)."""
        return {
            "dataset": self.dataset,
            "backend": self.backend,
            "conversations": self.conversations,
            "turns": self.turns,
            "figures": [f.as_dict() for f in self.figures],
            "replay": [r.as_dict() for r in self.replay],
        }


def run_context(
    dataset: Dataset,
    *,
    budgets: Sequence[int] = BUDGETS,
    url: str | None = None,
    limit_questions: int | None = None,
    memory_kwargs: Mapping[str, Any] | None = None,
    replay_turns: int = 400,
) -> ContextReport:
    """Measure the contexts of tiermem and the baselines on ``dataset``.

    Args:
        budgets: the ``max_tokens`` of every figure.
        url: the store; ``None`` is a temporary SQLite file per budget.
        limit_questions: ask only the first N questions (and load only their
            conversations).
        memory_kwargs: extra keyword arguments of ``ConversationMemory``
            (``embeddings=...``).
        replay_turns: turns of the first conversation the cache replay sends (0: none).
    """
    questions = list(dataset.questions[:limit_questions])
    wanted = {question.conversation for question in questions}
    conversations = [c for c in dataset.conversations if c.id in wanted]
    turns = {t.id: t for c in conversations for s in c.sessions for t in s.turns}
    ordered = {c.id: [t for s in c.sessions for t in s.turns] for c in conversations}
    counter = TokenCounter()
    report = ContextReport(dataset.name, "sqlite", len(conversations), len(turns))
    chosen = Dataset(tuple(conversations), tuple(questions), dataset.name)
    bm25 = BM25Baseline(chosen)
    try:
        for budget in budgets:
            memory_figures = _tiermem(
                conversations, questions, turns, budget, url, memory_kwargs, counter, report
            )
            report.figures += memory_figures
            baselines: dict[str, Method] = {
                "plain buffer": lambda q, b: _buffer(ordered[q.conversation], b, counter),
                "plain buffer, 60 % of B": lambda q, b: _buffer(
                    ordered[q.conversation], int(SMALL_BUFFER * b), counter
                ),
                "last 10 + BM25": lambda q, b: _recent_and_bm25(
                    ordered[q.conversation], q, b, counter, bm25
                ),
            }
            for name, method in baselines.items():
                figures = ContextFigures(name, budget)
                for question in questions:
                    started = time.perf_counter()
                    context = method(question, budget)
                    figures.seconds += time.perf_counter() - started
                    figures.add(question, turns, _text(context), counter.count_messages(context))
                report.figures.append(figures)
    finally:
        bm25.close()
    if replay_turns and conversations:
        report.replay = replay_cache(conversations[0], 4_000, replay_turns, url, memory_kwargs)
    return report


def _tiermem(
    conversations: Sequence[Conversation],
    questions: Sequence[Question],
    turns: Mapping[str, Turn],
    budget: int,
    url: str | None,
    memory_kwargs: Mapping[str, Any] | None,
    counter: TokenCounter,
    report: ContextReport,
) -> list[ContextFigures]:
    clock = ManualClock()
    kwargs: dict[str, Any] = {"config": MemoryConfig(max_tokens=budget), **(memory_kwargs or {})}
    asked = ContextFigures("tiermem, query=question", budget)
    plain = ContextFigures("tiermem, plain read", budget)
    alone = ContextFigures("tiermem, plain read, messages alone", budget)
    with evaluation_memory(url, clock, kwargs) as memory:
        load(memory, clock, conversations)
        if memory.context.embedder is not None:
            memory.embed_missing()
        report.backend = memory.engine.dialect.name
        last = {c.id: c.last_date + QUERY_DELAY for c in conversations}
        for question in questions:
            clock.set(last[question.conversation])
            for figures, query in ((asked, question.question), (plain, None)):
                started = time.perf_counter()
                context = memory.get_messages(question.conversation, query=query)
                figures.seconds += time.perf_counter() - started
                figures.add(question, turns, _text(context), counter.count_messages(context))
                if query is None:
                    messages = verbatim_messages(context)
                    alone.add(question, turns, _text(messages), counter.count_messages(messages))
    alone.seconds = plain.seconds  # judged on the plain read's own contexts
    return [asked, plain, alone]


def _message(turn: Turn) -> BaseMessage:
    return HumanMessage(turn.content) if turn.role == "user" else AIMessage(turn.content)


def verbatim_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages of a context shown word for word: no summary, no recalled block."""
    return [
        message
        for message in messages
        if not is_summary_message(message) and RECALL_MARKER not in message.additional_kwargs
    ]


def _text(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(render_text(message) for message in messages)


def _buffer(turns: Sequence[Turn], budget: int, counter: TokenCounter) -> list[BaseMessage]:
    """The most recent turns that fit ``budget``."""
    kept: list[BaseMessage] = []
    used = 0
    for turn in reversed(turns):
        message = _message(turn)
        cost = counter.count_message(message)
        if used + cost > budget:
            break
        kept.append(message)
        used += cost
    return kept[::-1]


def _recent_and_bm25(
    turns: Sequence[Turn],
    question: Question,
    budget: int,
    counter: TokenCounter,
    bm25: BM25Baseline,
) -> list[BaseMessage]:
    """The last 10 turns, then BM25 hits for the question (best first) until full."""
    recent = list(turns[-RECENT_TURNS:])
    context = [_message(turn) for turn in recent]
    used = counter.count_messages(context)
    by_id = {turn.id: turn for turn in turns}
    seen = {turn.id for turn in recent}
    hits: list[BaseMessage] = []
    for turn_id in bm25.search(question.question, question.conversation, 200):
        if turn_id in seen:
            continue
        message = _message(by_id[turn_id])
        cost = counter.count_message(message)
        if used + cost <= budget:
            hits.append(message)
            used += cost
    return hits + context


def replay_cache(
    conversation: Conversation,
    budget: int,
    turns: int,
    url: str | None,
    memory_kwargs: Mapping[str, Any] | None,
) -> list[ReplayFigures]:
    """Send ``turns`` user turns of ``conversation`` one by one to each strategy."""
    messages = [_message(t) for s in conversation.sessions for t in s.turns][: 2 * turns]
    counter = TokenCounter()
    strategies: dict[str, tuple[MemoryConfig, FakeSummarizer | None]] = {
        "tiermem, working summarizer": (MemoryConfig(max_tokens=budget), FakeSummarizer()),
        "tiermem, failing summarizer": (
            MemoryConfig(max_tokens=budget),
            FakeSummarizer(mode="raise", error=ConnectionError("the model is down")),
        ),
        "tiermem without recall, working summarizer": (
            MemoryConfig(max_tokens=budget, recall_share=0),
            FakeSummarizer(),
        ),
        # What the demo and the figures above use: summaries of compression_ratio of
        # their entries' size, where the working summarizer above writes a line.
        "tiermem, heuristic summary (no model)": (MemoryConfig(max_tokens=budget), None),
    }
    figures = []
    for name, (config, summarizer) in strategies.items():
        clock = ManualClock()
        kwargs: dict[str, Any] = {**(memory_kwargs or {}), "config": config}
        if summarizer is not None:
            kwargs["summarizer"] = summarizer
        replay, verbatim = CacheReplay(), 0
        with evaluation_memory(url, clock, kwargs) as memory:
            for message in messages:
                clock.advance(seconds=30)
                if isinstance(message, HumanMessage):
                    context = memory.add_and_get_messages(conversation.id, [message])
                    replay.send(context)
                    verbatim += counter.count_messages(verbatim_messages(context))
                else:
                    memory.add_messages(conversation.id, [message])
        figures.append(_figures(name, budget, replay, verbatim))
    replay, verbatim = _middleware_like(messages, budget)
    figures.append(_figures("summarization-middleware-like", budget, replay, verbatim))
    return figures


def _figures(name: str, budget: int, replay: CacheReplay, verbatim: int) -> ReplayFigures:
    return ReplayFigures(
        name,
        budget,
        replay.calls,
        replay.share,
        replay.billed(CACHED_PRICE),
        replay.billed(CHEAP_CACHED_PRICE),
        verbatim / max(replay.calls, 1) / budget,
    )


def _middleware_like(messages: Sequence[BaseMessage], budget: int) -> tuple[CacheReplay, int]:
    """Summarize everything but the last 20 messages into one leading message (the
    previous summary included) whenever the state passes ``budget``; the replay, and
    the tokens its calls gave to messages word for word."""
    counter = TokenCounter()
    summarizer = FakeSummarizer()
    state: list[BaseMessage] = []
    replay, verbatim, summarized = CacheReplay(), 0, False
    for message in messages:
        state.append(message)
        if not isinstance(message, HumanMessage):
            continue
        if counter.count_messages(state) > budget and len(state) > KEEP_MESSAGES:
            older, state = state[:-KEEP_MESSAGES], state[-KEEP_MESSAGES:]
            prompt = "Conversation:\n" + "\n".join(render_text(m) for m in older)
            digest = summarizer.invoke(prompt).content
            state.insert(
                0, HumanMessage(f"Here is a summary of the conversation to date:\n\n{digest}")
            )
            summarized = True
        replay.send(state)
        verbatim += counter.count_messages(state[1:] if summarized else state)
    return replay, verbatim
