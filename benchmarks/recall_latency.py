"""Recall latency: what recall adds to a read, in a project of many long sessions.

The target: recall adds at most 20 ms at p95 to a read on SQLite and 30 ms on
PostgreSQL, with 10,000 sessions of 200 turns in one project; a read without recall
costs what it did.

Each backend gets one project of ``--sessions`` sessions of ``--turns`` turns (a
human and an AI message per turn: the seeded corpus of ``corpus.py``, each session a
different draw of its turns, with ``--facts`` facts of its own told in passing by the
human in its older turns: a relative's move, a pet's breed, a car's price, ...). A
session is stored as fast as the public API allows: all but its last
``--recent-turns`` turns in one ``add_messages`` call, whose automatic compression
(``MemoryConfig(max_tokens=2000)``, the heuristic summary, no model) folds them into
summaries, then the last turns in a second call, which stay in view (a session too
short to compress by itself gets one ``compress(session_id, force=True)``). On
PostgreSQL the tables are then analyzed.

Then ``--reads`` reads, each of a random session and one of its facts, after
``--warmup`` reads that are not counted: ``get_messages(session_id, query=question)``
(recall) and ``get_messages(session_id, query="")`` (no recall) of the same session,
in alternating order. Each is timed in wall time and in the thread's CPU time (user
and system, no waiting: the steadier figure on a loaded machine; on PostgreSQL it
leaves out the server's work, whose processes' CPU time is read from ``/proc``
before and after each read and reported as a mean per read). Reported per backend:
p50 and p95 of each kind of read, what recall adds (the difference of the p50s and
of the p95s, and the p95 of the per-read differences), and the share of reads whose
recalled block held the fact's answer.

Prints the table and writes ``<results-dir>/recall_latency.json``::

    .venv/bin/python benchmarks/recall_latency.py                  # 10,000 x 200, SQLite
    .venv/bin/python benchmarks/recall_latency.py --sessions 1000 --backends sqlite,postgres
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from corpus import Turn, make_corpus
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from sqlalchemy import create_engine, text
from tiermem_contender import POSTGRES_URL

from tiermem import RECALL_MARKER, ConversationMemory, MemoryConfig

RESULTS_DIR = Path(__file__).parent / "results"
MAX_TOKENS = 2000
#: What recall may add to a read's p95, in ms, per backend.
TARGET_MS = {"sqlite": 20.0, "postgresql": 30.0}
#: Distinct turns drawn from; sessions are different draws (and orders) of them.
POOL_TURNS = 2000

_NAMES = (
    "Marguerite Anselm Ottoline Baptiste Ingrid Casimir Rosalind Thaddeus Philippa "
    "Leopold Imogen Florian Henrietta Ambrose Genevieve Lysander Cordelia Evander "
    "Wilhelmina Peregrine Seraphina Augustin Clementine Barnaby Octavia Fitzgerald "
    "Isadora Montgomery Beatrix Cornelius Anastasia Valentin Esmeralda Maximilian"
).split()
_RELATIVES = "sister brother cousin aunt uncle niece nephew grandmother".split()
_CITIES = (
    "Tallinn Ljubljana Valparaiso Trondheim Bratislava Montevideo Adelaide Winnipeg "
    "Marrakesh Salzburg Cartagena Gdansk Tbilisi Halifax Bergamo Nagasaki Coimbra "
    "Tromso Antwerp Oaxaca Dunedin Plovdiv Krakow Quebec Heraklion Bordeaux"
).split()
_BREEDS = (
    "dachshund weimaraner schnauzer vizsla basenji samoyed whippet dalmatian "
    "newfoundland keeshond borzoi papillon leonberger"
).split()
_PETS = "Biscuit Pickles Waffles Noodle Pepperoni Marzipan Truffle Gizmo Sprocket".split()
_COLOURS = "turquoise burgundy charcoal mustard lavender bronze crimson olive".split()
_CARS = "hatchback convertible minivan pickup roadster stationwagon coupe".split()
_SPORTS = "badminton pickleball squash volleyball bouldering fencing croquet curling".split()
_PARKS = "Riverside Greenwood Lakeshore Hillcrest Maplewood Briarcliff Fairmont".split()
_JOBS = (
    "cartographer pharmacist archivist sommelier hydrologist upholsterer "
    "luthier actuary glassblower typesetter"
).split()
_COMPANIES = "Veltrano Quillmark Ostrava Brightwell Kestrel Halvorsen Zephyrine".split()
_HOTELS = "Ambassador Belvedere Excelsior Metropole Bellevue Savoyard Continental".split()
_MONTHS = (
    "January February March April May June July August September October November December"
).split()


@dataclass(frozen=True, slots=True)
class Fact:
    """Something a session's human said once: the sentence, a question about it and
    the words of the answer the recalled block must hold."""

    said: str
    question: str
    answer: str


def _fact(kind: int, rng: random.Random) -> Fact:
    """A fact of ``kind`` (0-7) with its slots drawn from ``rng``."""
    name, other = rng.sample(_NAMES, 2)
    city, month = rng.choice(_CITIES), rng.choice(_MONTHS)
    if kind == 0:
        relative = rng.choice(_RELATIVES)
        return Fact(
            f"By the way, my {relative} {name} moved to {city} last {month} for a new job.",
            f"Where did my {relative} {name} move to?",
            city,
        )
    if kind == 1:
        breed, pet = rng.choice(_BREEDS), rng.choice(_PETS)
        return Fact(
            f"We adopted a {breed} puppy and named her {pet}, she is {rng.randint(2, 11)} "
            "months old.",
            f"What breed is our puppy {pet}?",
            breed,
        )
    if kind == 2:
        colour, car, price = rng.choice(_COLOURS), rng.choice(_CARS), rng.randint(8, 60) * 500
        return Fact(
            f"I finally bought the {colour} {car}, it cost {price} dollars after the trade-in.",
            f"How much did the {colour} {car} cost me?",
            str(price),
        )
    if kind == 3:
        day = rng.randint(1, 28)
        return Fact(
            f"{name} and {other} set their wedding date for {month} {day} at the old chapel.",
            f"When is the wedding of {name} and {other}?",
            f"{month} {day}",
        )
    if kind == 4:
        job, company = rng.choice(_JOBS), rng.choice(_COMPANIES)
        return Fact(
            f"I start my new job as a {job} at {company} next month.",
            f"What is my new job at {company}?",
            job,
        )
    if kind == 5:
        sport, park = rng.choice(_SPORTS), rng.choice(_PARKS)
        return Fact(
            f"On Saturdays I play {sport} with my friend {name} at {park} park.",
            f"Who do I play {sport} with at {park}?",
            name,
        )
    if kind == 6:
        high, low = rng.randint(105, 165), rng.randint(65, 100)
        return Fact(
            f"The doctor measured my blood pressure at {high} over {low} on Tuesday.",
            "What was my blood pressure reading at the doctor?",
            f"{high} over {low}",
        )
    hotel, nights = rng.choice(_HOTELS), rng.randint(2, 9)
    return Fact(
        f"We booked {nights} nights in {city} at the {hotel} hotel near the harbour.",
        f"Which hotel did we book in {city}?",
        hotel,
    )


#: The kinds of fact a session can hold (one of each at most).
FACT_KINDS = 8


@dataclass(frozen=True, slots=True)
class Session:
    """One session to store: its messages and the facts told in its older turns."""

    session_id: str
    messages: list[BaseMessage]
    facts: list[Fact]


def make_session(index: int, pool: Sequence[Turn], turns: int, facts: int, recent: int) -> Session:
    """Session ``index``: ``turns`` turns drawn from ``pool`` and ``facts`` facts in
    human turns before the last ``recent`` (which stay in view)."""
    rng = random.Random(index)
    chosen = [pool[rng.randrange(len(pool))] for _ in range(turns)]
    older = max(turns - recent, 0)
    told = [_fact(kind, rng) for kind in rng.sample(range(FACT_KINDS), min(facts, FACT_KINDS))]
    told = told[:older]
    where = dict(zip(rng.sample(range(older), len(told)), told, strict=True))
    messages: list[BaseMessage] = []
    for number, turn in enumerate(chosen):
        fact = where.get(number)
        human = turn.human if fact is None else f"{fact.said} {turn.human}"
        messages += [HumanMessage(human), AIMessage(turn.ai)]
    return Session(f"session-{index:05d}", messages, told)


def build(
    memory: ConversationMemory, count: int, turns: int, facts: int, recent: int, seed: int
) -> dict[str, list[Fact]]:
    """Store ``count`` sessions; their facts by session id."""
    pool = make_corpus(min(POOL_TURNS, max(turns, 1) * 10), seed)
    stored: dict[str, list[Fact]] = {}
    started, step = time.perf_counter(), max(count // 10, 1)
    for index in range(count):
        if index and index % step == 0:
            elapsed = time.perf_counter() - started
            print(f"  {index:,} sessions stored in {elapsed:.0f} s", flush=True)
        session = make_session(index, pool, turns, facts, recent)
        cut = 2 * max(turns - recent, 1)
        memory.add_messages(session.session_id, session.messages[:cut])
        if not memory.get_summaries(session.session_id):
            # Too short to compress by itself: everything stored so far goes out of view.
            memory.compress(session.session_id, force=True, keep=0)
        if session.messages[cut:]:
            memory.add_messages(session.session_id, session.messages[cut:])
        stored[session.session_id] = session.facts
    return stored


@contextmanager
def open_store(backend: str, url: str | None, pg_url: str) -> Iterator[ConversationMemory]:
    """A memory on an empty project of ``backend`` that is removed afterwards: a
    temporary SQLite file, a fresh schema on the PostgreSQL server ``pg_url``, or a
    fresh project at ``url``."""
    config = MemoryConfig(max_tokens=MAX_TOKENS)
    if url is not None:
        memory = ConversationMemory(url, project=f"recall-{uuid.uuid4().hex[:12]}", config=config)
        try:
            yield memory
        finally:
            try:
                for info in memory.list_sessions():
                    memory.clear_session(info.session_id)
                memory.feed.prune(timedelta(0))  # the project's change events too
            finally:
                memory.close()
    elif backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="tiermem-recall-latency-") as folder:
            memory = ConversationMemory(f"sqlite:///{Path(folder) / 'recall.db'}", config=config)
            try:
                yield memory
            finally:
                memory.close()
    else:
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        admin = create_engine(pg_url)
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        # The application name marks the memory's connections, whose server processes'
        # CPU time is counted (other clients may be using the server meanwhile).
        options = {"options": f"-csearch_path={schema}", "application_name": schema}
        engine = create_engine(pg_url, connect_args=options)
        try:
            memory = ConversationMemory(engine=engine, config=config)
            try:
                yield memory
            finally:
                memory.close()
        finally:
            engine.dispose()
            with admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            admin.dispose()


def analyze(memory: ConversationMemory) -> None:
    """``ANALYZE`` the tables of the memory's schema (PostgreSQL), as after a bulk load."""
    with memory.engine.connect() as conn:
        tables = conn.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        ).scalars()
        names = list(tables)
    with memory.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for name in names:
            conn.execute(text(f'ANALYZE "{name}"'))


