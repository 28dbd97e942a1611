"""examples/maintenance.py runs its maintenance job on both backends."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tiermem import ConversationMemory, TierStats
from tiermem.testing import check_invariants

from ..conftest import PG_URL

EXAMPLE = Path(__file__).parents[2] / "examples" / "maintenance.py"


def _load() -> ModuleType:
    """Import the example as a module."""
    spec = importlib.util.spec_from_file_location("example_maintenance", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A URL on a fresh SQLite file or PostgreSQL schema."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'maintenance.db'}"
    return f"{PG_URL}?options=-csearch_path%3D{request.getfixturevalue('pg_schema')}"


def test_maintenance_job_prunes_the_expired_tickets(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The job recalculates eight tiers, prunes the three expired tickets and keeps the rest."""
    _load().main(url)
    out = capsys.readouterr().out
    assert "before: 10 sessions: 2 active, 2 recent, 3 archived, 3 expired" in out
    assert "recalculated: 8 sessions changed tier" in out
    assert "pruned 3 of 3 expired: ['ticket-110', 'ticket-109', 'ticket-108']" in out
    with ConversationMemory(url, project="support-bot") as memory:
        assert memory.get_tier_stats() == TierStats(7, 2, 2, 3, 0)
        assert {info.memory_tier for info in memory.list_sessions()} == {
            "active",
            "recent",
            "archived",
        }
        check_invariants(memory)


def test_run_maintenance_respects_its_limit(url: str) -> None:
    """run_maintenance(limit=1) deletes only the oldest expired ticket and reports it."""
    example = _load()
    example.write_history(url)
    with ConversationMemory(url, project="support-bot") as memory:
        done = example.run_maintenance(memory, limit=1)
    assert done["deleted"] == 1 and done["pruned"] == ["ticket-110"]
    assert done["would_prune"] == 1
    assert done["stats"].expired == 2


def test_main_runs_without_a_url(capsys: pytest.CaptureFixture[str]) -> None:
    """With no URL the example uses a throw-away SQLite file and still completes."""
    _load().main()
    assert "after:  7 sessions" in capsys.readouterr().out
