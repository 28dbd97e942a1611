"""Measure one contender at one conversation length, in a child process of its own.

The parent starts a fresh interpreter (multiprocessing's spawn context) per
(contender, N), so ``ru_maxrss`` is that contender's peak alone. The child
generates the corpus, builds the contender (untimed), then times each turn's
``step`` call; it counts the returned context's tokens outside the timed
region. It stops by itself once the time budget is spent and reports
``timeout``; the parent kills a child that goes quiet for longer than the
budget plus a grace period.
"""

from __future__ import annotations

import math
import resource
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing import get_context
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from statistics import fmean
from typing import Any

from base import Contender
from corpus import Turn, count_tokens, make_corpus

DENSE_SAMPLING_MAX_TURNS = 1000
"""Up to this N the context is measured after every turn; above it, every 10th."""
SPARSE_SAMPLING_EVERY = 10
GRACE_S = 120.0
"""How long past its budget the parent waits for a child before killing it."""
BUCKETS_PER_DECADE = 8
"""Resolution of the per-turn cost curve (log-spaced buckets of turn numbers)."""


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What to measure: one contender, one conversation length."""

    contender: str
    turns: int
    seed: int
    budget_s: float


@dataclass(slots=True)
class RunResult:
    """What one (contender, N) run measured. Times are seconds unless the name says ms."""

    contender: str
    turns: int
    status: str
    """``ok``, ``timeout`` (budget spent, figures cover ``turns_done``) or ``error: ...``."""
    turns_done: int = 0
    total_s: float | None = None
    """Sum of the timed ``step`` calls: storing both messages and building the context."""
    first10_ms: float | None = None
    """Mean per-turn cost over the first 10 % of the N turns."""
    last10_ms: float | None = None
    """Mean per-turn cost over the last 10 % of the N turns (only when all ran)."""
    flatness: float | None = None
    """``last10_ms / first10_ms``: 1.0 means a turn costs the same late as early."""
    peak_rss_mb: float | None = None
    baseline_rss_mb: float | None = None
    """Peak RSS after imports, corpus and setup, before the first turn."""
    final_ctx_tokens: int | None = None
    """Context tokens after the last turn (benchmark rule, see corpus.count_tokens)."""
    max_ctx_tokens: int | None = None
    """Largest sampled context (every turn up to N = 1,000, every 10th above)."""
    mean_ctx_tokens: float | None = None
    """Mean sampled context: how much history the model actually gets."""
    setup_s: float | None = None
    curve: list[tuple[float, float]] = field(default_factory=list)
    """Per-turn cost against conversation length: (turn number, mean ms) per bucket."""
    detail: str | None = None
    """The child's traceback when the status is an error."""

    @property
    def ok(self) -> bool:
        """Whether every turn ran."""
        return self.status == "ok"


@dataclass(slots=True)
class _Trace:
    """What the turn loop records."""

    times: list[float] = field(default_factory=list)
    ctx_samples: list[int] = field(default_factory=list)
    timed_out: bool = False


def peak_rss_mb() -> float:
    """Return this process's peak resident set size in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _drive(contender: Contender[Any], corpus: list[Turn], budget_s: float) -> _Trace:
    """Run every turn through ``contender``, timing ``step`` and sampling context size."""
    every = 1 if len(corpus) <= DENSE_SAMPLING_MAX_TURNS else SPARSE_SAMPLING_EVERY
    deadline = time.monotonic() + budget_s
    trace = _Trace()
    for index, turn in enumerate(corpus, start=1):
        start = time.perf_counter()
        context = contender.step(turn.human, turn.ai)
        trace.times.append(time.perf_counter() - start)
        if index % every == 0 or index == len(corpus):
            trace.ctx_samples.append(count_tokens(contender.texts(context)))
        if time.monotonic() > deadline and index < len(corpus):
            trace.timed_out = True
            break
    return trace


def cost_curve(times: list[float]) -> list[tuple[float, float]]:
    """Bucket per-turn times by turn number on a log scale: (geometric centre, mean ms)."""
    curve: list[tuple[float, float]] = []
    lower = 1
    step = 0
    while lower <= len(times):
        step += 1
        upper = min(len(times), max(lower, math.floor(10 ** (step / BUCKETS_PER_DECADE))))
        curve.append((math.sqrt(lower * upper), fmean(times[lower - 1 : upper]) * 1000))
        lower = upper + 1
    return curve


def summarise(spec: RunSpec, trace: _Trace, setup_s: float, baseline: float) -> RunResult:
    """Turn a trace into a result: totals, 10 % windows, flatness, curve."""
    window = max(1, spec.turns // 10)
    done = len(trace.times)
    result = RunResult(
        contender=spec.contender,
        turns=spec.turns,
        status="timeout" if trace.timed_out else "ok",
        turns_done=done,
        total_s=sum(trace.times),
        first10_ms=fmean(trace.times[:window]) * 1000 if trace.times else None,
        peak_rss_mb=peak_rss_mb(),
        baseline_rss_mb=baseline,
        final_ctx_tokens=trace.ctx_samples[-1] if trace.ctx_samples else None,
        max_ctx_tokens=max(trace.ctx_samples, default=None),
        mean_ctx_tokens=fmean(trace.ctx_samples) if trace.ctx_samples else None,
        setup_s=setup_s,
        curve=cost_curve(trace.times),
    )
    if done == spec.turns and result.first10_ms:
        result.last10_ms = fmean(trace.times[-window:]) * 1000
        result.flatness = result.last10_ms / result.first10_ms
    return result


def measure(spec: RunSpec) -> RunResult:
    """Measure ``spec`` in this process (the child's body)."""
    from contenders import CONTENDERS

    corpus = make_corpus(spec.turns, spec.seed)
    with tempfile.TemporaryDirectory(prefix=f"tiermem-bench-{spec.contender}-") as scratch:
        start = time.perf_counter()
        contender = CONTENDERS[spec.contender](Path(scratch))
        setup_s = time.perf_counter() - start
        try:
            baseline = peak_rss_mb()
            trace = _drive(contender, corpus, spec.budget_s)
        finally:
            contender.close()
    return summarise(spec, trace, setup_s, baseline)


def error_status(exc: BaseException) -> str:
    """Return ``error: <type>: <first line of message>`` for the report."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return f"error: {text[:160]}"


def child_main(conn: Connection, spec: RunSpec) -> None:
    """Child process entry point: measure, send the result, never raise."""
    try:
        result = measure(spec)
    except BaseException as exc:  # report every failure to the parent
        result = RunResult(
            spec.contender, spec.turns, error_status(exc), detail=traceback.format_exc()
        )
    conn.send(result)
    conn.close()


def _reap(proc: BaseProcess) -> None:
    """Make sure the child has ended: terminate, then kill, the one process we started."""
    proc.join(timeout=10)
    if proc.is_alive():
        proc.terminate()
        proc.join(timeout=10)
    if proc.is_alive():
        proc.kill()
        proc.join()


def run_isolated(spec: RunSpec, grace_s: float = GRACE_S) -> RunResult:
    """Measure ``spec`` in a fresh spawned interpreter and return its result."""
    ctx = get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=child_main, args=(sender, spec), daemon=True)
    proc.start()
    sender.close()
    try:
        if not receiver.poll(spec.budget_s + grace_s):
            proc.terminate()
            return RunResult(spec.contender, spec.turns, "timeout (killed: no answer)")
        result: RunResult = receiver.recv()
        return result
    except EOFError:
        proc.join(timeout=10)
        return RunResult(spec.contender, spec.turns, f"error: child exited ({proc.exitcode})")
    finally:
        receiver.close()
        _reap(proc)
