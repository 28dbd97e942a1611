"""Memory layers at scale: episodic ``append`` and full-text ``search`` over 1,000,000 items.

Bulk-loads episodic items spread over 1,000 scopes straight into
``tiermem_layer_item`` (multi-row inserts; the API is not involved; the FTS5
triggers or the generated ``tsvector`` column index every row as it goes in),
then times, through the public API of ``mem.layers(scope)``:

* ``append("episodic", text)`` into random scopes;
* ``search("episodic", query, limit=10)`` in random scopes, each query two or
  three words of an item of that scope plus, half the time, a common word, so
  the scope holds hundreds of partial matches to rank. Every search also
  records the access of its hits (an UPDATE in the same transaction).

The text is synthetic: a 20,000-word vocabulary drawn with a Zipf law
(exponent 1.1), 8 to 24 words per item, so common words occur in most items
and rare words in a few, as in natural text. Items are interleaved across
scopes (item ``i`` in scope ``i % scopes``), the worst case for locality.

Targets on SQLite: ``search`` p95 under 20 ms, ``append`` p50 under 1 ms.

With ``--dense DIM`` every item also gets a random unit vector of ``DIM``
numbers, bulk-loaded into ``tiermem_layer_item_vector`` under the model id of
langchain-core's ``DeterministicFakeEmbedding(size=DIM)``, and the same
queries are timed on a memory with that model (hybrid search: BM25 fused with
the exact cosine over the scope's layer): first the first query of each scope
(its vectors are read from the database), then every query again (the
vectors come from the process's cache). The query's own embedding is timed
separately. Appends are timed on that memory too (each queues its item for the
background embedding worker).

Usage::

    .venv/bin/python benchmarks/layers_bench.py                    # both backends
    .venv/bin/python benchmarks/layers_bench.py --backend sqlite --items 100000
    .venv/bin/python benchmarks/layers_bench.py --items 100000 --scopes 100 --dense 384

Results go to ``benchmarks/results/layers_bench.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem._core.embedder import model_id
from tiermem._storage.layer_schema import item_table, scope_table
from tiermem._storage.vector_schema import item_vector_table

PG_URL = os.environ.get(
    "TIERMEM_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
PROJECT = "bench"
TARGETS_MS = {"search_p95": 20.0, "append_p50": 1.0}
SYLLABLES = [a + b for a in "bcdfghklmnprstvz" for b in "aeiou"] + ["qu", "th", "sh", "ch"]


def vocabulary(size: int, rng: random.Random) -> list[str]:
    """``size`` distinct pronounceable words of two to four syllables."""
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(SYLLABLES, k=rng.randint(2, 4))))
    return sorted(words)


class Corpus:
    """Deterministic Zipf-distributed text over a fixed vocabulary."""

    def __init__(self, seed: int, size: int = 20_000, exponent: float = 1.1) -> None:
        self.rng = random.Random(seed)
        self.words = vocabulary(size, self.rng)
        self.rng.shuffle(self.words)
        weights = [1.0 / (rank**exponent) for rank in range(1, size + 1)]
        self.cumulative = list(itertools.accumulate(weights))

    def text(self) -> str:
        """One item: 8 to 24 words, capitalized, with a full stop."""
        words = self.rng.choices(self.words, cum_weights=self.cumulative, k=self.rng.randint(8, 24))
        return " ".join(words).capitalize() + "."

    def common(self) -> str:
        """One of the 20 most frequent words."""
        return self.words[self.rng.randrange(20)]


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50, p95, p99, mean and max of ``samples`` (seconds) in milliseconds."""
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {
        "p50_ms": round(at(0.50), 3),
        "p95_ms": round(at(0.95), 3),
        "p99_ms": round(at(0.99), 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
        "max_ms": round(ordered[-1] * 1000, 3),
        "n": len(ordered),
    }


@contextmanager
def engine_for(backend: str, workdir: Path) -> Iterator[Engine]:
    """An engine on a SQLite file in ``workdir`` or a fresh PostgreSQL schema (dropped
    afterwards)."""
    if backend == "sqlite":
        engine = sa.create_engine(
            f"sqlite:///{workdir / 'layers.db'}", connect_args={"check_same_thread": False}
        )
        yield engine
        engine.dispose()
        return
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    engine = sa.create_engine(PG_URL, connect_args={"options": f"-csearch_path={schema}"})
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def scope_name(index: int) -> str:
    """The name of scope ``index``."""
    return f"scope-{index:05d}"


def bulk_load(
    engine: Engine, memory: ConversationMemory, corpus: Corpus, items: int, scopes: int
) -> dict[int, list[str]]:
    """Insert the scopes and ``items`` episodic items with multi-row inserts; returns a
    sample of each scope's texts (for queries)."""
    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(
            sa.insert(scope_table),
            [
                {"project": PROJECT, "scope": scope_name(i), "created_at": now}
                for i in range(scopes)
            ],
        )
        pks = {
            str(row[0]): int(row[1])
            for row in conn.execute(
                sa.select(scope_table.c.scope, scope_table.c.pk).where(
                    scope_table.c.project == PROJECT
                )
            )
        }
    samples: dict[int, list[str]] = {i: [] for i in range(scopes)}
    batch = 20_000
    started = time.perf_counter()
    for start in range(0, items, batch):
        rows = []
        for number in range(start, min(start + batch, items)):
            scope = number % scopes
            text = corpus.text()
            if len(samples[scope]) < 20:
                samples[scope].append(text)
            # Spread over the last 60 days, oldest first, so tiers and recency vary.
            moment = now - timedelta(days=60) * (1 - number / items)
            rows.append(
                {
                    "scope_pk": pks[scope_name(scope)],
                    "layer": "episodic",
                    "item_key": None,
                    "content": text,
                    "meta": "{}",
                    "token_count": memory.counter.count_text(text),
                    "byte_size": len(text.encode()) + 2,
                    "created_at": moment,
                    "updated_at": moment,
                    "last_accessed": moment,
                    "access_count": 0,
                    "memory_tier": "archived" if moment < now - timedelta(days=1) else "recent",
                }
            )
        with engine.begin() as conn:
            conn.execute(sa.insert(item_table), rows)
        done = min(start + batch, items)
        rate = done / (time.perf_counter() - started)
        print(f"\r  loaded {done:>9,} / {items:,} items ({rate:,.0f}/s)", end="", flush=True)
    print()
    # Statistics and (on PostgreSQL) the visibility map, as autovacuum would leave them.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("VACUUM ANALYZE")
        else:  # fold the load's write-ahead log into the file before measuring
            conn.exec_driver_sql("ANALYZE")
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    return samples


class TimedFakeEmbedding(DeterministicFakeEmbedding):
    """The fake model, timing each query embedding."""

    query_seconds: list[float] = []

    def embed_query(self, text: str) -> list[float]:
        """The fake vector of ``text``; its time is recorded."""
        started = time.perf_counter()
        vector = super().embed_query(text)
        self.query_seconds.append(time.perf_counter() - started)
        return vector


def load_vectors(engine: Engine, size: int, seed: int) -> str:
    """Give every item a random unit vector of ``size`` numbers under the fake
    model's id; returns that id."""
    import numpy as np

    model = model_id(TimedFakeEmbedding(size=size))
    rng = np.random.default_rng(seed)
    started, done = time.perf_counter(), 0
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(item_table.c.id, item_table.c.scope_pk).order_by(item_table.c.id)
        ).all()
    for start in range(0, len(rows), 20_000):
        batch = rows[start : start + 20_000]
        matrix = rng.standard_normal((len(batch), size)).astype("<f4")
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        values = [
            {
                "item_id": int(item_id),
                "scope_pk": int(scope_pk),
                "layer": "episodic",
                "model": model,
                "vector": vector.tobytes(),
            }
            for (item_id, scope_pk), vector in zip(batch, matrix, strict=True)
        ]
        with engine.begin() as conn:
            conn.execute(sa.insert(item_vector_table), values)
        done += len(batch)
        rate = done / (time.perf_counter() - started)
        print(f"\r  loaded {done:>9,} / {len(rows):,} vectors ({rate:,.0f}/s)", end="", flush=True)
    print()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("VACUUM ANALYZE")
        else:
            conn.exec_driver_sql("ANALYZE")
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    return model


