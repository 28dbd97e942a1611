"""benchmarks/chat_load.py on a tiny load: every acknowledged turn stored exactly once,
also when a worker is SIGKILLed mid-run and replaced."""

from __future__ import annotations

import pytest
from chat_load import run_scenario

from ..conftest import PG_URL

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "scenario", ["tiermem-kill", "tiermem-preload-kill", "tiermem-subscriber-kill"]
)
def test_a_killed_process_loses_no_turn_and_no_event(scenario: str) -> None:
    """Ten conversations of three turns on two workers, a worker (or the subscriber)
    killed halfway: every turn is answered (retried where the worker died), stored
    once, the doctor is green, and every entry's event reached the subscriber, in
    order (a killed subscriber resumes from its acknowledged position)."""
    result = run_scenario(scenario, url=PG_URL, conversations=10, turns=3, workers=2, think=0.3)
    assert result.errors == [], result
    assert result.acknowledged == 30
    assert result.killed is not None, result
    assert result.replaced is (True if "subscriber" not in scenario else None), result
    assert (result.lost, result.duplicated, result.doctor_ok) == (0, 0, True)
    assert result.feed is not None and result.feed.events >= 60, result
    assert (result.feed.missing, result.feed.out_of_order) == (0, 0), result
    assert result.correct
