"""Compression benchmark: a long conversation stays flat in cost and inside its budget.

Plays a seeded conversation of ``--turns`` turns (default 5,000; a user message of
about 40 tokens and an assistant message of about 120 tokens per turn) into one
session with automatic compression on (``tiermem.testing.FakeSummarizer``), on a
SQLite file and on PostgreSQL (a fresh schema, dropped afterwards). A turn is the
two ``add_*`` calls plus ``get_messages``; only that is timed. The conversation is
played ``--repeat`` times (default 3, a fresh database each time) and each turn keeps
its fastest time, so pauses caused by other processes do not pass for growth; the
client thread's CPU time per turn is reported beside it.

Checks, per backend:

* flat cost: the mean turn time of the last 10% of turns is within 1.2x of the
  first 10%;
* budget: the context handed to the model never exceeds ``max_tokens``, counted
  per message with tiktoken (text plus the counter's documented overhead rule),
  after every turn.

Prints the figures and writes ``<results-dir>/compression_bench.json``. Exits 1
if a check fails::

    .venv/bin/python benchmarks/compression_bench.py
    .venv/bin/python benchmarks/compression_bench.py --turns 1000 --backends sqlite
    .venv/bin/python benchmarks/compression_bench.py --turns 1000 --no-feed  # feed's cost
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import tiktoken
from langchain_core.messages import BaseMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem.testing import FakeSummarizer, check_invariants
from tiermem.tokens import MEDIA_BLOCK_TOKENS, MESSAGE_OVERHEAD

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
RESULTS_DIR = Path(__file__).parent / "results"
SESSION = "bench"
FLAT_LIMIT = 1.2

_WORDS = (
    "account address answer api backup balance billing branch cache change client cluster "
    "config connection contract customer database deadline deploy device error export feature "
    "field file filter format gateway history index invoice issue key latency limit log memory "
    "message metric migration model network node order password payment plan policy port "
    "price project query queue record region release report request response role schema "
    "server service session setting shipment storage subscription system table team ticket "
    "timeout token update upgrade user value version warehouse webhook window worker"
).split()


@dataclass
class Corpus:
    """The seeded conversation: one (user, assistant) pair per turn."""

    turns: list[tuple[str, str]]

    @classmethod
    def make(cls, turns: int, seed: int, encoding: tiktoken.Encoding) -> Corpus:
        """Sentences of dictionary words, sized to about 40 and 120 tokens."""
        rng = random.Random(seed)

        def text(tokens: int, lead: str) -> str:
            words = [lead]
            while len(encoding.encode_ordinary(" ".join(words))) < tokens:
                sentence = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14)))
                words.append(sentence.capitalize() + ".")
            return " ".join(words)

        return cls(
            [
                (text(rng.randint(34, 46), f"[{i}]"), text(rng.randint(110, 130), f"({i})"))
                for i in range(turns)
            ]
        )


def direct_tokens(encoding: tiktoken.Encoding, messages: Sequence[BaseMessage]) -> int:
    """Tokens of a context counted with tiktoken directly: each message's text plus the
    counter's documented overhead (MESSAGE_OVERHEAD + role + name)."""
    total = 0
    for message in messages:
        total += MESSAGE_OVERHEAD + len(encoding.encode_ordinary(message.type))
        if isinstance(message.content, str):
            total += len(encoding.encode_ordinary(message.content))
        else:
            for block in message.content:
                if isinstance(block, str):
                    total += len(encoding.encode_ordinary(block))
                elif block.get("type") == "text":
                    total += len(encoding.encode_ordinary(str(block.get("text", ""))))
                else:
                    total += MEDIA_BLOCK_TOKENS
        if message.name:
            total += 1 + len(encoding.encode_ordinary(message.name))
    return total


