"""One-call turn benchmark: tiermem's ``add_and_get_messages`` beside LangChain's incumbents.

The harness of the per-turn target: on a SQLite file (exact counts, durable), a turn
stores a ~40-token human and a ~120-token AI message and reads the next context at a
2,000-token budget, in one ``add_and_get_messages`` call. The same seeded conversation
goes, in the same process and the same run, through

* ``tiermem`` (the defaults: recall of what is out of view, change feed on),
  ``tiermem-norecall`` (``recall_share=0``: the turn SummarizationMiddleware's is
  compared with, which searches nothing) and ``tiermem-norecall-nofeed`` (feed off too);
* ``SummarizationMiddleware`` (LangChain's agent middleware, in memory, driven through
  its ``before_model`` hook with a fake model and tiktoken counting);
* ``ConversationSummaryBufferMemory`` (langchain-classic, in memory).

The contenders step turn by turn, in a new random order each turn (seeded), so a
burst of load on a shared machine falls on all of them alike and none always runs
right after the same one. (A fixed rotation did: the variant it placed after a
contender running the same code found the processor's caches warm. Two identical
memories measured that way differed by 10-15 %; in random order, by 2 % at most.)
The thread's CPU time of each turn (user and system, no waiting) is reported beside
its wall time, as the steadier figure there.
The conversation is played ``--repeat`` times (fresh contenders each time); per
contender, the p50 and p95 of the last 10 % of turns are taken per repeat and the
median over repeats is reported, with the ratio of each to
``SummarizationMiddleware``'s. ``--backends sqlite,postgres`` adds ``tiermem-pg``,
played in a pass of its own beside ``SummarizationMiddleware`` (its ratio is to that
pass's middleware): the server's own work after each commit (its WAL writer, its
background writer) runs on the machine's cores while the next contender steps, and
interleaved with the SQLite contenders it made their turns 1.3-1.6 times as long on a
2-core machine.

A second phase measures the change feed's cost on plain appends: ``--appends`` (default
2,000) ``add_message`` calls into one session, feed on and feed off interleaved, the
seconds (wall and this thread's CPU) and the database file size of each; with
``--backends sqlite,postgres`` the same on PostgreSQL (a fresh schema per run, its
size the tables' with their indexes and TOAST, ``pg_total_relation_size``; CPU is
the client's, the server's own is not counted).

Prints the tables and writes ``<results-dir>/turn_bench.json``::

    .venv/bin/python benchmarks/turn_bench.py
    .venv/bin/python benchmarks/turn_bench.py --turns 1000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from base import MAX_TOKENS, SESSION_ID, Contender
from corpus import Turn, make_corpus
from langchain_core.messages import HumanMessage
from lc_contenders import ClassicMemoryContender, SummarizationMiddlewareContender
from sqlalchemy import create_engine, text
from tiermem_contender import POSTGRES_URL, TiermemContender, TiermemPostgresContender

from tiermem import ConversationMemory, MemoryConfig
from tiermem.testing import FakeSummarizer

RESULTS_DIR = Path(__file__).parent / "results"
BASELINE = "SummarizationMiddleware"
TARGET_RATIO = 1.5
"""The per-turn target: tiermem's turn at most this many times the baseline's."""
FEED_LIMIT = 1.10
"""The change feed's target: at most 10 % of a turn and of the file size."""


class ConfiguredTiermem(TiermemContender):
    """tiermem with some settings changed, otherwise as :class:`TiermemContender`."""

    def __init__(self, url: str, **settings: Any) -> None:
        """Open the memory on ``url`` with ``settings`` applied to its config."""
        self._memory = ConversationMemory(
            url=url,
            config=MemoryConfig(max_tokens=MAX_TOKENS, **settings),
            summarizer=FakeSummarizer(record_calls=False),
        )
        self._memory.database.ensure_schema()


#: The turn without recall: what SummarizationMiddleware's turn does (no search).
NO_RECALL = "tiermem-norecall"
#: The same with the change feed off: the feed's cost is the ratio of the two.
NO_FEED = "tiermem-norecall-nofeed"


#: The PostgreSQL contender, played in a pass of its own (see the module's docstring).
POSTGRES = "tiermem-pg"


def passes(postgres: bool) -> list[list[str]]:
    """The contenders played together, pass by pass: the in-process ones, then
    (``postgres``) ``tiermem-pg`` beside the baseline alone."""
    local = [NO_RECALL, NO_FEED, "tiermem", BASELINE, "ConversationSummaryBufferMemory"]
    return [local, [POSTGRES, BASELINE]] if postgres else [local]


