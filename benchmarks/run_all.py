"""Run every benchmark in its own process and print one summary (``make bench``).

Each benchmark prints its own figures and writes JSON under
``benchmarks/results/``; this runner only sequences them, times them and
collects the last lines each one printed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent

#: (name, script, arguments) in the order they run; the quick set keeps CI-sized N.
BENCHMARKS: list[tuple[str, str, list[str]]] = [
    ("side-by-side", "compare.py", []),
    ("compression", "compression_bench.py", []),
    ("turn", "turn_bench.py", []),
    ("tiers", "tiers_bench.py", []),
    ("layers", "layers_bench.py", []),
    ("agents", "agents_side_by_side.py", []),
    ("mcp-startup", "mcp_startup.py", []),
    ("recall", "recall_bench.py", ["--dense"]),
    ("context", "context_bench.py", []),
    ("verbatim", "verbatim_bench.py", []),
    ("recall-latency", "recall_latency.py", ["--backends", "sqlite,postgres"]),
    ("chat-load", "chat_load.py", []),
    ("checkpointer", "checkpointer_bench.py", []),
]
QUICK_ARGS: dict[str, list[str]] = {
    "side-by-side": ["--quick"],
    "compression": ["--turns", "1000"],
    "turn": ["--turns", "1000", "--repeat", "1", "--appends", "500"],
    "tiers": ["--sessions", "100000", "--expired", "10000"],
    "layers": ["--items", "100000"],
    "agents": ["--turns", "200"],
    "mcp-startup": ["--runs", "3"],
    "recall": ["--limit-questions", "100"],
    "context": ["--limit-questions", "24", "--replay-turns", "150"],
    "verbatim": ["--conversations", "1"],
    "recall-latency": ["--sessions", "300", "--reads", "200"],
    "chat-load": ["--conversations", "50", "--turns", "14"],
    "checkpointer": ["--turns", "100", "--marks", "25,50", "--copy-turns", "50"],
}


@dataclass
class Outcome:
    """How one benchmark ended."""

    name: str
    seconds: float
    returncode: int
    tail: list[str]


def run(name: str, script: str, args: list[str], tail_lines: int) -> Outcome:
    """Run one benchmark script, streaming its output, and keep its last lines."""
    command = [sys.executable, str(HERE / script), *args]
    print(f"\n=== {name}: {' '.join(command[1:])}", flush=True)
    started = time.perf_counter()
    lines: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            lines.append(line.rstrip("\n"))
    return Outcome(name, time.perf_counter() - started, proc.returncode, lines[-tail_lines:])


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; exit non-zero if any failed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--only", action="append", help="run only these benchmarks (by name)")
    parser.add_argument("--tail", type=int, default=12, help="lines of each to summarize")
    options = parser.parse_args(argv)
    outcomes = []
    for name, script, args in BENCHMARKS:
        if options.only and name not in options.only:
            continue
        extra = QUICK_ARGS.get(name, []) if options.quick else []
        outcomes.append(run(name, script, [*args, *extra], options.tail))
    print("\n================ summary ================")
    for outcome in outcomes:
        status = "ok" if outcome.returncode == 0 else f"FAILED ({outcome.returncode})"
        print(f"\n--- {outcome.name}: {status} in {outcome.seconds:.0f} s")
        for line in outcome.tail:
            print(f"    {line}")
    return 0 if all(outcome.returncode == 0 for outcome in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