_TICK = os.sysconf("SC_CLK_TCK")


def server_processes(memory: ConversationMemory) -> set[int]:
    """The PostgreSQL server processes of the memory's connections, found by their
    application name (none on SQLite, and none for connections without a name of
    their own: ``--url``)."""
    if memory.engine.dialect.name != "postgresql":
        return set()
    query = "SELECT pid FROM pg_stat_activity WHERE application_name = :name"
    with memory.engine.connect() as conn:
        name = conn.execute(text("SELECT current_setting('application_name')")).scalar()
        if not name or not str(name).startswith("bench_"):
            return set()
        return set(conn.execute(text(query), {"name": name}).scalars())


def server_cpu(pids: set[int]) -> float | None:
    """User plus system CPU seconds of the server processes ``pids``, ``None`` when
    they cannot be read (a server on another machine, or none)."""
    total = 0.0
    for pid in pids:
        try:
            # The command name (field 2) may hold spaces: count from its closing paren.
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += (int(stat[11]) + int(stat[12])) / _TICK
    return total if pids else None


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _timed(memory: ConversationMemory, session_id: str, query: str) -> tuple[Any, float, float]:
    """The context of one read, its wall time and its thread CPU time (ms)."""
    begin, begin_cpu = time.perf_counter(), time.thread_time()
    context = memory.get_messages(session_id, query=query)
    return context, (time.perf_counter() - begin) * 1e3, (time.thread_time() - begin_cpu) * 1e3