def _contender(name: str, directory: str) -> Contender[Any]:
    if name == POSTGRES:
        return TiermemPostgresContender()
    if name == BASELINE:
        return SummarizationMiddlewareContender()
    if name == "ConversationSummaryBufferMemory":
        return ClassicMemoryContender(summarize=True)
    if name == "tiermem":
        return TiermemContender(url=f"sqlite:///{directory}/feed.db")
    if name == NO_RECALL:
        return ConfiguredTiermem(f"sqlite:///{directory}/norecall.db", recall_share=0.0)
    return ConfiguredTiermem(
        f"sqlite:///{directory}/nofeed.db", recall_share=0.0, change_feed=False
    )


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def turn_orders(names: Sequence[str], turns: int, seed: int) -> Iterator[list[str]]:
    """The order the contenders step in, per turn: a random permutation each time."""
    shuffled = random.Random(seed)
    for _ in range(turns):
        yield shuffled.sample(list(names), len(names))


def play(corpus: list[Turn], names: Sequence[str], seed: int) -> dict[str, dict[str, float]]:
    """Play ``corpus`` through the contenders ``names``, interleaved in a random order
    per turn; p50/p95 of the last 10 % (us)."""
    with tempfile.TemporaryDirectory(prefix="tiermem-turn-") as directory:
        contenders = {name: _contender(name, directory) for name in names}
        times: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, list[float]] = {name: [] for name in names}
        try:
            for turn, order in zip(corpus, turn_orders(names, len(corpus), seed), strict=True):
                for name in order:
                    step = contenders[name].step
                    begin, begin_cpu = time.perf_counter(), time.thread_time()
                    step(turn.human, turn.ai)
                    times[name].append((time.perf_counter() - begin) * 1e6)
                    cpu[name].append((time.thread_time() - begin_cpu) * 1e6)
        finally:
            for contender in contenders.values():
                contender.close()
    tail = max(1, len(corpus) // 10)
    return {
        name: {
            "p50_us": _percentile(series[-tail:], 0.50),
            "p95_us": _percentile(series[-tail:], 0.95),
            "cpu_p50_us": _percentile(cpu[name][-tail:], 0.50),
        }
        for name, series in times.items()
    }


def _appends(url: str, feed: bool, texts: list[str]) -> tuple[float, float]:
    """``add_message`` of every text: wall and this thread's CPU seconds."""
    memory = ConversationMemory(url=url, config=MemoryConfig(change_feed=feed))
    memory.database.ensure_schema()
    try:
        begin, begin_cpu = time.perf_counter(), time.thread_time()
        for message in texts:
            memory.add_message(SESSION_ID, HumanMessage(message))
        return time.perf_counter() - begin, time.thread_time() - begin_cpu
    finally:
        memory.close()


@contextmanager
def _sqlite_database() -> Iterator[tuple[str, Callable[[], float]]]:
    """A fresh SQLite file: its URL, and its size in KiB (with the WAL, if any)."""
    with tempfile.TemporaryDirectory(prefix="tiermem-append-") as directory:
        path = Path(directory) / "appends.db"

        def size() -> float:
            return sum(file.stat().st_size for file in path.parent.iterdir()) / 1024

        yield f"sqlite:///{path}", size


@contextmanager
def _postgres_database() -> Iterator[tuple[str, Callable[[], float]]]:
    """A fresh PostgreSQL schema: its URL, and its tables' size in KiB (indexes and
    TOAST included); dropped afterwards."""
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL)
    size_sql = text(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "WHERE c.relnamespace = CAST(:schema AS regnamespace) AND c.relkind = 'r'"
    )

    def size() -> float:
        with admin.connect() as conn:
            return float(conn.execute(size_sql, {"schema": schema}).scalar_one()) / 1024

    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}", size
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


def plain_appends(texts: list[str], repeat: int, backend: str) -> dict[str, dict[str, float]]:
    """``add_message`` of every text into one session, feed on and off: seconds (wall
    and CPU), KiB."""
    database = _postgres_database if backend == "postgres" else _sqlite_database
    runs: dict[str, list[tuple[float, float, float]]] = {"feed on": [], "feed off": []}
    for index in range(repeat):
        order = [True, False] if index % 2 == 0 else [False, True]
        for feed in order:
            with database() as (url, size):
                seconds, cpu = _appends(url, feed, texts)
                runs["feed on" if feed else "feed off"].append((seconds, cpu, size()))
    return {
        name: {
            "seconds": statistics.median(s for s, _, _ in values),
            "cpu_seconds": statistics.median(c for _, c, _ in values),
            "kib": statistics.median(k for _, _, k in values),
        }
        for name, values in runs.items()
    }


