"""Turning timed turns into figures, and measuring in a child process of its own."""

from __future__ import annotations

from multiprocessing import Pipe

import pytest
from base import MAX_TOKENS
from measure import RunResult, RunSpec, _Trace, child_main, cost_curve, run_isolated, summarise


def _spec(turns: int, name: str = "floor-tiktoken") -> RunSpec:
    return RunSpec(contender=name, turns=turns, seed=0, budget_s=60.0)


def test_cost_curve_buckets_cover_every_turn_on_a_log_scale() -> None:
    """Bucket centres grow geometrically, each bucket is a mean, none is left out."""
    times = [0.001] * 700 + [0.010] * 300  # the last log bucket holds turns 750-1000
    curve = cost_curve(times)
    xs = [x for x, _ in curve]
    assert xs == sorted(xs) and xs[0] == 1.0
    assert xs[-1] <= 1000
    assert curve[0][1] == pytest.approx(1.0)
    assert curve[-1][1] == pytest.approx(10.0)
    assert [y for _, y in curve] == sorted(y for _, y in curve)
    assert len(curve) == 24  # 8 buckets per decade over three decades
    assert cost_curve([]) == []


def test_summarise_takes_the_first_and_last_tenth() -> None:
    """first10/last10 are the means of the first and last 10 % of turns; flat is their ratio."""
    trace = _Trace(times=[0.002] * 10 + [0.001] * 80 + [0.003] * 10, ctx_samples=[100, 300, 200])
    result = summarise(_spec(100), trace, setup_s=0.5, baseline=10.0)
    assert result.ok and result.turns_done == 100
    assert result.first10_ms == pytest.approx(2.0)
    assert result.last10_ms == pytest.approx(3.0)
    assert result.flatness == pytest.approx(1.5)
    assert result.total_s == pytest.approx(0.02 + 0.08 + 0.03)
    assert (result.final_ctx_tokens, result.max_ctx_tokens) == (200, 300)
    assert result.mean_ctx_tokens == pytest.approx(200.0)


def test_a_run_cut_short_by_its_budget_has_no_last_tenth() -> None:
    """A timed-out run reports how far it got and no late cost (it never got late)."""
    trace = _Trace(times=[0.001] * 40, ctx_samples=[50], timed_out=True)
    result = summarise(_spec(100), trace, setup_s=0.0, baseline=10.0)
    assert result.status == "timeout" and not result.ok
    assert result.turns_done == 40
    assert result.last10_ms is None and result.flatness is None


def test_tiermem_runs_in_a_child_and_stays_within_the_budget() -> None:
    """A real run of tiermem on SQLite: every turn timed, the context never over 2,000
    tokens by the benchmark's own count, and memory measured in the child."""
    result = run_isolated(_spec(60, "tiermem-sqlite"))
    assert result.status == "ok", result.detail
    assert result.turns_done == 60
    assert result.total_s is not None and result.total_s > 0
    assert result.max_ctx_tokens is not None and 0 < result.max_ctx_tokens <= MAX_TOKENS
    assert result.peak_rss_mb is not None and result.baseline_rss_mb is not None
    assert result.peak_rss_mb >= result.baseline_rss_mb > 0
    assert result.last10_ms is not None and result.curve


def test_a_contender_over_its_budget_is_recorded_as_timeout() -> None:
    """With no time to spare, a run stops after its first turn and says so."""
    spec = RunSpec(contender="floor-sqlite", turns=50, seed=0, budget_s=0.0)
    result = run_isolated(spec)
    assert result.status == "timeout"
    assert result.turns_done == 1


def test_a_contender_that_fails_reports_its_error_and_traceback() -> None:
    """The child never raises: an error becomes the status, the traceback the detail."""
    receiver, sender = Pipe(duplex=False)
    child_main(sender, _spec(5, "no-such-contender"))
    result = receiver.recv()
    assert isinstance(result, RunResult)
    assert result.status == "error: KeyError: 'no-such-contender'"
    assert result.detail is not None and "Traceback" in result.detail