def _block(context: Sequence[BaseMessage]) -> str | None:
    """The recalled block's text, if the context has one."""
    for message in context:
        if RECALL_MARKER in message.additional_kwargs:
            return message.text
    return None


def read(
    memory: ConversationMemory, facts: dict[str, list[Fact]], reads: int, warmup: int, seed: int
) -> dict[str, Any]:
    """Time ``reads`` pairs of reads (recall and none, alternating which goes first)."""
    rng = random.Random(seed)
    askable = [session_id for session_id, told in facts.items() if told]
    wall: dict[str, list[float]] = {"recall": [], "plain": []}
    cpu: dict[str, list[float]] = {"recall": [], "plain": []}
    found = with_block = 0
    server: dict[str, float | None] = {"recall": 0.0, "plain": 0.0}
    pids: set[int] = set()
    for number in range(warmup + reads):
        if number == warmup:  # the pool holds every connection the reads use by now
            pids = server_processes(memory)
        session_id = rng.choice(askable)
        fact = rng.choice(facts[session_id])
        order = [("recall", fact.question), ("plain", "")]
        if number % 2:
            order.reverse()
        for kind, query in order:
            before = server_cpu(pids)
            context, ms, cpu_ms = _timed(memory, session_id, query)
            if number < warmup:
                continue
            after, spent = server_cpu(pids), server[kind]
            if before is None or after is None or spent is None:
                server[kind] = None
            else:
                server[kind] = spent + after - before
            wall[kind].append(ms)
            cpu[kind].append(cpu_ms)
            block = _block(context)
            if kind == "plain" and block is not None:
                raise AssertionError(f"a read with query='' recalled: {session_id}")
            if kind == "recall" and block is not None:
                with_block += 1
                found += fact.answer.lower() in block.lower()
    figures: dict[str, Any] = {}
    for kind in ("recall", "plain"):
        figures[kind] = {
            "p50_ms": _percentile(wall[kind], 0.50),
            "p95_ms": _percentile(wall[kind], 0.95),
            "cpu_p50_ms": _percentile(cpu[kind], 0.50),
            "cpu_p95_ms": _percentile(cpu[kind], 0.95),
        }
        spent = server[kind]
        # Counted in clock ticks (10 ms): only the mean over many reads is meaningful.
        figures[kind]["server_cpu_mean_ms"] = None if spent is None else spent / reads * 1e3
    if set(pids) != server_processes(memory):
        figures["recall"]["server_cpu_mean_ms"] = figures["plain"]["server_cpu_mean_ms"] = None
    recall, plain = figures["recall"], figures["plain"]
    figures["added"] = {
        key: recall[key] - plain[key] for key in ("p50_ms", "p95_ms", "cpu_p50_ms", "cpu_p95_ms")
    }
    if recall["server_cpu_mean_ms"] is not None and plain["server_cpu_mean_ms"] is not None:
        added = recall["server_cpu_mean_ms"] - plain["server_cpu_mean_ms"]
        figures["added"]["server_cpu_mean_ms"] = added
    figures["added"]["paired_p95_ms"] = _percentile(
        [a - b for a, b in zip(wall["recall"], wall["plain"], strict=True)], 0.95
    )
    figures["reads"] = reads
    figures["with_block_share"] = with_block / reads
    figures["found_share"] = found / reads
    return figures