def _median_of(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    return {
        name: {key: statistics.median(run[name][key] for run in runs) for key in runs[0][name]}
        for name in runs[0]
    }


def _table(title: str, rows: dict[str, dict[str, float]], ratio: Callable[[str], str]) -> None:
    print(f"\n{title}")
    print(f"  {'contender':<34} {'p50 us':>9} {'p95 us':>9} {'CPU p50':>9}  p50 / {BASELINE}")
    for name, row in rows.items():
        print(
            f"  {name:<34} {row['p50_us']:>9.0f} {row['p95_us']:>9.0f} "
            f"{row['cpu_p50_us']:>9.0f}  {ratio(name)}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run both phases, print the figures, write the JSON; 0 unless a contender failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", default="1000,5000", help="conversation lengths")
    parser.add_argument("--repeat", type=int, default=3, help="runs per length (median)")
    parser.add_argument("--appends", type=int, default=2000, help="plain appends, feed phase")
    parser.add_argument("--backends", default="sqlite", help="sqlite or sqlite,postgres")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    lengths = [int(part) for part in args.turns.split(",") if part.strip()]
    postgres = "postgres" in args.backends.split(",")
    report: dict[str, Any] = {"load_average": [round(os.getloadavg()[0], 2)], "turns": {}}
    for turns in lengths:
        corpus = make_corpus(turns, args.seed)
        rows: dict[str, dict[str, float]] = {}
        for names in passes(postgres):
            runs = [play(corpus, names, args.seed + run) for run in range(args.repeat)]
            found = _median_of(runs)
            if POSTGRES in found:  # its ratio is to the middleware of its own pass
                found[POSTGRES]["baseline_p50_us"] = found[BASELINE]["p50_us"]
                found[POSTGRES]["baseline_cpu_p50_us"] = found[BASELINE]["cpu_p50_us"]
                del found[BASELINE]
            rows.update(found)
        report["turns"][turns] = rows

        def ratio(name: str, rows: dict[str, dict[str, float]] = rows) -> str:
            row = rows[name]
            base = row.get("baseline_p50_us", rows[BASELINE]["p50_us"])
            cpu = row["cpu_p50_us"] / row.get("baseline_cpu_p50_us", rows[BASELINE]["cpu_p50_us"])
            return f"{row['p50_us'] / base:.2f}x (CPU {cpu:.2f}x)"

        _table(f"{turns:,} turns, last 10 % (median of {args.repeat} runs)", rows, ratio)
        feed_cost = rows[NO_RECALL]["p50_us"] / rows[NO_FEED]["p50_us"]
        recall_cost = rows["tiermem"]["p50_us"] - rows[NO_RECALL]["p50_us"]
        print(f"  feed on / feed off (turn p50, no recall): {feed_cost:.2f}x")
        print(f"  recall's cost (turn p50): {recall_cost / 1000:.2f} ms")
    texts = [turn.human for turn in make_corpus(args.appends, args.seed + 1)]
    for backend in ["sqlite", "postgres"] if postgres else ["sqlite"]:
        appends = plain_appends(texts, args.repeat, backend)
        report["appends" if backend == "sqlite" else "appends_postgres"] = appends
        on, off = appends["feed on"], appends["feed off"]
        print(f"\n{args.appends:,} plain appends (median of {args.repeat} runs, {backend})")
        for name, row in appends.items():
            print(
                f"  {name:<9} {row['seconds']:6.2f} s  CPU {row['cpu_seconds']:6.2f} s  "
                f"{row['kib']:8.0f} KiB"
            )
        print(
            f"  feed on / feed off: time {on['seconds'] / off['seconds']:.2f}x "
            f"(CPU {on['cpu_seconds'] / off['cpu_seconds']:.2f}x), "
            f"size {on['kib'] / off['kib']:.2f}x (target <= {FEED_LIMIT:.2f}x)"
        )
    report["load_average"].append(round(os.getloadavg()[0], 2))
    print(f"load average (1 min) before/after: {report['load_average']}")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    path = args.results_dir / "turn_bench.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
