"""The recall latency benchmark runs end to end on both backends and reports its figures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import recall_latency
from tiermem_contender import POSTGRES_URL


def test_a_tiny_run_reports_recall_and_plain_reads_on_both_backends(tmp_path: Path) -> None:
    """Each backend gets p50/p95 (wall and CPU) of reads with and without recall, what
    recall adds, the server's mean CPU per read on PostgreSQL, and the build time; every
    session is compressed, so every read with a question gets a recalled block, and the
    block holds the fact asked about."""
    code = recall_latency.main(
        [
            *("--sessions", "20", "--turns", "10", "--reads", "20", "--warmup", "2"),
            *("--backends", "sqlite,postgres", "--results-dir", str(tmp_path)),
            *("--pg-url", os.environ.get("TIERMEM_TEST_PG_URL", POSTGRES_URL)),
        ]
    )
    assert code == 0
    report = json.loads((tmp_path / "recall_latency.json").read_text())
    assert len(report["load_average"]) == 2
    rows = report["backends"]
    assert set(rows) == {"sqlite", "postgres"}
    assert [row["backend"] for row in rows.values()] == ["sqlite", "postgresql"]
    for row in rows.values():
        for kind in ("recall", "plain"):
            figures = row[kind]
            assert 0 < figures["p50_ms"] <= figures["p95_ms"]
            assert 0 < figures["cpu_p50_ms"] <= figures["cpu_p95_ms"]
        added = row["added"]
        assert added["p95_ms"] == row["recall"]["p95_ms"] - row["plain"]["p95_ms"]
        assert "paired_p95_ms" in added
        assert row["reads"] == 20 and row["build_seconds"] > 0
        assert row["target_ms"] == recall_latency.TARGET_MS[row["backend"]]
        on_postgres = row["backend"] == "postgresql"
        for kind in ("recall", "plain"):
            server = row[kind]["server_cpu_mean_ms"]
            assert (server >= 0) if on_postgres else (server is None)
        assert row["with_block_share"] == 1.0
        assert row["found_share"] == 1.0
