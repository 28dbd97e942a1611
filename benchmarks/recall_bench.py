"""Retrieval evaluation on the recall datasets (``make bench`` runs it).

Runs ``tiermem eval retrieval`` on ``benchmarks/recall/dev.json`` and
``heldout.json``: tiermem's search beside the SQLite FTS5 BM25 baselines, per
question category. With ``--dense``, a dense row too: multilingual-e5-small
(``tiermem.testing.E5Embeddings``) ranking each conversation's turns by cosine
similarity, passage vectors cached in ``benchmarks/.cache/`` so later runs embed only
the questions (whose embedding its query times include).
It is a reference of what plain embeddings reach on the same questions, not a
tiermem feature. With ``--dense`` a ``tiermem-e5`` row too: tiermem's hybrid search
(``ConversationMemory(embeddings=...)``, the default ``dense_weight``) with the same
model and cache, questions included: from the second run on its query times leave the
question's embedding out. Figures go to ``benchmarks/results/recall.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from tiermem.evaluation import Dataset, Question, load_dataset, run_retrieval
from tiermem.evaluation.runner import MethodReport, Search, measure
from tiermem.evaluation.table import report_table

HERE = Path(__file__).parent
FILES = [HERE / "recall" / "dev.json", HERE / "recall" / "heldout.json"]
CACHE = HERE / ".cache" / "e5-small.sqlite"


def dense_search(dataset: Dataset, console: Console) -> Search:
    """Cosine similarity of e5 vectors within each conversation."""
    import numpy as np

    from tiermem.testing import CachedEmbeddings, E5Embeddings

    e5 = E5Embeddings()
    model = CachedEmbeddings(e5, CACHE)  # passages only: queries are embedded, and timed
    ids: dict[str, list[str]] = {}
    matrices: dict[str, Any] = {}
    started = time.perf_counter()
    for conversation in dataset.conversations:
        turns = [turn for session in conversation.sessions for turn in session.turns]
        ids[conversation.id] = [turn.id for turn in turns]
        vectors = model.embed_documents([turn.content for turn in turns])
        matrices[conversation.id] = np.asarray(vectors, dtype=np.float32)
    console.print(f"e5 passages ready in {time.perf_counter() - started:.1f} s")

    def search(question: Question, k: int) -> list[str]:
        vector = np.asarray(e5.embed_query(question.question), dtype=np.float32)
        scores = matrices[question.conversation] @ vector
        best = np.argsort(-scores)[:k]
        return [ids[question.conversation][i] for i in best]

    return search


def hybrid_method(
    dataset: Dataset, k: int, url: str | None, limit_questions: int | None
) -> MethodReport:
    """tiermem's hybrid search with e5 (vectors of passages and questions cached)."""
    from tiermem.testing import CachedEmbeddings, E5Embeddings

    model = CachedEmbeddings(E5Embeddings(), CACHE)
    try:
        report = run_retrieval(
            dataset,
            k=k,
            url=url,
            limit_questions=limit_questions,
            memory_kwargs={"embeddings": model},
            baselines=(),
        )
    finally:
        model.close()
    return dataclasses.replace(report.methods[0], name="tiermem-e5")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--limit-questions", type=int, default=None)
    parser.add_argument("--url", default=None, help="store (default: temporary SQLite)")
    parser.add_argument("--dense", action="store_true", help="add the e5 dense reference row")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    options = parser.parse_args(argv)
    console = Console(width=100)
    results: dict[str, Any] = {}
    for path in FILES:
        dataset = load_dataset(path)
        report = run_retrieval(
            dataset, k=options.k, url=options.url, limit_questions=options.limit_questions
        )
        if options.dense:
            questions = dataset.questions[: options.limit_questions]
            search = dense_search(dataset, console)
            dense = measure("e5-dense", search, questions, options.k)
            hybrid = hybrid_method(dataset, options.k, options.url, options.limit_questions)
            report = dataclasses.replace(report, methods=(*report.methods, hybrid, dense))
        console.print(report_table(report))
        results[dataset.name] = report.as_dict()
    options.results_dir.mkdir(parents=True, exist_ok=True)
    target = options.results_dir / "recall.json"
    target.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    for name, figures in results.items():
        line = ", ".join(
            f"{method} nDCG {values['overall']['ndcg']:.3f}"
            for method, values in figures["methods"].items()
        )
        print(f"recall {name}: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
