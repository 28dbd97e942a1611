"""LangGraph stores side by side: tiermem-langgraph's ``TieredStore`` against
LangGraph's ``SqliteStore`` (``langgraph-checkpoint-sqlite``) and ``PostgresStore``
(``langgraph-checkpoint-postgres``), each on its own fresh database.

Every store is loaded through its own ``batch`` (``PutOp`` batches of 1,000) with
``--items`` items spread over ``--namespaces`` namespaces ``("tenant", "n<i>")``,
values ``{"kind", "score", "text"}``. Then it times, one call at a time:

* ``put`` of a new item (p50) and ``get`` of a random item (p50);
* ``search`` of one namespace with a filter (``kind`` equal and ``score`` greater
  than), p95;
* ``search`` with the same filter and a keyword query, p95 (``TieredStore`` only:
  LangGraph's stores have no keyword search without an embedder).

Targets (issue 18): put p50 < 1 ms and get p50 < 0.5 ms on SQLite; filter and query
search p95 < 20 ms at 1,000,000 items over 10,000 namespaces (``--full``).

Usage::

    .venv/bin/python benchmarks/langgraph_store.py                  # 20,000 items, both
    .venv/bin/python benchmarks/langgraph_store.py --backend sqlite --items 100000
    .venv/bin/python benchmarks/langgraph_store.py --full           # 1,000,000 items

Needs the ``benchmark`` dependency group of ``integrations/langgraph``. Results go to
``benchmarks/results/langgraph_store.json`` (git-ignored).
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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langgraph.store.base import BaseStore, PutOp
from tiermem_langgraph import TieredStore

PG_URL = os.environ.get(
    "TIERMEM_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
RESULTS = Path(__file__).parent / "results" / "langgraph_store.json"
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
KINDS = ("note", "fact", "task", "event")
BATCH = 1_000


def _value(rng: random.Random, i: int) -> dict[str, Any]:
    text = " ".join(rng.choice(WORDS) for _ in range(8)) + f" item{i}"
    # A random kind: with ``i % 4`` every item of a namespace would share one kind
    # whenever the namespace count is a multiple of 4, and the filter would pass all or none.
    return {"kind": rng.choice(KINDS), "score": rng.randrange(100), "text": text}


def _load(store: BaseStore, items: int, namespaces: int, seed: int) -> float:
    rng = random.Random(seed)
    started = time.perf_counter()
    for first in range(0, items, BATCH):
        store.batch(
            [
                PutOp(("tenant", f"n{i % namespaces}"), f"k{i}", _value(rng, i))
                for i in range(first, min(first + BATCH, items))
            ]
        )
    return time.perf_counter() - started


def _timed(samples: int, call: Callable[[int], object]) -> list[float]:
    times = []
    for i in range(samples):
        started = time.perf_counter()
        call(i)
        times.append((time.perf_counter() - started) * 1000)
    return times


def _p(times: list[float], q: float) -> float:
    return statistics.quantiles(times, n=100, method="inclusive")[int(q) - 1]


def measure(
    name: str, store: BaseStore, items: int, namespaces: int, samples: int, keyword: bool
) -> dict[str, Any]:
    """Load ``store`` and time its put, get and searches."""
    load_s = _load(store, items, namespaces, seed=1)
    rng = random.Random(2)
    flt = {"kind": "fact", "score": {"$gt": 50}}
    row: dict[str, Any] = {"store": name, "items": items, "namespaces": namespaces}
    row["load_s"] = round(load_s, 2)
    row["put_p50_ms"] = _p(
        _timed(samples, lambda i: store.put(("tenant", "new"), f"p{i}", _value(rng, i))), 50
    )
    row["get_p50_ms"] = _p(
        _timed(
            samples,
            lambda _: store.get(
                ("tenant", f"n{(k := rng.randrange(items)) % namespaces}"), f"k{k}"
            ),
        ),
        50,
    )
    row["filter_search_p95_ms"] = _p(
        _timed(
            samples,
            lambda _: store.search(
                ("tenant", f"n{rng.randrange(namespaces)}"), filter=flt, limit=10
            ),
        ),
        95,
    )
    if keyword:
        row["filter_query_search_p95_ms"] = _p(
            _timed(
                samples,
                lambda _: store.search(
                    ("tenant", f"n{rng.randrange(namespaces)}"),
                    query=f"{rng.choice(WORDS)} {rng.choice(WORDS)}",
                    filter=flt,
                    limit=10,
                ),
            ),
            95,
        )
    return row


@contextmanager
def _pg_schema() -> Iterator[str]:
    """A fresh PostgreSQL schema, dropped afterwards."""
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield schema
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.dispose()


def run_backend(
    backend: str, items: int, namespaces: int, samples: int, stores: str = "both"
) -> list[dict[str, Any]]:
    """The stores of one backend (``stores``: ``both``, ``tiered`` or ``langgraph``)."""
    rows = []
    with ExitStack() as stack:
        if backend == "sqlite":
            from langgraph.store.sqlite import SqliteStore

            folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            tiered = stack.enter_context(TieredStore.from_url(f"sqlite:///{folder / 't.db'}"))
            lite = stack.enter_context(SqliteStore.from_conn_string(str(folder / "lg.db")))
            lite.setup()
            theirs: BaseStore = lite
            names = ("TieredStore (SQLite)", "SqliteStore")
        else:
            from langgraph.store.postgres import PostgresStore

            mine, other = stack.enter_context(_pg_schema()), stack.enter_context(_pg_schema())
            tiered = stack.enter_context(
                TieredStore.from_url(f"{PG_URL}?options=-csearch_path%3D{mine}")
            )
            plain = PG_URL.replace("postgresql+psycopg://", "postgresql://")
            pg = stack.enter_context(
                PostgresStore.from_conn_string(f"{plain}?options=-csearch_path%3D{other}")
            )
            pg.setup()
            theirs = pg
            names = ("TieredStore (PostgreSQL)", "PostgresStore")
        if stores in ("both", "tiered"):
            rows.append(measure(names[0], tiered, items, namespaces, samples, keyword=True))
        if stores in ("both", "langgraph"):
            rows.append(measure(names[1], theirs, items, namespaces, samples, keyword=False))
    return rows


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--namespaces", type=int, default=200)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--stores", choices=["both", "tiered", "langgraph"], default="both")
    parser.add_argument("--full", action="store_true", help="1,000,000 items, 10,000 namespaces")
    args = parser.parse_args(argv)
    if args.full:
        args.items, args.namespaces = 1_000_000, 10_000
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    rows = [
        row
        for backend in backends
        for row in run_backend(backend, args.items, args.namespaces, args.samples, args.stores)
    ]
    columns = [
        "store",
        "items",
        "load_s",
        "put_p50_ms",
        "get_p50_ms",
        "filter_search_p95_ms",
        "filter_query_search_p95_ms",
    ]
    print(" | ".join(columns))
    for row in rows:
        print(
            " | ".join(
                f"{row[c]:.3f}" if isinstance(row.get(c), float) else str(row.get(c, "-"))
                for c in columns
            )
        )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"python": sys.version, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
