"""``copy_project`` killed with SIGKILL (before a session's commit, after it, after a
page of events) leaves a target that the doctor passes, and the next run finishes
the copy without a duplicate."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import copy_project

from ..conftest import PG_URL
from ..integration.test_copy_project import PROJECT, populate, snapshot
from .harness import StoreSpec, kill, spawn, store_healthy, wait_backends_gone, wait_for_hit

pytestmark = pytest.mark.slow


def copy_worker(source: str, target: str) -> None:
    """Copy ``PROJECT`` (in a spawned process, with the failpoints of its environment)."""
    copy_project(source, target, project=PROJECT)


@pytest.mark.parametrize(
    "failpoint", ["transaction.before_commit", "copy.after_session", "copy.after_events"]
)
def test_a_killed_copy_resumes(
    store: StoreSpec,
    fp_dir: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    failpoint: str,
) -> None:
    if store.backend == "postgres":
        source = f"sqlite:///{tmp_path / 'source.db'}"
    else:
        source = f"{PG_URL}?options=-csearch_path%3D{request.getfixturevalue('pg_schema')}"
    populate(source)
    worker = spawn(copy_worker, source, store.url, failpoints=f"{failpoint}=pause", fp_dir=fp_dir)
    try:
        wait_for_hit(fp_dir, failpoint, worker, timeout=120)
    finally:
        kill(worker)
    wait_backends_gone(store)
    store_healthy(store)

    result = copy_project(source, store.url, project=PROJECT)
    # Killed before the first session's commit, after it, or after the events.
    present = {"transaction.before_commit": 0, "copy.after_session": 1, "copy.after_events": 2}
    assert result.sessions_present == present[failpoint]
    assert result.sessions + result.sessions_present == 2
    assert (result.events_present > 0) == (failpoint == "copy.after_events")
    assert snapshot(store.url) == snapshot(source)
    store_healthy(store)
    again = copy_project(source, store.url, project=PROJECT)
    assert (again.sessions, again.events, again.events_present) == (
        0,
        0,
        result.events_present + result.events,
    )
