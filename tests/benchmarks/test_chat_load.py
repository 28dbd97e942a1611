"""benchmarks/chat_load.py on a tiny load: every acknowledged turn stored exactly once,
also when a worker is SIGKILLed mid-run and replaced."""

from __future__ import annotations

import pytest
from chat_load import run_scenario

from ..conftest import PG_URL

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("scenario", ["tiermem-kill", "tiermem-preload-kill"])
def test_a_killed_worker_loses_and_duplicates_no_turn(scenario: str) -> None:
    """Ten conversations of three turns on two workers, one killed halfway: every turn
    is answered (retried where the worker died), stored once, and the doctor is green."""
    result = run_scenario(scenario, url=PG_URL, conversations=10, turns=3, workers=2, think=0.3)
    assert result.errors == [], result
    assert result.acknowledged == 30
    assert result.killed is not None and result.replaced is True, result
    assert (result.lost, result.duplicated, result.doctor_ok) == (0, 0, True)
    assert result.correct
