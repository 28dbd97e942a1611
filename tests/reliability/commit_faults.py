"""Faults at the COMMIT of a compression's summary transaction (T06).

A compression runs two write transactions around the summarizer call: the
claim, then the summary. The helpers here trace the failpoints passed and the
COMMITs sent in one list, so a test can show which transaction a fault hit,
and make exactly the summary's COMMIT fail (the driver raising, or the
PostgreSQL backend being terminated before it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem._storage import failpoints as _failpoints

from ..conftest import pg_admin

__all__ = [
    "COMMIT",
    "FAILED_COMMIT",
    "SUMMARY_COMMIT_TRACE",
    "FailingSummaryCommit",
    "Trace",
    "pending_summaries",
    "terminate_backend",
]

COMMIT = "COMMIT"
FAILED_COMMIT = "COMMIT (failed)"
#: What a manual compress() passes through up to the COMMIT of its summary: the claim's
#: transaction commits first, the summarizer runs with no transaction open, and the
#: second transaction reaches ``compress.before_commit`` right before its COMMIT.
SUMMARY_COMMIT_TRACE = [
    "transaction.before_commit",
    COMMIT,
    "compress.after_claim",
    "compress.in_llm",
    "compress.after_summary_insert",
    "compress.after_link",
    "compress.before_commit",
    "transaction.before_commit",
]


@dataclass
class Trace:
    """The failpoints passed (by name) and the COMMITs sent, in order."""

    events: list[str] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Record every failpoint hit, then run the configured action as before."""
        original = _failpoints.hit

        def hit(name: str) -> None:
            self.events.append(name)
            original(name)

        monkeypatch.setattr(_failpoints, "hit", hit)


def pending_summaries(dbapi_connection: Any) -> int:
    """The summary rows visible to the transaction open on ``dbapi_connection``."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("SELECT count(*) FROM tiermem_summary")
        return int(cursor.fetchone()[0])
    finally:
        cursor.close()


@dataclass
class FailingSummaryCommit:
    """A stand-in for ``engine.dialect.do_commit``: the first COMMIT that follows the
    ``compress.before_commit`` failpoint raises the driver's OperationalError without
    committing; every other COMMIT goes through. Each COMMIT is added to ``trace``."""

    engine: Engine
    trace: Trace
    original: Callable[[Any], None]
    error: BaseException | None = None
    #: Summary rows the failed transaction held when its COMMIT was refused.
    summaries_in_failed: int | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Replace the engine's dialect ``do_commit`` for the test."""
        monkeypatch.setattr(self.engine.dialect, "do_commit", self)

    def __call__(self, dbapi_connection: Any) -> None:
        last = self.trace.events[-2:]
        if self.error is None and last == ["compress.before_commit", "transaction.before_commit"]:
            self.summaries_in_failed = pending_summaries(dbapi_connection)
            self.error = self.engine.dialect.loaded_dbapi.OperationalError(
                "disk I/O error during COMMIT"
            )
            self.trace.events.append(FAILED_COMMIT)
            raise self.error
        self.trace.events.append(COMMIT)
        self.original(dbapi_connection)


def terminate_backend(pid: int) -> None:
    """``pg_terminate_backend`` from an admin connection, waiting until it is gone."""
    admin = pg_admin()
    try:
        with admin.connect() as conn:
            done = conn.execute(
                sa.text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": pid}
            ).scalar_one()
    finally:
        admin.dispose()
    assert done is True, f"backend {pid} did not terminate within 5 s"
