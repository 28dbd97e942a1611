"""Time in tiermem: every stored and compared time is an aware UTC datetime."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["as_utc", "utc_now"]


def utc_now() -> datetime:
    """The current time in UTC (the default clock of a memory)."""
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC; a naive datetime (SQLite reads them back naive) is taken
    as UTC, since tiermem stores nothing else."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
