"""T25: 10 MB entries are counted in bounded time and memory, stored and read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem.invariants import find_violations

from .harness import StoreSpec, join_all, read_log, spawn
from .workers import memory_footprint

pytestmark = pytest.mark.slow


def test_ten_megabyte_entries(store: StoreSpec, tmp_path: Path) -> None:
    """Prose, one 10 MB run without whitespace, 10 MB of base64 text and a base64 image
    block are each counted in < 10 s, stored and read back equal, with peak RSS < 1 GB
    (measured in a fresh process); the image block costs a fixed token price."""
    log = tmp_path / "log.jsonl"
    worker = spawn(memory_footprint, store, str(log))
    join_all([worker], 240)
    records = read_log(log)
    results = {r["name"]: r for r in records if "name" in r}
    assert set(results) == {"prose", "run", "base64", "image"}
    for name, result in results.items():
        assert result["count_s"] < 10.0, f"{name}: counted in {result['count_s']:.1f} s"
        assert result["equal"], f"{name} did not round-trip"
        assert result["entry_tokens"] == result["tokens"]
    assert results["image"]["tokens"] < 200, "base64 image data was counted as text"
    assert results["run"]["tokens"] > 100_000
    peak = next(r["peak_mb"] for r in records if "peak_mb" in r)
    assert peak < 1024, f"peak RSS {peak:.0f} MB"
    # Shallow check: the deep one would recount 30 MB of text the worker just counted.
    engine = store.engine()
    try:
        assert find_violations(engine, deep=False) == []
    finally:
        engine.dispose()
