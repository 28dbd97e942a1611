"""Side-by-side benchmark: tiermem against LangChain, llama-index and two floors.

Every contender gets the same seeded conversation (human turns of ~40 tokens,
assistant turns of ~120) and a 2,000-token context budget. A turn stores both
messages and builds the context the model would get next. Each (contender, N)
runs in a fresh child process, so peak RSS is per contender.

Usage (from the repository root)::

    .venv/bin/python benchmarks/compare.py --quick
    .venv/bin/python benchmarks/compare.py --turns 100,1000,10000

It prints one table per N, and writes ``benchmarks/results/compare.json`` and
``benchmarks/results/compare.png``; ``--update-docs`` also copies the plot to
``docs/compare.png``. See ``benchmarks/README.md`` for what each figure means.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from contenders import BASELINE, CONTENDERS
from measure import RunResult, RunSpec, run_isolated
from report import copy_to_docs, metadata_block, report_tables, write_json, write_plot

BENCH_DIR = Path(__file__).resolve().parent

FULL_TURNS = (100, 1000, 10000)
QUICK_TURNS = (100, 1000)
DEFAULT_BUDGET_S = 300.0
"""Seconds of turns each contender gets per N before it is recorded as ``timeout``."""


@dataclass(frozen=True, slots=True)
class Options:
    """The parsed command line."""

    turns: tuple[int, ...]
    contenders: tuple[str, ...]
    budget_s: float
    seed: int
    results_dir: Path
    update_docs: bool
    repeat: int = 1


def _int_list(text: str) -> tuple[int, ...]:
    """Parse ``100,1000`` (underscores and commas in numbers are fine: ``10_000``)."""
    values = tuple(int(part.strip().replace("_", "")) for part in text.split(",") if part.strip())
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _names(text: str) -> tuple[str, ...]:
    """Parse a comma-separated list of contender names."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [n for n in names if n not in CONTENDERS]
    if unknown:
        known = ", ".join(CONTENDERS)
        raise argparse.ArgumentTypeError(f"unknown contender(s) {unknown}; known: {known}")
    return names


def parse_args(argv: Sequence[str] | None = None) -> Options:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--turns",
        type=_int_list,
        default=FULL_TURNS,
        help="conversation lengths to run (default: 100,1000,10000)",
    )
    parser.add_argument("--quick", action="store_true", help="run N = 100,1000 only")
    parser.add_argument(
        "--only",
        type=_names,
        default=tuple(CONTENDERS),
        help="comma-separated contenders (default: all)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET_S,
        help=f"seconds per contender and N (default: {DEFAULT_BUDGET_S:g})",
    )
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (default: 0)")
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=BENCH_DIR / "results",
        help="where compare.json and compare.png go",
    )
    parser.add_argument(
        "--update-docs", action="store_true", help="also copy the plot to docs/compare.png"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per contender and N, keeping the fastest (default: 1); on a shared "
        "machine, other processes slow whole runs down, never speed one up",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return Options(
        turns=QUICK_TURNS if args.quick else tuple(sorted(set(args.turns))),
        contenders=args.only,
        budget_s=args.budget,
        seed=args.seed,
        results_dir=args.results_dir,
        update_docs=args.update_docs,
        repeat=args.repeat,
    )


def _describe(result: RunResult, wall_s: float) -> str:
    """Return the one-line progress note for a finished run."""
    total = f"{result.total_s:.2f} s in turns" if result.total_s is not None else ""
    return f"{result.status:<10} {total:<20} ({wall_s:.1f} s wall)"


def _fastest(spec: RunSpec, repeat: int) -> RunResult:
    """Run ``spec`` up to ``repeat`` times; the completed run with the smallest total
    (the first run that did not complete is returned at once)."""
    runs: list[RunResult] = []
    for _ in range(repeat):
        result = run_isolated(spec)
        if result.status != "ok" or result.total_s is None:
            return result
        runs.append(result)
    return min(runs, key=lambda run: run.total_s or 0.0)


def run_all(options: Options) -> list[RunResult]:
    """Run every contender at every N, smallest N first.

    A contender that timed out at one N is not started at a larger one: it is
    recorded as ``timeout (skipped ...)`` there.
    """
    results: list[RunResult] = []
    timed_out: dict[str, int] = {}
    for turns in options.turns:
        for name in options.contenders:
            print(f"[N={turns:>6,}] {name:<22}", end=" ", flush=True)
            if name in timed_out:
                skipped = f"timeout (skipped: timed out at N={timed_out[name]:,})"
                results.append(RunResult(name, turns, skipped))
                print(skipped, flush=True)
                continue
            start = time.monotonic()
            result = _fastest(RunSpec(name, turns, options.seed, options.budget_s), options.repeat)
            results.append(result)
            print(_describe(result, time.monotonic() - start), flush=True)
            if result.status.startswith("timeout"):
                timed_out[name] = turns
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the tables, write JSON and the plot."""
    options = parse_args(argv)
    started = time.monotonic()
    results = run_all(options)
    print()
    report_tables(results, BASELINE)
    json_path = options.results_dir / "compare.json"
    png_path = options.results_dir / "compare.png"
    write_json(json_path, metadata_block(options.seed, options.turns, options.budget_s), results)
    write_plot(png_path, results)
    print(f"\nwrote {json_path} and {png_path}")
    if options.update_docs:
        print(f"copied the plot to {copy_to_docs(png_path, BENCH_DIR.parent / 'docs')}")
    print(f"total wall time {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
