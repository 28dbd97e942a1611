"""Scheduled maintenance of access tiers: recalculate, prune, report.

Needs only tiermem (``make demo`` installs it, as does ``make dist`` then
``pip install --find-links dist 'tiermem[offline]'``, and
the ``postgres`` extra for a PostgreSQL URL).

Run ``python examples/maintenance.py [URL]`` (default: a throw-away SQLite file).

A support bot's memory holds conversations last used over the past weeks. A job
like :func:`run_maintenance` runs from cron or any scheduler, hourly or daily:

1. ``recalculate_tiers`` stores each session's tier by its last access
   (set-based SQL in batches; one ``tier_changed`` signal per tier and batch);
2. ``prune_expired`` deletes the sessions unused for more than 30 days with
   their entries and summaries, oldest first and at most ``limit`` per run
   (one ``pruned`` signal per batch);
3. ``get_tier_stats`` reports the distribution.

The same job from a crontab, where only failures print::

    tiermem recalc -q && tiermem prune -q --limit 10000 && tiermem stats --json

To have weeks of history to maintain, the example first writes conversations
with a simulated clock (``clock=``); the job itself runs on real time, as in
production (on PostgreSQL, without ``clock=``, the server's clock decides).
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tiermem import ConversationMemory, TierStats
from tiermem.testing import ManualClock

PROJECT = "support-bot"
#: (session id, how long ago it was last used)
HISTORY = [
    ("ticket-101", timedelta(minutes=5)),
    ("ticket-102", timedelta(minutes=40)),
    ("ticket-103", timedelta(hours=3)),
    ("ticket-104", timedelta(hours=20)),
    ("ticket-105", timedelta(days=2)),
    ("ticket-106", timedelta(days=12)),
    ("ticket-107", timedelta(days=29)),
    ("ticket-108", timedelta(days=31)),
    ("ticket-109", timedelta(days=38)),
    ("ticket-110", timedelta(days=44)),
]


def write_history(url: str) -> None:
    """Store a short conversation per ticket, each last used at its age in HISTORY."""
    now = datetime.now(UTC)
    clock = ManualClock(now - timedelta(days=45))
    with ConversationMemory(url, project=PROJECT, clock=clock) as memory:
        for session_id, age in HISTORY:
            clock.set(now - age - timedelta(minutes=2))
            memory.add_user_message(session_id, f"Where is my order? ({session_id})")
            clock.set(now - age)
            memory.add_assistant_message(session_id, "It left the warehouse this morning.")


def run_maintenance(memory: ConversationMemory, limit: int | None = None) -> dict[str, Any]:
    """One maintenance run: refresh the tiers, prune the expired, report.

    Args:
        memory: the memory of the project to maintain.
        limit: delete at most this many sessions in this run (``None``: all).

    Returns:
        What the run did: tier changes, pruned session ids and the statistics.
    """
    moved: Counter[str] = Counter()
    pruned: list[str] = []
    stop_moves = memory.on(
        "tier_changed",
        lambda _sender, tier, session_ids, **_: moved.update({tier: len(session_ids)}),
    )
    stop_prunes = memory.on("pruned", lambda _sender, session_ids, **_: pruned.extend(session_ids))
    try:
        changed = memory.recalculate_tiers()
        would_prune = memory.prune_expired(limit=limit, dry_run=True)
        deleted = memory.prune_expired(limit=limit)
        stats = memory.get_tier_stats()
    finally:
        stop_moves()
        stop_prunes()
    return {
        "changed": changed,
        "moved": dict(moved),
        "would_prune": would_prune,
        "deleted": deleted,
        "pruned": pruned,
        "stats": stats,
    }


def report(stats: TierStats) -> str:
    """A one-line summary of a tier distribution."""
    return (
        f"{stats.total} sessions: {stats.active} active, {stats.recent} recent, "
        f"{stats.archived} archived, {stats.expired} expired"
    )


def main(url: str | None = None) -> None:
    """Write some history, then run the maintenance job on it and print what it did."""
    with tempfile.TemporaryDirectory() as directory:
        url = url or f"sqlite:///{Path(directory) / 'maintenance.db'}"
        write_history(url)
        with ConversationMemory(url, project=PROJECT) as memory:
            print("before:", report(memory.get_tier_stats()))
            print(
                "least recently used archived:",
                [info.session_id for info in memory.least_recently_used("archived", limit=2)],
            )
            done = run_maintenance(memory, limit=100)
        print(f"recalculated: {done['changed']} sessions changed tier {done['moved']}")
        print(f"pruned {done['deleted']} of {done['would_prune']} expired: {done['pruned']}")
        print("after: ", report(done["stats"]))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
