"""Run a retrieval evaluation: tiermem's search and the BM25 baselines on one dataset.

Each conversation is loaded into a fresh memory as one session, a batch of messages
per dataset session with the memory's clock at that session's date, so entries carry
the dataset's time. Questions are then asked with the clock just after the
conversation's last session (:data:`QUERY_DELAY`), which is when a user would ask
them: the search's recency bonus is computed against that time.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ..memory import ConversationMemory
from ..testing import ManualClock
from ..types import MemoryConfig
from .baseline import BM25Baseline
from .dataset import Conversation, Dataset, Question
from .metrics import Outcome, Summary, summarize

__all__ = [
    "BASELINES",
    "QUERY_DELAY",
    "MethodReport",
    "RetrievalReport",
    "Search",
    "load",
    "measure",
    "run_retrieval",
]

#: Questions are asked this long after the conversation's last session.
QUERY_DELAY = timedelta(hours=1)
#: Baseline rows by name: the FTS5 tokenizer each uses.
BASELINES = {"bm25-porter": "porter unicode61", "bm25-default": "unicode61"}
#: Only originals are evaluated: nothing is ever compressed while loading.
EVAL_CONFIG = MemoryConfig(auto_compress=False)

#: A method under evaluation: the ids of its best ``k`` turns for a question.
Search = Callable[[Question, int], list[str]]


@dataclass(frozen=True, slots=True)
class MethodReport:
    """One method's figures, overall and per question category."""

    name: str
    overall: Summary
    categories: dict[str, Summary]

    def as_dict(self) -> dict[str, Any]:
        """The figures under stable keys."""
        return {
            "overall": self.overall.as_dict(),
            "categories": {name: s.as_dict() for name, s in sorted(self.categories.items())},
        }


@dataclass(frozen=True, slots=True)
class RetrievalReport:
    """What an evaluation measured."""

    dataset: str
    k: int
    backend: str
    conversations: int
    turns: int
    load_seconds: float
    methods: tuple[MethodReport, ...] = field(default=())

    @property
    def questions(self) -> int:
        """How many questions were asked."""
        return self.methods[0].overall.questions if self.methods else 0

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict with stable keys (``--json``)."""
        return {
            "dataset": self.dataset,
            "k": self.k,
            "backend": self.backend,
            "questions": self.questions,
            "conversations": self.conversations,
            "turns": self.turns,
            "load_seconds": round(self.load_seconds, 3),
            "methods": {method.name: method.as_dict() for method in self.methods},
        }


def run_retrieval(
    dataset: Dataset,
    *,
    k: int = 10,
    url: str | None = None,
    limit_questions: int | None = None,
    memory_kwargs: Mapping[str, Any] | None = None,
    baselines: Sequence[str] = tuple(BASELINES),
) -> RetrievalReport:
    """Evaluate tiermem's search and the ``baselines`` on ``dataset``.

    Args:
        k: the cut-off of every metric (and the search's ``limit``).
        url: the store; ``None`` is a temporary SQLite file. Elsewhere (PostgreSQL) the
            evaluation uses a fresh project, whose sessions it deletes afterwards.
        limit_questions: ask only the first N questions (and load only their
            conversations).
        memory_kwargs: extra keyword arguments of :class:`ConversationMemory` (a
            ``config`` replaces the one that never compresses; ``clock`` and
            ``project`` belong to the evaluation).
        baselines: names of :data:`BASELINES` to run beside tiermem.
    """
    questions = dataset.questions[:limit_questions]
    wanted = {question.conversation for question in questions}
    conversations = [c for c in dataset.conversations if c.id in wanted]
    clock = ManualClock()
    kwargs: dict[str, Any] = {"config": EVAL_CONFIG, **(memory_kwargs or {})}
    with evaluation_memory(url, clock, kwargs) as memory:
        started = time.perf_counter()
        turn_of = load(memory, clock, conversations)
        if memory.context.embedder is not None:
            # Search what is stored, not what the background worker reached so far.
            memory.embed_missing()
        load_seconds = time.perf_counter() - started
        last = {c.id: c.last_date + QUERY_DELAY for c in conversations}

        def search(question: Question, limit: int) -> list[str]:
            clock.set(last[question.conversation])
            hits = memory.search(question.question, session_id=question.conversation, limit=limit)
            return [turn_of[hit.entry.id] for hit in hits if hit.entry.id in turn_of]

        methods = [measure("tiermem", search, questions, k)]
        backend = memory.engine.dialect.name
    chosen = Dataset(tuple(conversations), tuple(questions), dataset.name)
    for name in baselines:
        baseline = BM25Baseline(chosen, BASELINES[name])
        try:
            methods.append(measure(name, baseline.ask, questions, k))
        finally:
            baseline.close()
    return RetrievalReport(
        dataset=dataset.name,
        k=k,
        backend=backend,
        conversations=len(conversations),
        turns=len(turn_of),
        load_seconds=load_seconds,
        methods=tuple(methods),
    )


@contextmanager
def evaluation_memory(
    url: str | None, clock: ManualClock, kwargs: dict[str, Any]
) -> Iterator[ConversationMemory]:
    """A fresh memory: a temporary SQLite file, or a new project at ``url``."""
    with tempfile.TemporaryDirectory(prefix="tiermem-eval-") as folder:
        target = url or f"sqlite:///{Path(folder) / 'eval.db'}"
        project = "eval" if url is None else f"eval-{uuid.uuid4().hex[:12]}"
        memory = ConversationMemory(target, **{**kwargs, "project": project, "clock": clock})
        try:
            yield memory
        finally:
            try:
                if url is not None:  # a store of the caller's: leave nothing behind
                    for info in memory.list_sessions():
                        memory.clear_session(info.session_id)
            finally:
                memory.close()


def load(
    memory: ConversationMemory, clock: ManualClock, conversations: Sequence[Conversation]
) -> dict[int, str]:
    """Store each conversation as session ``conversation.id`` of ``memory``, one
    batch per dataset session at its date on ``clock`` (message ids are the turn
    ids); returns entry id -> turn id."""
    turn_of: dict[int, str] = {}
    for conversation in conversations:
        for session in conversation.sessions:
            clock.set(session.date)
            messages: list[BaseMessage] = [
                HumanMessage(turn.content, id=turn.id)
                if turn.role == "user"
                else AIMessage(turn.content, id=turn.id)
                for turn in session.turns
            ]
            entries = memory.add_messages(conversation.id, messages)
            turn_of.update(
                (entry.id, turn.id) for entry, turn in zip(entries, session.turns, strict=True)
            )
        # The index catches up with new entries on the next search: do it untimed.
        clock.set(conversation.last_date + QUERY_DELAY)
        memory.search("warm up", session_id=conversation.id, limit=1)
    return turn_of


def measure(name: str, search: Search, questions: Sequence[Question], k: int) -> MethodReport:
    """Ask every question with ``search``, timing each, and summarize per category
    (a benchmark adds its own methods to a report with it)."""
    outcomes = []
    for question in questions:
        started = time.perf_counter()
        ranked = search(question, k)
        seconds = time.perf_counter() - started
        outcomes.append(
            Outcome(question.id, question.category, tuple(ranked), question.evidence, seconds)
        )
    categories = sorted({outcome.category for outcome in outcomes})
    return MethodReport(
        name=name,
        overall=summarize(outcomes, k),
        categories={
            category: summarize([o for o in outcomes if o.category == category], k)
            for category in categories
        },
    )