def run_backend(backend: str, url: str | None, args: argparse.Namespace) -> dict[str, Any]:
    """Build the project on ``backend`` and time the reads; the backend's figures."""
    with open_store(backend, url, args.pg_url) as memory:
        memory.database.ensure_schema()
        started = time.perf_counter()
        facts = build(memory, args.sessions, args.turns, args.facts, args.recent_turns, args.seed)
        build_seconds = time.perf_counter() - started
        dialect = memory.engine.dialect.name
        if dialect == "postgresql":
            analyze(memory)
        figures = read(memory, facts, args.reads, args.warmup, args.seed + 1)
    figures["backend"] = dialect
    figures["build_seconds"] = build_seconds
    figures["target_ms"] = TARGET_MS.get(dialect)
    return figures


def _table(rows: dict[str, dict[str, Any]]) -> None:
    print(
        f"\n  {'backend':<11} {'read':<8} {'p50 ms':>8} {'p95 ms':>8} {'CPU p50':>8} "
        f"{'CPU p95':>8} {'server CPU mean':>16}"
    )
    for name, row in rows.items():
        for kind in ("recall", "plain", "added"):
            figures = row[kind]
            server = figures.get("server_cpu_mean_ms")
            print(
                f"  {name:<11} {kind:<8} {figures['p50_ms']:>8.2f} {figures['p95_ms']:>8.2f} "
                f"{figures['cpu_p50_ms']:>8.2f} {figures['cpu_p95_ms']:>8.2f} "
                f"{'' if server is None else f'{server:.2f}':>16}"
            )
    for name, row in rows.items():
        target, added = row["target_ms"], row["added"]["p95_ms"]
        verdict = "" if target is None else f" (target <= {target:.0f} ms: "
        verdict += "" if target is None else ("met)" if added <= target else "MISSED)")
        print(
            f"  {name}: recall adds {added:.2f} ms at p95{verdict}, paired p95 "
            f"{row['added']['paired_p95_ms']:.2f} ms; block in {row['with_block_share']:.0%} "
            f"of reads, holding the fact in {row['found_share']:.0%}; "
            f"built in {row['build_seconds']:.0f} s"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Build, read, print the figures and write the JSON; 0 unless a backend failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=10000, help="sessions in the project")
    parser.add_argument("--turns", type=int, default=200, help="turns per session")
    parser.add_argument("--reads", type=int, default=500, help="timed read pairs per backend")
    parser.add_argument("--warmup", type=int, default=10, help="read pairs not counted")
    parser.add_argument("--facts", type=int, default=4, help="facts per session (at most 8)")
    parser.add_argument("--recent-turns", type=int, default=5, help="turns left in view")
    parser.add_argument("--backends", default="sqlite", help="sqlite or sqlite,postgres")
    parser.add_argument("--url", default=None, help="store instead (a fresh project there)")
    parser.add_argument("--pg-url", default=POSTGRES_URL, help="PostgreSQL server (new schema)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    backends = [part.strip() for part in args.backends.split(",") if part.strip()]
    if args.url is not None:
        backends = [args.url.split(":", 1)[0].split("+", 1)[0]]
    report: dict[str, Any] = {
        "settings": {key: str(value) for key, value in vars(args).items()},
        "load_average": [round(os.getloadavg()[0], 2)],
        "backends": {},
    }
    for backend in backends:
        started = time.perf_counter()
        report["backends"][backend] = run_backend(backend, args.url, args)
        print(f"{backend}: {time.perf_counter() - started:.0f} s", flush=True)
    report["load_average"].append(round(os.getloadavg()[0], 2))
    print(f"\n{args.sessions:,} sessions x {args.turns} turns, {args.reads} read pairs")
    _table(report["backends"])
    print(f"load average (1 min) before/after: {report['load_average']}")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    path = args.results_dir / "recall_latency.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
