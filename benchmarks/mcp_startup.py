"""Startup of ``tiermem mcp`` to its first tool result, on SQLite.

Each run starts the server as a subprocess over stdio with the MCP SDK's own
client, initializes the session and calls ``get_memory_stats`` on a SQLite file
that already holds a session; the clock runs from just before the process is
spawned to the tool's result. The target is under 1.5 s (median).

Usage::

    .venv/bin/python benchmarks/mcp_startup.py              # 7 runs
    .venv/bin/python benchmarks/mcp_startup.py --runs 3

Results go to ``benchmarks/results/mcp_startup.json`` (git-ignored). Exits with
code 1 when the median misses the target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tiermem import ConversationMemory

#: Seconds from spawn to the first tool result the median must stay under.
TARGET = 1.5


async def first_result(url: str) -> float:
    """Seconds from spawning ``tiermem mcp`` to the result of its first tool call."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tiermem.cli", "mcp", "--url", url],
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("get_memory_stats", {})
        elapsed = time.perf_counter() - started
    if result.is_error or not isinstance(result.structured_content, dict):
        raise SystemExit(f"the first tool call failed: {result.content}")
    if result.structured_content["total"] != 1:
        raise SystemExit(f"unexpected statistics: {result.structured_content}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    """Time the runs, print the figures, write the JSON; 1 when the target is missed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7, help="server starts to time")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        with ConversationMemory(url) as memory:
            memory.add_user_message("s", "hello")
        times = [anyio.run(first_result, url) for _ in range(options.runs)]
    median = statistics.median(times)
    print(f"runs: {', '.join(f'{t:.3f}' for t in times)} s")
    print(
        f"tiermem mcp startup to first tool result (SQLite): median {median:.3f} s, "
        f"min {min(times):.3f} s, max {max(times):.3f} s (target < {TARGET} s)"
    )
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / "mcp_startup.json").write_text(
        json.dumps({"seconds": times, "median": median, "target": TARGET}, indent=2) + "\n"
    )
    return 0 if median < TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
