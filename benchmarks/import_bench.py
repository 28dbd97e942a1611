"""Import time against session size: validation and writing stay linear.

Builds an export the way tiermem's own compression shapes a long session (one
level-1 summary per ten entries, each ten merged into a level-2 summary, a
short active tail) without running a model, then times ``import_session``
(parse, validate, count, write) into a fresh store, and ``export_session``
of the result, at each size.

Usage::

    .venv/bin/python benchmarks/import_bench.py                        # both backends
    .venv/bin/python benchmarks/import_bench.py --backend sqlite --entries 4000,32000

Results go to ``benchmarks/results/import_bench.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage, message_to_dict

from tiermem import ConversationMemory, MemoryConfig, SessionState
from tiermem.testing import ManualClock

PG_URL = os.environ.get(
    "TIERMEM_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
#: Entries per level-1 summary, and level-1 summaries per merged one.
SPAN = 10
#: Entries left active at the end.
TAIL = 6


def make_export(entries: int) -> str:
    """The JSON export of a session of ``entries`` entries, compressed as tiermem
    compresses: one summary per ten entries, every ten of those merged."""
    compressed = (entries - TAIL) // SPAN * SPAN
    leaves = compressed // SPAN
    rows: list[dict[str, Any]] = []
    for index in range(entries):
        text = f"turn {index}: the harbour master logged ships, tides, cargo and weather today"
        message = HumanMessage(text) if index % 2 == 0 else AIMessage(text)
        rows.append(
            {
                "seq": index + 1,
                "type": "message",
                "role": "user" if index % 2 == 0 else "assistant",
                "message": message_to_dict(message),
                "timestamp": (START + timedelta(seconds=index)).isoformat(),
                "pinned": False,
                "metadata": {},
                "summary": None,
            }
        )
    summaries: list[dict[str, Any]] = []
    parent: int | None = None
    for leaf in range(leaves):
        first, last = leaf * SPAN + 1, leaf * SPAN + SPAN
        merged = leaf % SPAN == 0 and leaves - leaf >= SPAN  # a full group starts here
        if leaf % SPAN == 0:
            # An export lists summaries by first seq, then level: the group's first
            # leaf, then its merged summary, then the other leaves. The last, partial
            # group stays unmerged.
            parent = len(summaries) + 1 if merged else None
        for row in rows[first - 1 : last]:
            row["summary"] = len(summaries)
        summaries.append(_summary(1, first, last, parent, entries))
        if merged:
            summaries.append(_summary(2, first, first + SPAN * SPAN - 1, None, entries))
    state = {
        "schema_version": 1,
        "session_id": "bench",
        "encoding": "cl100k_base",
        "created_at": START.isoformat(),
        "last_accessed": (START + timedelta(seconds=entries)).isoformat(),
        "access_count": entries,
        "entries": rows,
        "summaries": summaries,
    }
    return json.dumps(state)


def _summary(level: int, first: int, last: int, parent: int | None, entries: int) -> dict[str, Any]:
    moment = (START + timedelta(seconds=entries + 1)).isoformat()
    return {
        "content": f"ships and tides of turns {first}-{last}",
        "level": level,
        "first_seq": first,
        "last_seq": last,
        "created_at": moment,
        "start_time": (START + timedelta(seconds=first - 1)).isoformat(),
        "end_time": (START + timedelta(seconds=last - 1)).isoformat(),
        "parent": parent,
    }


@contextmanager
def store(backend: str) -> Iterator[str]:
    """The URL of a fresh SQLite file or PostgreSQL schema, removed afterwards."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{Path(folder) / 'bench.db'}"
        return
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield schema
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def measure(backend: str, entries: int) -> dict[str, Any]:
    """Seconds to import, and to export back, a session of ``entries`` entries."""
    text = make_export(entries)
    summaries = len(SessionState.from_json(text).summaries)
    with store(backend) as where:
        if backend == "sqlite":
            engine = sa.create_engine(where)
        else:
            engine = sa.create_engine(PG_URL, connect_args={"options": f"-csearch_path={where}"})
        clock = ManualClock(START + timedelta(days=1, seconds=entries))  # after its last access
        memory = ConversationMemory(
            engine=engine, config=MemoryConfig(auto_compress=False), clock=clock
        )
        try:
            memory.list_sessions()  # the schema exists before the clock starts
            started = time.perf_counter()
            memory.import_session(text)
            imported = time.perf_counter() - started
            started = time.perf_counter()
            exported = memory.export_session("bench")
            export_seconds = time.perf_counter() - started
            encoding = memory.counter.encoding_name
        finally:
            memory.close()
            engine.dispose()
    expected = SessionState.from_json(text).model_copy(update={"encoding": encoding})
    assert exported.to_json() == expected.to_json(), "the import changed the session"
    return {
        "backend": backend,
        "entries": entries,
        "summaries": summaries,
        "import_seconds": round(imported, 3),
        "export_seconds": round(export_seconds, 3),
    }


def main(argv: list[str] | None = None) -> None:
    """Run the measurements and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--entries", default="4000,32000,100000")
    parser.add_argument("--results-dir", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args(argv)
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    sizes = [int(size) for size in args.entries.split(",")]
    results = []
    for backend in backends:
        for size in sizes:
            result = measure(backend, size)
            results.append(result)
            print(
                f"{backend:9} {size:>7} entries {result['summaries']:>6} summaries: "
                f"import {result['import_seconds']:7.2f} s, "
                f"export {result['export_seconds']:6.2f} s"
            )
    folder = Path(args.results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "import_bench.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
