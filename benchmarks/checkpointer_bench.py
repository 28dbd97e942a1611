"""LangGraph checkpointers side by side: tiermem-langgraph's ``TieredSaver`` against
LangGraph's ``SqliteSaver`` (``langgraph-checkpoint-sqlite``) and ``PostgresSaver``
(``langgraph-checkpoint-postgres``), each on its own fresh database.

Each runs the same conversation through ``create_agent`` (a scripted model, no
tools): ``--turns`` turns of a ``--chars``-character question and a
``--chars``-character answer on one thread. It reports:

* the size of everything the saver stores (SQLite: the file and its WAL after a
  checkpoint of the WAL; PostgreSQL: every table of the saver's schema with its
  indexes and TOAST), at each size in ``--marks`` (linear or quadratic growth);
* the time of a turn (``invoke``), mean over all turns and over the last 50;
* ``get_state`` of the thread at the end (median of 100 reads);
* for ``TieredSaver``: ``prune(keep_latest)`` on the thread (the share of its
  checkpoint rows removed), and that every message is still found by ``search``
  and returned by ``export_session`` afterwards;
* copies: ``TieredMemoryMiddleware`` on ``TieredSaver`` (SQLite), ``--copy-turns``
  tool-calling turns (one or two calls, then an answer), compressing as the
  middleware asks: how many times each message's text is stored, counted over the
  entries (text column and message JSON), checkpoints, values and pending writes
  (search indexes aside). Its summarizer writes summaries that quote no message
  whole (``FakeSummarizer(digest_words=3)``): the summary message the middleware puts
  in the state is stored with the checkpoints' lists, and the default extractive
  summarizer quotes short messages whole, so the count would measure the summaries'
  text rather than copies of the messages.

Targets (issue 32): at 400 turns of 500-character messages, at least 100 times
smaller than ``SqliteSaver`` and 20 times smaller than ``PostgresSaver``, growing
linearly, with no more time per turn and no slower ``get_state``; the prune removes
at least 95 % of the checkpoint rows and keeps every message; with the middleware on
``TieredSaver``, 200 tool-calling turns store each message's text at most 1.2 times
on average.

Usage::

    .venv/bin/python benchmarks/checkpointer_bench.py                # 400 turns, both
    .venv/bin/python benchmarks/checkpointer_bench.py --backend sqlite --turns 100

Needs the ``benchmark`` dependency group of ``integrations/langgraph`` and
``tiermem-agents`` (its scripted model). Results go to
``benchmarks/results/checkpointer.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import corpus
import sqlalchemy as sa
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from tiermem_agents import TieredMemoryMiddleware
from tiermem_agents.testing import ToolCallingFakeModel, lookup, lookup_conversation
from tiermem_langgraph import TieredSaver

from tiermem import ConversationMemory, MemoryConfig
from tiermem.testing import FakeSummarizer, stored_copies

PG_URL = os.environ.get(
    "TIERMEM_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
RESULTS = Path(__file__).parent / "results" / "checkpointer.json"
THREAD = "bench"
CONFIG: RunnableConfig = {"configurable": {"thread_id": THREAD}}
#: The words of the messages: the side-by-side benchmark's English word list.
WORDS: list[str] = corpus._WORDS  # noqa: SLF001


def text(rng: random.Random, marker: str, chars: int) -> str:
    """``chars`` characters: ``marker`` (a word no other message has), then words."""
    out = marker
    while len(out) < chars:
        out += " " + rng.choice(WORDS)
    return out[:chars]


#: Reads of the thread's state timed at the end.
GET_STATE_READS = 100
#: Turns per window of the median turn by window: how a turn's cost grows with the
#: thread (a short thread's turn, a long one's).
WINDOW = 50


@dataclass
class Result:
    """One saver's figures."""

    saver: str
    backend: str
    turns: int
    sizes: dict[int, int] = field(default_factory=dict)
    turn_ms_mean: float = 0.0
    turn_ms_last50: float = 0.0
    get_state_ms: float = 0.0
    #: The median turn of each window of :data:`WINDOW` turns, by its first turn.
    turn_ms_windows: dict[int, float] = field(default_factory=dict)
    prune: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, int] = field(default_factory=dict)


@contextmanager
def _pg_schema() -> Iterator[str]:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        yield schema
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    finally:
        admin.dispose()


def _pg_size(schema: str) -> int:
    engine = sa.create_engine(PG_URL)
    try:
        with engine.connect() as conn:
            query = (
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = :schema AND c.relkind IN ('r', 'm')"
            )
            return int(conn.execute(sa.text(query), {"schema": schema}).scalar_one())
    finally:
        engine.dispose()


