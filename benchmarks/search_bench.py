"""Entry search at scale: ``mem.search`` in one session of 100,000 entries, lexical
and hybrid.

Loads one session through the public API (``add_messages`` in batches of 1,000,
compression off), then times ``search(query, session_id=..., limit=10)``:

* lexical: BM25 over stemmed words, recency and tier boosts;
* hybrid: the same memory with ``embeddings=`` (langchain-core's
  ``DeterministicFakeEmbedding``, 384 dimensions, the size of
  multilingual-e5-small: its vectors are random, so this measures cost, not
  quality), every entry embedded by ``embed_missing`` first. The query's own
  embedding time is reported separately (the fake model's is near zero; a real
  model adds its own: about 40 ms for e5-small on this 2-core machine).

Each query is two or three words of a random entry plus, half the time, one of the
20 most common words, so thousands of entries match partially. The text is the
synthetic Zipf corpus of ``layers_bench.py``.

Target: p95 under 20 ms at 100,000 entries, both backends, lexical and hybrid.

Usage::

    .venv/bin/python benchmarks/search_bench.py                      # both backends
    .venv/bin/python benchmarks/search_bench.py --backend sqlite --entries 20000

Results go to ``benchmarks/results/search_bench.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import HumanMessage

from tiermem import ConversationMemory, MemoryConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from layers_bench import Corpus, engine_for, percentiles  # noqa: E402

TARGET_P95_MS = 20.0
SESSION = "big"


class TimedEmbeddings(DeterministicFakeEmbedding):
    """The fake model, timing each query embedding."""

    query_seconds: list[float] = []

    def embed_query(self, text: str) -> list[float]:
        start = time.perf_counter()
        vector = super().embed_query(text)
        self.query_seconds.append(time.perf_counter() - start)
        return vector


def load(memory: ConversationMemory, corpus: Corpus, entries: int) -> list[str]:
    """Store ``entries`` messages in one session; returns their texts."""
    texts = [corpus.text() for _ in range(entries)]
    for start in range(0, entries, 1000):
        memory.add_messages(SESSION, [HumanMessage(text) for text in texts[start : start + 1000]])
    return texts


def queries(corpus: Corpus, texts: list[str], count: int) -> list[str]:
    """Two or three words of a random entry, half the time with a common word."""
    found = []
    for _ in range(count):
        words = corpus.rng.choice(texts).rstrip(".").lower().split()
        picked = corpus.rng.sample(words, k=min(len(words), corpus.rng.randint(2, 3)))
        if corpus.rng.random() < 0.5:
            picked.append(corpus.common())
        found.append(" ".join(picked))
    return found


def timed(memory: ConversationMemory, asked: list[str]) -> dict[str, float]:
    """Percentiles of ``search`` over ``asked`` (after 10 warm-up queries)."""
    for query in asked[:10]:
        memory.search(query, session_id=SESSION)
    samples = []
    for query in asked:
        start = time.perf_counter()
        memory.search(query, session_id=SESSION)
        samples.append(time.perf_counter() - start)
    return percentiles(samples)


def run(backend: str, entries: int, count: int) -> dict[str, Any]:
    """Load, then time lexical and hybrid search on one backend."""
    corpus = Corpus(seed=17)
    config = MemoryConfig(auto_compress=False, max_tokens=10**9, max_entries=10**9)
    with tempfile.TemporaryDirectory() as tmp, engine_for(backend, Path(tmp)) as engine:
        memory = ConversationMemory(engine=engine, config=config)
        start = time.perf_counter()
        texts = load(memory, corpus, entries)
        load_s = time.perf_counter() - start
        asked = queries(corpus, texts, count)
        lexical = timed(memory, asked)
        memory.close()
        model = TimedEmbeddings(size=384)
        hybrid_memory = ConversationMemory(engine=engine, config=config, embeddings=model)
        start = time.perf_counter()
        embedded = hybrid_memory.embed_missing()
        embed_s = time.perf_counter() - start
        model.query_seconds.clear()
        hybrid = timed(hybrid_memory, asked)
        query_embedding = percentiles(model.query_seconds)
        hybrid_memory.close()
    return {
        "backend": backend,
        "entries": entries,
        "load_seconds": round(load_s, 1),
        "embedded": embedded,
        "embed_seconds": round(embed_s, 1),
        "lexical": lexical,
        "hybrid": hybrid,
        "hybrid_query_embedding": query_embedding,
        "target_p95_ms": TARGET_P95_MS,
    }


def main() -> None:
    """Run the benchmark and print one JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "runs": [run(backend, args.entries, args.queries) for backend in backends],
    }
    out = Path(__file__).resolve().parent / "results" / "search_bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
