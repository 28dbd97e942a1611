"""What the model is handed, on ``benchmarks/context/dataset.json`` (``make bench``).

Runs ``tiermem eval context``: at budgets of 2,000, 4,000 and 8,000 tokens, each
question's context from tiermem (the question as the query, and a plain read) beside
a plain buffer and "last 10 turns + BM25", judged by whether the evidence turns and
the answer are in it; then a prompt-cache replay of one conversation at 4,000 tokens
with a working and an always-failing summarizer, beside a
summarization-middleware-like strategy. No LLM is called. Figures go to
``benchmarks/results/context.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from tiermem.evaluation import load_dataset
from tiermem.evaluation.context import BUDGETS, run_context
from tiermem.evaluation.table import context_tables

HERE = Path(__file__).parent
DATASET = HERE / "context" / "dataset.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-questions", type=int, default=None)
    parser.add_argument("--replay-turns", type=int, default=400)
    parser.add_argument("--url", default=None, help="store (default: temporary SQLite)")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    options = parser.parse_args(argv)
    console = Console(width=110)
    report = run_context(
        load_dataset(DATASET),
        budgets=BUDGETS,
        url=options.url,
        limit_questions=options.limit_questions,
        replay_turns=options.replay_turns,
    )
    for table in context_tables(report):
        console.print(table)
    options.results_dir.mkdir(parents=True, exist_ok=True)
    target = options.results_dir / "context.json"
    target.write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    best = {(row.method, row.budget): row.as_dict()["evidence_any"] for row in report.figures}
    line = ", ".join(
        f"B={b}: tiermem {best[('tiermem, query=question', b)]:.2f} / "
        f"buffer {best[('plain buffer', b)]:.2f} / last10+BM25 {best[('last 10 + BM25', b)]:.2f}"
        for b in BUDGETS
    )
    print(f"context evidence-any: {line}; written to {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