def _pg_tables(schema: str) -> dict[str, int]:
    """Each table's size (with its indexes and TOAST)."""
    engine = sa.create_engine(PG_URL)
    try:
        with engine.connect() as conn:
            query = (
                "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = :schema AND c.relkind = 'r' ORDER BY 2 DESC"
            )
            return {str(k): int(v) for k, v in conn.execute(sa.text(query), {"schema": schema})}
    finally:
        engine.dispose()


def _sqlite_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def conversation(args: argparse.Namespace) -> tuple[list[str], list[AIMessage]]:
    """The questions and the scripted answers, each with a marker of its own."""
    rng = random.Random(args.seed)
    questions = [text(rng, f"question{n:04d}", args.chars) for n in range(args.turns)]
    answers = [
        AIMessage(text(rng, f"answer{n:04d}", args.chars), id=f"a{n}") for n in range(args.turns)
    ]
    return questions, answers


def run(
    name: str,
    backend: str,
    saver: BaseCheckpointSaver[Any],
    size: Callable[[], int],
    args: argparse.Namespace,
) -> Result:
    """The conversation on ``saver``, with its figures."""
    questions, answers = conversation(args)
    agent = create_agent(ToolCallingFakeModel(messages=iter(answers)), [], checkpointer=saver)
    result = Result(name, backend, args.turns)
    marks = {int(mark) for mark in args.marks.split(",")} | {args.turns}
    times: list[float] = []
    for turn, question in enumerate(questions, start=1):
        started = time.perf_counter()
        agent.invoke({"messages": [HumanMessage(question, id=f"q{turn}")]}, CONFIG)
        times.append(time.perf_counter() - started)
        if turn in marks:
            result.sizes[turn] = size()
    result.turn_ms_mean = 1000 * statistics.mean(times)
    result.turn_ms_last50 = 1000 * statistics.mean(times[-50:])
    result.turn_ms_windows = {
        start: 1000 * statistics.median(times[start : start + WINDOW])
        for start in range(0, len(times), WINDOW)
    }
    # The run's garbage is collected first, so that neither saver's reads pay for a
    # full collection of the other's turns; each read is timed, and the median taken:
    # one full collection (the process holds about 800,000 objects at 400 turns,
    # most of them the scripted model's copies of the conversation) costs as much
    # as forty reads, and falls on one saver or the other by chance.
    gc.collect()
    reads: list[float] = []
    for _ in range(GET_STATE_READS):
        started = time.perf_counter()
        state = agent.get_state(CONFIG)
        reads.append(time.perf_counter() - started)
    result.get_state_ms = 1000 * statistics.median(reads)
    assert len(state.values["messages"]) == 2 * args.turns
    return result


def prune(saver: TieredSaver, args: argparse.Namespace) -> dict[str, Any]:
    """Prune the thread to its newest checkpoint; check every message stayed."""
    before = sum(1 for _ in saver.list(CONFIG))
    started = time.perf_counter()
    saver.prune([THREAD], strategy="keep_latest")
    seconds = time.perf_counter() - started
    after = sum(1 for _ in saver.list(CONFIG))
    memory = saver.memory
    exported = {e.message["data"]["content"] for e in memory.export_session(THREAD).entries}
    questions, answers = conversation(args)
    texts = [*questions, *(str(answer.content) for answer in answers)]
    found = 0
    for message in texts:
        hits = memory.search(message.split()[0], session_id=THREAD, limit=1)
        found += bool(hits) and hits[0].entry.content == message
    return {
        "checkpoints_before": before,
        "checkpoints_after": after,
        "removed_share": (before - after) / before,
        "seconds": seconds,
        "messages": len(texts),
        "exported": sum(message in exported for message in texts),
        "found_by_search": found,
    }


