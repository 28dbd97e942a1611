"""T08 and T14 (kill variant): SIGKILL during compression, and the claim lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from tiermem._storage.schema import session_table
from tiermem.errors import CompressionInProgress
from tiermem.testing import FakeSummarizer

from .harness import (
    StoreSpec,
    join_all,
    kill,
    read_log,
    spawn,
    store_dump,
    store_healthy,
    wait_backends_gone,
    wait_for,
    wait_for_hit,
)
from .workers import NO_AUTO, compress_one, compress_until_done, op_messages, opened

pytestmark = pytest.mark.slow

CLAIM = {"tiermem_session": {"claim_token", "claim_expires_at"}}


def _seed(store: StoreSpec) -> int:
    with opened(store) as memory:
        for index in range(10):
            memory.add_messages("s", op_messages("seed", index))
        return memory.get_stats("s").total_entries


def _later(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def _claim(store: StoreSpec) -> tuple[str | None, datetime | None]:
    engine = store.engine()
    try:
        with engine.connect() as conn:
            token, expires = conn.execute(
                sa.select(session_table.c.claim_token, session_table.c.claim_expires_at)
            ).one()
    finally:
        engine.dispose()
    if expires is not None and expires.tzinfo is None:
        expires = expires.replace(tzinfo=UTC)
    return token, expires


def _claim_expiry(store: StoreSpec) -> datetime:
    token, expires = _claim(store)
    assert token is not None and expires is not None, "the killed worker left no claim"
    return expires


@pytest.mark.parametrize(
    "failpoint",
    [
        "compress.after_claim",
        "compress.in_llm",
        "compress.after_summary_insert",
        "compress.after_link",
        "compress.before_commit",
        "transaction.before_commit",
        "compress.after_commit_before_signal",
    ],
)
def test_kill_at_compress_failpoint(
    store: StoreSpec, fp_dir: Path, tmp_path: Path, failpoint: str
) -> None:
    """Killed before its commit, compression leaves the pre-state (its claim aside, which
    expires); killed after, the whole summary; a later compression then succeeds."""
    total = _seed(store)
    before = store_dump(store, ignore=CLAIM)
    log = str(tmp_path / "log.jsonl")
    worker = spawn(
        compress_one, store, "s", log, "ok", 1.0, failpoints=f"{failpoint}=pause", fp_dir=fp_dir
    )
    try:
        wait_for_hit(fp_dir, failpoint, worker)
    finally:
        kill(worker)
    wait_backends_gone(store)
    store_healthy(store)
    committed = failpoint == "compress.after_commit_before_signal"
    if committed:
        with opened(store) as memory:
            summaries = memory.get_summaries("s")
            stats = memory.get_stats("s")
        assert len(summaries) == 1 and stats.compressed_entries == len(
            summaries[0].original_entry_ids
        )
        assert _claim(store) == (None, None)
    else:
        assert store_dump(store, ignore=CLAIM) == before
        if failpoint == "transaction.before_commit":  # the claim's own transaction died
            assert _claim(store) == (None, None)
        else:
            _claim_expiry(store)
    # Once the lease has passed (a clock 2 s ahead), the session compresses again.
    with opened(store, summarizer=FakeSummarizer(), clock=lambda: _later(2)) as memory:
        result = memory.compress("s", force=True, keep=0)
        assert result is not None
        assert memory.get_stats("s").total_entries == total
    store_healthy(store)


def test_kill_while_summarizer_blocks(store: StoreSpec, tmp_path: Path) -> None:
    """A worker killed while its model call hangs leaves no summary and no linked entry."""
    _seed(store)
    before = store_dump(store, ignore=CLAIM)
    summary_log = tmp_path / "calls.jsonl"
    worker = spawn(
        compress_one, store, "s", str(tmp_path / "log.jsonl"), "sleep", 1.0, str(summary_log), 3600
    )
    try:
        wait_for(lambda: bool(read_log(summary_log)), 60, "the summarizer call")
    finally:
        kill(worker)
    wait_backends_gone(store)
    store_healthy(store)
    assert store_dump(store, ignore=CLAIM) == before


def test_claim_lease_after_kill(store: StoreSpec, fp_dir: Path, tmp_path: Path) -> None:
    """After a claimant dies in its model call, another process gets CompressionInProgress
    until the 1 s lease passes, then compresses (T08 claim, T14 kill variant)."""
    _seed(store)
    holder = spawn(
        compress_one,
        store,
        "s",
        str(tmp_path / "a.jsonl"),
        "ok",
        1.0,
        failpoints="compress.in_llm=pause",
        fp_dir=fp_dir,
    )
    try:
        wait_for_hit(fp_dir, "compress.in_llm", holder)
    finally:
        kill(holder)
    expires = _claim_expiry(store).timestamp()
    log = tmp_path / "b.jsonl"
    contender = spawn(compress_until_done, store, "s", str(log), 1.0, expires + 30)
    join_all([contender], 60)
    attempts = read_log(log)
    assert attempts[-1]["outcome"] == "ok"
    assert attempts[-1]["t"] >= expires - 0.2, "compressed before the lease expired"
    early = attempts[:-1]
    assert all(a["outcome"] == "CompressionInProgress" for a in early)
    if attempts[0]["t"] < expires - 0.2:
        assert early, "a live claim did not stop the contender"
    with opened(store) as memory:
        assert len(memory.get_summaries("s")) == 1
    store_healthy(store)


def test_paused_claimant_blocks_second(store: StoreSpec, fp_dir: Path, tmp_path: Path) -> None:
    """While A holds the claim (paused after claiming), B's compress raises
    CompressionInProgress and changes nothing (T14 deterministic variant)."""
    _seed(store)
    holder = spawn(
        compress_one,
        store,
        "s",
        str(tmp_path / "a.jsonl"),
        failpoints="compress.after_claim=pause",
        fp_dir=fp_dir,
    )
    try:
        wait_for_hit(fp_dir, "compress.after_claim", holder)
        before = store_dump(store)
        with opened(store, summarizer=FakeSummarizer(), config=NO_AUTO) as memory:
            with pytest.raises(CompressionInProgress):
                memory.compress("s", force=True)
        assert store_dump(store) == before
    finally:
        kill(holder)
    store_healthy(store)
