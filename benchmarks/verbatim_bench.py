"""How much of the budget a plain read gives to messages word for word, turn by turn.

Plays conversations of ``context/dataset.json`` one message at a time into
``MemoryConfig(max_tokens=B)`` (everything else default: the heuristic, extractive
summary; no model) and, after each user message of a conversation's second half
(where compression has long begun), reads the context with ``get_messages(session,
query="")``. Reports per budget the mean and the fewest tokens of messages shown word
for word (neither a summary nor a recalled block) and the summaries' mean tokens.

With no query, a read should show at least what a plain buffer of 60 % of the budget
holds (#31): on a dataset whose turns no summary quotes whole, that is its messages.
The end-of-conversation figures of ``tiermem eval context`` sample ten points of ten
compression cycles; this samples every turn. Writes
``<results-dir>/verbatim_bench.json``::

    .venv/bin/python benchmarks/verbatim_bench.py
    .venv/bin/python benchmarks/verbatim_bench.py --conversations 1 --budgets 2000
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from tiermem import MemoryConfig
from tiermem.evaluation import load_dataset
from tiermem.evaluation.context import verbatim_messages
from tiermem.evaluation.runner import evaluation_memory
from tiermem.testing import ManualClock
from tiermem.tokens import TokenCounter

HERE = Path(__file__).parent
DATASET = HERE / "context" / "dataset.json"


def measure(budget: int, conversations: int) -> dict[str, float]:
    """The figures of one budget over the first ``conversations`` conversations."""
    counter = TokenCounter()
    shown: list[int] = []
    summaries: list[int] = []
    for conversation in load_dataset(DATASET).conversations[:conversations]:
        messages: list[BaseMessage] = [
            HumanMessage(turn.content) if turn.role == "user" else AIMessage(turn.content)
            for session in conversation.sessions
            for turn in session.turns
        ]
        clock = ManualClock()
        config = {"config": MemoryConfig(max_tokens=budget)}
        with evaluation_memory(None, clock, config) as memory:
            for index, message in enumerate(messages):
                clock.advance(seconds=30)
                memory.add_messages(conversation.id, [message])
                if not isinstance(message, HumanMessage) or index < len(messages) // 2:
                    continue
                context = memory.get_messages(conversation.id, query="")
                words = counter.count_messages(verbatim_messages(context))
                shown.append(words)
                summaries.append(counter.count_messages(context) - words)
    return {
        "budget": budget,
        "reads": len(shown),
        "verbatim_mean": round(statistics.mean(shown), 1),
        "verbatim_share": round(statistics.mean(shown) / budget, 4),
        "verbatim_fewest": min(shown),
        "summaries_mean": round(statistics.mean(summaries), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="2000,4000,8000")
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    options = parser.parse_args(argv)
    # An automatic compression's fallback is logged; the figures are what matter here.
    logging.getLogger("tiermem").setLevel(logging.ERROR)
    rows = [measure(int(b), options.conversations) for b in options.budgets.split(",")]
    print("budget  reads  verbatim mean (share of B)  fewest  summaries mean")
    for row in rows:
        print(
            f"{row['budget']:>6}  {row['reads']:>5}  {row['verbatim_mean']:>9.0f} "
            f"({row['verbatim_share']:.2f}){'':>11}  {row['verbatim_fewest']:>6}  "
            f"{row['summaries_mean']:>14.0f}"
        )
    options.results_dir.mkdir(parents=True, exist_ok=True)
    target = options.results_dir / "verbatim_bench.json"
    target.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"written to {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