@dataclass
class Run:
    """Figures of one backend."""

    backend: str
    turns: int
    seconds_total: float = 0.0
    turn_ms: list[float] = field(default_factory=list)
    turn_cpu_ms: list[float] = field(default_factory=list)
    load_average: list[float] = field(default_factory=list)
    context_tokens: list[int] = field(default_factory=list)
    compressions: int = 0
    merges: int = 0
    summarizer_calls: int = 0
    final_stats: dict[str, Any] = field(default_factory=dict)
    invariants_ok: bool = False
    repeats: int = 1

    @classmethod
    def fastest(cls, runs: Sequence[Run]) -> Run:
        """One run whose turn times are the per-turn minimum over ``runs`` (identical
        conversations, so everything else is the same)."""
        first = runs[0]
        for other in runs[1:]:
            if other.context_tokens != first.context_tokens:
                raise AssertionError("repeated runs handed the model different contexts")
        merged = cls(**{**asdict(first), "repeats": len(runs)})
        merged.turn_ms = [min(values) for values in zip(*(r.turn_ms for r in runs), strict=True)]
        merged.turn_cpu_ms = [
            min(values) for values in zip(*(r.turn_cpu_ms for r in runs), strict=True)
        ]
        merged.seconds_total = min(r.seconds_total for r in runs)
        merged.load_average = [value for r in runs for value in r.load_average]
        merged.invariants_ok = all(r.invariants_ok for r in runs)
        return merged

    def window_mean(self, first: bool, series: list[float] | None = None) -> float:
        """Mean turn time (ms) of the first or last 10% of turns."""
        values = self.turn_ms if series is None else series
        size = max(len(values) // 10, 1)
        return statistics.fmean(values[:size] if first else values[-size:])

    def summary(self, max_tokens: int) -> dict[str, Any]:
        """The figures and verdicts, without the per-turn series."""
        first, last = self.window_mean(True), self.window_mean(False)
        cpu_first = self.window_mean(True, self.turn_cpu_ms)
        cpu_last = self.window_mean(False, self.turn_cpu_ms)
        ordered = sorted(self.turn_ms)
        deciles = [
            statistics.fmean(chunk)
            for chunk in _chunks(self.turn_ms, max(len(self.turn_ms) // 10, 1))
        ]
        return {
            "backend": self.backend,
            "turns": self.turns,
            "repeats": self.repeats,
            "seconds_total": round(self.seconds_total, 2),
            "turn_ms_mean_first_10pct": round(first, 3),
            "turn_ms_mean_last_10pct": round(last, 3),
            "flat_ratio_last_over_first": round(last / first, 3),
            "cpu_ms_mean_first_10pct": round(cpu_first, 3),
            "cpu_ms_mean_last_10pct": round(cpu_last, 3),
            "cpu_ratio_last_over_first": round(cpu_last / cpu_first, 3),
            "load_average_start_end": self.load_average,
            "turn_ms_p50": round(ordered[len(ordered) // 2], 3),
            "turn_ms_p95": round(ordered[int(len(ordered) * 0.95)], 3),
            "turn_ms_max": round(ordered[-1], 3),
            "turn_ms_decile_means": [round(value, 3) for value in deciles],
            "context_tokens_max": max(self.context_tokens),
            "context_tokens_mean": round(statistics.fmean(self.context_tokens), 1),
            "max_tokens": max_tokens,
            "compressions": self.compressions,
            "merges": self.merges,
            "summarizer_calls": self.summarizer_calls,
            "final_stats": self.final_stats,
            "invariants_ok": self.invariants_ok,
            "flat_ok": last <= FLAT_LIMIT * first,
            "budget_ok": max(self.context_tokens) <= max_tokens,
        }


def _chunks(values: list[float], size: int) -> Iterator[list[float]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


@contextmanager
def sqlite_engine() -> Iterator[Engine]:
    """An engine on a fresh SQLite file in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="tiermem-bench-") as directory:
        engine = sa.create_engine(f"sqlite:///{directory}/bench.db")
        try:
            yield engine
        finally:
            engine.dispose()


@contextmanager
def postgres_engine(url: str) -> Iterator[Engine]:
    """An engine on a fresh PostgreSQL schema, dropped afterwards."""
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    engine = sa.create_engine(url, connect_args={"options": f"-csearch_path={schema}"})
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.dispose()


def run(backend: str, engine: Engine, corpus: Corpus, config: MemoryConfig, progress: bool) -> Run:
    """Play the corpus into one session and measure every turn."""
    summarizer = FakeSummarizer()
    memory = ConversationMemory(engine=engine, config=config, summarizer=summarizer)
    encoding = tiktoken.get_encoding(memory.counter.encoding_name)
    result = Run(backend=backend, turns=len(corpus.turns))

    def on_compressed(sender: object, **kwargs: Any) -> None:
        result.compressions += 1
        result.merges += bool(kwargs["result"].merged_summaries)

    memory.on("compressed", on_compressed)
    started = time.perf_counter()
    result.load_average.append(round(os.getloadavg()[0], 2))
    try:
        for index, (human, ai) in enumerate(corpus.turns):
            begin, begin_cpu = time.perf_counter(), time.thread_time()
            memory.add_user_message(SESSION, human)
            memory.add_assistant_message(SESSION, ai)
            context = memory.get_messages(SESSION)
            result.turn_ms.append((time.perf_counter() - begin) * 1000)
            result.turn_cpu_ms.append((time.thread_time() - begin_cpu) * 1000)
            counted = memory.counter.count_messages(context)
            direct = direct_tokens(encoding, context)
            if counted != direct:
                raise AssertionError(f"turn {index}: counter {counted} != tiktoken {direct}")
            result.context_tokens.append(direct)
            if progress and (index + 1) % 500 == 0:
                recent = statistics.fmean(result.turn_ms[-500:])
                print(
                    f"  {backend}: {index + 1:>6} turns, last 500 mean {recent:6.2f} ms, "
                    f"context {direct} tokens",
                    file=sys.stderr,
                )
        result.seconds_total = time.perf_counter() - started
        result.load_average.append(round(os.getloadavg()[0], 2))
        stats = memory.get_stats(SESSION)
        result.final_stats = {
            key: value for key, value in asdict(stats).items() if isinstance(value, int | str)
        }
        result.summarizer_calls = len(summarizer.calls)
        check_invariants(engine)
        result.invariants_ok = True
    finally:
        memory.close()
    return result


def _versions() -> dict[str, str]:
    names = ("tiermem", "langchain-core", "sqlalchemy", "tiktoken", "psycopg")
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=5_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--max-tokens", type=int, default=4_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="play the conversation this many times (fresh database each) and keep each "
        "turn's fastest time, which filters out pauses caused by other processes",
    )
    parser.add_argument("--pg-url", default=PG_URL)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--no-feed", action="store_true", help="turn the change feed off (to measure its cost)"
    )
    args = parser.parse_args(argv)

    config = MemoryConfig(max_tokens=args.max_tokens, change_feed=not args.no_feed)
    probe = ConversationMemory("sqlite://")
    encoding = tiktoken.get_encoding(probe.counter.encoding_name)
    probe.close()
    corpus = Corpus.make(args.turns, args.seed, encoding)
    user_tokens = statistics.fmean(len(encoding.encode_ordinary(h)) for h, _ in corpus.turns)
    ai_tokens = statistics.fmean(len(encoding.encode_ordinary(a)) for _, a in corpus.turns)
    print(
        f"{args.turns} turns, user ~{user_tokens:.0f} / assistant ~{ai_tokens:.0f} tokens, "
        f"max_tokens={args.max_tokens}"
    )

    summaries = []
    runs = []
    for backend in args.backends.split(","):
        repeats = []
        for _ in range(args.repeat):
            opener = sqlite_engine() if backend == "sqlite" else postgres_engine(args.pg_url)
            with opener as engine:
                repeats.append(run(backend, engine, corpus, config, progress=not args.quiet))
        measured = Run.fastest(repeats)
        runs.append(measured)
        summaries.append(measured.summary(args.max_tokens))

    for figures in summaries:
        print(
            f"\n{figures['backend']}: {figures['turns']} turns in {figures['seconds_total']} s "
            f"(fastest of {figures['repeats']} runs per turn)\n"
            f"  turn (2 adds + get_messages): first 10% {figures['turn_ms_mean_first_10pct']} ms, "
            f"last 10% {figures['turn_ms_mean_last_10pct']} ms, "
            f"ratio {figures['flat_ratio_last_over_first']} (limit {FLAT_LIMIT}); "
            f"client CPU {figures['cpu_ms_mean_first_10pct']} -> "
            f"{figures['cpu_ms_mean_last_10pct']} ms (ratio {figures['cpu_ratio_last_over_first']})"
            f", load average {figures['load_average_start_end']}\n"
            f"  p50 {figures['turn_ms_p50']} ms, p95 {figures['turn_ms_p95']} ms, "
            f"max {figures['turn_ms_max']} ms\n"
            f"  decile means (ms): {figures['turn_ms_decile_means']}\n"
            f"  context: max {figures['context_tokens_max']} / mean "
            f"{figures['context_tokens_mean']} tokens (budget {figures['max_tokens']})\n"
            f"  {figures['compressions']} compressions ({figures['merges']} merges), "
            f"{figures['summarizer_calls']} summarizer calls, "
            f"final {figures['final_stats']}\n"
            f"  flat: {'PASS' if figures['flat_ok'] else 'FAIL'}, "
            f"budget: {'PASS' if figures['budget_ok'] else 'FAIL'}, "
            f"invariants: {'PASS' if figures['invariants_ok'] else 'FAIL'}"
        )

    args.results_dir.mkdir(parents=True, exist_ok=True)
    output = args.results_dir / "compression_bench.json"
    document = {
        "created_at": datetime.now(UTC).isoformat(),
        "settings": {
            "turns": args.turns,
            "repeat": args.repeat,
            "seed": args.seed,
            "max_tokens": args.max_tokens,
            "config": {
                k: v for k, v in asdict(config).items() if isinstance(v, int | float | str | bool)
            },
            "user_tokens_mean": round(user_tokens, 1),
            "assistant_tokens_mean": round(ai_tokens, 1),
            "flat_limit": FLAT_LIMIT,
        },
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "versions": _versions(),
        "results": summaries,
        "series": {
            measured.backend: {
                "turn_ms": [round(v, 4) for v in measured.turn_ms],
                "turn_cpu_ms": [round(v, 4) for v in measured.turn_cpu_ms],
                "context_tokens": measured.context_tokens,
            }
            for measured in runs
        },
    }
    output.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {output}")
    ok = all(f["flat_ok"] and f["budget_ok"] and f["invariants_ok"] for f in summaries)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