def run_dense(
    engine: Engine,
    corpus: Corpus,
    queries: list[tuple[int, str, str]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Hybrid search (scopes searched first, then again) and appends with embeddings."""
    started = time.perf_counter()
    load_vectors(engine, args.dense, args.seed)
    results: dict[str, Any] = {"dim": args.dense}
    results["vector_load_seconds"] = round(time.perf_counter() - started, 1)
    model = TimedFakeEmbedding(size=args.dense)
    memory = ConversationMemory(
        engine=engine, project=PROJECT, config=MemoryConfig(), embeddings=model
    )
    firsts: dict[int, tuple[int, str, str]] = {}
    for asked in queries:  # the first query of each scope: its vectors are not cached
        firsts.setdefault(asked[0], asked)
    passes = {"search_first": list(firsts.values()), "search_again": queries}
    for label, batch in passes.items():
        model.query_seconds.clear()
        times = []
        for scope, text, _ in batch:
            times.append(timed(memory.layers(scope_name(scope)).search, "episodic", text)[0])
        results[label] = percentiles(times)
        results[f"{label}_query_embedding"] = percentiles(model.query_seconds)
    rng = random.Random(args.seed + 3)
    append_times = []
    for _ in range(args.appends):
        layers = memory.layers(scope_name(rng.randrange(args.scopes)))
        append_times.append(timed(layers.append, "episodic", corpus.text())[0])
    results["append"] = percentiles(append_times)
    memory.close()
    first, again, append = results["search_first"], results["search_again"], results["append"]
    print(
        f"  hybrid search, a scope's first query      p50 {first['p50_ms']:7.2f} ms  "
        f"p95 {first['p95_ms']:7.2f} ms\n"
        f"  hybrid search, every query again          p50 {again['p50_ms']:7.2f} ms  "
        f"p95 {again['p95_ms']:7.2f} ms\n"
        f"  append with embeddings  p50 {append['p50_ms']:7.3f} ms  "
        f"p95 {append['p95_ms']:7.3f} ms"
    )
    return results


def timed(call: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """Seconds one call takes, and what it returned."""
    started = time.perf_counter()
    value = call(*args)
    return time.perf_counter() - started, value


def run_backend(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    """Load, then measure appends and searches on one backend."""
    print(f"\n== {backend}: {args.items:,} episodic items in {args.scopes:,} scopes")
    corpus = Corpus(args.seed)
    results: dict[str, Any] = {"items": args.items, "scopes": args.scopes}
    keep = args.sqlite_dir if backend == "sqlite" else None
    with (
        tempfile.TemporaryDirectory() as scratch,
        engine_for(backend, keep or Path(scratch)) as engine,
    ):
        workdir = keep or Path(scratch)
        memory = ConversationMemory(engine=engine, project=PROJECT, config=MemoryConfig())
        memory.database.ensure_schema()
        started = time.perf_counter()
        saved = workdir / "samples.json"
        if keep is not None and saved.exists():  # a kept database: reuse its load
            samples = {int(k): v for k, v in json.loads(saved.read_text()).items()}
            corpus.rng.seed(args.seed + 2)
        else:
            samples = bulk_load(engine, memory, corpus, args.items, args.scopes)
            if keep is not None:
                saved.write_text(json.dumps(samples))
        results["load_seconds"] = round(time.perf_counter() - started, 1)
        if backend == "sqlite":
            results["file_mib"] = round((workdir / "layers.db").stat().st_size / 2**20, 1)
        rng = random.Random(args.seed + 1)

        def query() -> tuple[int, str, str]:
            scope = rng.randrange(args.scopes)
            source = rng.choice(samples[scope])
            words = [word.strip(".").lower() for word in source.split()]
            picked = rng.sample(words, k=min(len(words), rng.randint(2, 3)))
            if rng.random() < 0.5:
                picked.append(corpus.common())
            return scope, " ".join(picked), source

        for _ in range(args.warmup):  # connection pool, statement caches, page cache
            scope, text, _ = query()
            memory.layers(scope_name(scope)).search("episodic", text)
        search_times, found_top10, found_top1 = [], 0, 0
        asked = [query() for _ in range(args.queries)]
        for scope, text, source in asked:
            seconds, hits = timed(memory.layers(scope_name(scope)).search, "episodic", text)
            search_times.append(seconds)
            contents = [hit.item.content for hit in hits]
            found_top10 += source in contents
            found_top1 += bool(contents) and contents[0] == source
        results["search"] = percentiles(search_times)
        results["search"]["source_in_top10"] = round(found_top10 / args.queries, 3)
        results["search"]["source_first"] = round(found_top1 / args.queries, 3)
        append_times = []
        for _ in range(args.appends):
            layers = memory.layers(scope_name(rng.randrange(args.scopes)))
            append_times.append(timed(layers.append, "episodic", corpus.text())[0])
        results["append"] = percentiles(append_times)
        memory.close()
        if args.dense:
            results["dense"] = run_dense(engine, corpus, asked, args)
    search, append = results["search"], results["append"]
    print(
        f"  bulk load (not the API): {results['load_seconds']:.1f} s\n"
        f"  search  p50 {search['p50_ms']:7.2f} ms  p95 {search['p95_ms']:7.2f} ms  "
        f"p99 {search['p99_ms']:7.2f} ms  (source item in top 10: "
        f"{search['source_in_top10']:.0%}, first: {search['source_first']:.0%})\n"
        f"  append  p50 {append['p50_ms']:7.3f} ms  p95 {append['p95_ms']:7.3f} ms  "
        f"p99 {append['p99_ms']:7.3f} ms"
    )
    results["targets_met"] = {
        "search_p95": search["p95_ms"] < TARGETS_MS["search_p95"],
        "append_p50": append["p50_ms"] < TARGETS_MS["append_p50"],
    }
    return results


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (1 when a SQLite target is missed)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--scopes", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--appends", type=int, default=2_000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--dense", type=int, default=0, help="also time hybrid search with vectors of this size"
    )
    parser.add_argument(
        "--sqlite-dir",
        type=Path,
        default=None,
        help="keep the SQLite database here and reuse it on the next run (appends add to it)",
    )
    parser.add_argument(
        "--results-dir", type=Path, default=Path(__file__).parent / "results", help="JSON output"
    )
    args = parser.parse_args(argv)
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    report: dict[str, Any] = {
        "benchmark": "layers",
        "targets_ms": TARGETS_MS,
        "settings": {k: v for k, v in vars(args).items() if k not in ("results_dir", "sqlite_dir")},
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "backends": {},
    }
    for backend in backends:
        report["backends"][backend] = run_backend(backend, args)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / "layers_bench.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nresults: {out}")
    sqlite_result = report["backends"].get("sqlite")
    return 0 if sqlite_result is None or all(sqlite_result["targets_met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