def copies(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """The middleware on the saver: how many times each message's text is stored."""
    # As the middleware's README advises: the middleware decides when to compress.
    config = MemoryConfig(max_tokens=2_000, auto_compress=False)
    url = f"sqlite:///{tmp / 'copies.db'}"
    summarizer = FakeSummarizer(digest_words=3, record_calls=False)  # see the docstring
    with TieredSaver.from_url(url, project="bench", config=config, summarizer=summarizer) as saver:
        memory = saver.memory
        middleware = TieredMemoryMiddleware(memory, trigger=("messages", 12), keep=("messages", 4))
        conversation = lookup_conversation(args.copy_turns)
        model = ToolCallingFakeModel(messages=conversation.script)
        agent = create_agent(model, [lookup], middleware=[middleware], checkpointer=saver)
        for question in conversation.questions:
            agent.invoke({"messages": [HumanMessage(question)]}, CONFIG)
        texts = conversation.texts
        copies_per_message = stored_copies(memory, texts)
        compressed = memory.get_stats(THREAD).compressed_entries
    return {
        "turns": args.copy_turns,
        "messages": len(texts),
        "copies_per_message": copies_per_message,
        "compressed_entries": compressed,
    }


def bench_sqlite(args: argparse.Namespace, tmp: Path) -> list[Result]:
    """SqliteSaver and TieredSaver on SQLite files."""
    path = tmp / "sqlite_saver.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        theirs = run("SqliteSaver", "sqlite", SqliteSaver(conn), lambda: _sqlite_size(path), args)
    finally:
        conn.close()
    ours_path = tmp / "tiered_saver.db"
    with TieredSaver.from_url(f"sqlite:///{ours_path}", project="bench") as saver:
        ours = run("TieredSaver", "sqlite", saver, lambda: _sqlite_size(ours_path), args)
        ours.prune = prune(saver, args)
    return [theirs, ours]


def bench_postgres(args: argparse.Namespace) -> list[Result]:
    """PostgresSaver and TieredSaver, each in a fresh schema."""
    results = []
    with _pg_schema() as schema:
        url = PG_URL.replace("postgresql+psycopg://", "postgresql://")
        with PostgresSaver.from_conn_string(f"{url}?options=-csearch_path%3D{schema}") as saver:
            saver.setup()
            results.append(run("PostgresSaver", "postgres", saver, lambda: _pg_size(schema), args))
            results[-1].tables = _pg_tables(schema)
    with _pg_schema() as schema:
        memory = ConversationMemory(f"{PG_URL}?options=-csearch_path%3D{schema}", project="bench")
        try:
            ours = TieredSaver(memory)
            results.append(run("TieredSaver", "postgres", ours, lambda: _pg_size(schema), args))
            results[-1].tables = _pg_tables(schema)
            results[-1].prune = prune(ours, args)
        finally:
            memory.close()
    return results


def report_copies(figures: dict[str, Any]) -> None:
    """One line: the copies of each message's text."""
    print(
        f"copies: {figures['turns']} tool-calling turns of TieredMemoryMiddleware on "
        f"TieredSaver (SQLite): each of {figures['messages']} messages' text stored "
        f"{figures['copies_per_message']:.2f} times on average "
        f"({figures['compressed_entries']} entries compressed)"
    )


def report(results: list[Result]) -> None:
    """One line per saver, then the ratios of each backend."""
    for r in results:
        sizes = ", ".join(
            f"{turns}: {size / 1e6:.2f} MB" for turns, size in sorted(r.sizes.items())
        )
        print(
            f"{r.backend:8} {r.saver:13} {sizes}; turn {r.turn_ms_mean:.1f} ms "
            f"(last 50: {r.turn_ms_last50:.1f} ms); get_state {r.get_state_ms:.1f} ms"
        )
        windows = ", ".join(
            f"{start}-{min(start + WINDOW, r.turns)}: {ms:.1f}"
            for start, ms in sorted(r.turn_ms_windows.items())
        )
        print(f"{'':8} median turn (ms) by {WINDOW} turns: {windows}")
        if r.tables:
            tables = ", ".join(f"{name} {size / 1e6:.2f}" for name, size in r.tables.items())
            print(f"{'':8} tables (MB): {tables}")
        if r.prune:
            p = r.prune
            print(
                f"{'':8} prune(keep_latest): {p['checkpoints_before']} -> "
                f"{p['checkpoints_after']} checkpoints ({100 * p['removed_share']:.1f} % removed, "
                f"{p['seconds']:.2f} s); of {p['messages']} messages, {p['exported']} "
                f"exported and {p['found_by_search']} found by search"
            )
    for backend in sorted({r.backend for r in results}):
        theirs, ours = (r for r in results if r.backend == backend)
        last = max(ours.sizes)
        print(
            f"{backend}: TieredSaver is {theirs.sizes[last] / ours.sizes[last]:.0f} times "
            f"smaller than {theirs.saver} at {last} turns; time per turn "
            f"{ours.turn_ms_mean / theirs.turn_ms_mean:.2f}x, get_state "
            f"{ours.get_state_ms / theirs.get_state_ms:.2f}x"
        )


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--chars", type=int, default=500)
    parser.add_argument("--marks", default="100,200", help="turn counts to measure sizes at")
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--copy-turns", type=int, default=200, help="turns of the copies phase (0: none)"
    )
    args = parser.parse_args(argv)
    results: list[Result] = []
    copied: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.backend in ("sqlite", "both"):
            results += bench_sqlite(args, Path(tmp))
        if args.copy_turns:
            copied = copies(args, Path(tmp))
    if args.backend in ("postgres", "both"):
        results += bench_postgres(args)
    report(results)
    if copied:
        report_copies(copied)
    RESULTS.parent.mkdir(exist_ok=True)
    document = {"python": sys.version, "load": os.getloadavg(), "args": vars(args)}
    rows = [asdict(r) for r in results]
    RESULTS.write_text(json.dumps({**document, "rows": rows, "copies": copied}, indent=2))


if __name__ == "__main__":
    main()
