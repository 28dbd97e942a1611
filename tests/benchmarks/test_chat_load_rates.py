"""benchmarks/chat_load.py's rates: the steady rate leaves out the staggered start and
the tail, and the throughput target is judged on it with the whole run's beside it."""

from __future__ import annotations

import pytest
from chat_load import LoadResult, steady_rate, targets


def test_the_steady_rate_leaves_out_the_tail() -> None:
    """90 answers 10 ms apart, then 10 spread over a second (one worker's
    conversations left): the steady rate is the 100 per second of the first part."""
    answered = [i * 0.01 for i in range(90)] + [0.9 + j * 0.1 for j in range(10)]
    assert steady_rate(answered) == pytest.approx(100.0)
    whole = len(answered) / (max(answered) - min(answered))
    assert whole < 60


def test_too_few_answers_have_no_steady_rate() -> None:
    """Under ten answers there is no 10-90 % window: 0."""
    assert steady_rate([0.0, 0.1, 0.2]) == 0.0
    assert steady_rate([1.0] * 20) == 0.0


def saturated(name: str, whole: float, steady: float) -> LoadResult:
    result = LoadResult(name, conversations=200, turns=16, workers=4, think=0.0)
    result.turns_per_s, result.steady_turns_per_s = whole, steady
    result.service_cpu_ms, result.database_cpu_ms = 3.0, 0.5
    return result


@pytest.mark.parametrize(("ours", "met"), [((380.0, 410.0), True), ((400.0, 370.0), False)])
def test_the_throughput_target_is_judged_on_the_steady_rates(
    ours: tuple[float, float], met: bool
) -> None:
    """2x the reference's steady rate meets the target whatever the whole-run ratio,
    and both ratios are printed."""
    results = [
        saturated("tiermem-saturated", *ours),
        saturated("langgraph-saturated", 190.0, 200.0),
    ]
    ((what, ok, figures),) = [t for t in targets(results) if "2x" in t[0]]
    assert ok is met
    assert "steady" in figures and "whole run" in figures
