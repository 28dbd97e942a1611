"""Async throughput under many concurrent conversations.

Runs ``--conversations`` conversations at once (default 200), each ``--turns``
turns of ``aadd_and_get_messages`` on one memory, and prints turns per second
and the p50 / p99 latency of a turn; ``--sync`` runs the same turns from threads
with the sync API instead, for comparison.

Usage: python benchmarks/async_concurrency.py --url postgresql+psycopg://... [--turns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid

from langchain_core.messages import AIMessage, HumanMessage

from tiermem import ConversationMemory, MemoryConfig


async def conversation(memory: ConversationMemory, turns: int, latencies: list[float]) -> None:
    session = f"c-{uuid.uuid4().hex[:12]}"
    for turn in range(turns):
        started = time.perf_counter()
        await memory.aadd_and_get_messages(
            session,
            [HumanMessage(f"question {turn} about the order"), AIMessage(f"answer {turn}")],
        )
        latencies.append(time.perf_counter() - started)


async def measure(args: argparse.Namespace) -> str:
    config = MemoryConfig(max_tokens=2000, change_feed=not args.no_feed)
    memory = ConversationMemory(args.url, project=f"bench-{uuid.uuid4().hex[:8]}", config=config)
    await memory.aadd_user_message("warm-up", "hello")
    latencies: list[float] = []
    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(
        *(conversation(memory, args.turns, latencies) for _ in range(args.conversations))
    )
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    ordered = sorted(latencies)
    await memory.aclose()
    return (
        f"{args.conversations} conversations x {args.turns} turns: "
        f"{len(latencies) / elapsed:.0f} turns/s, "
        f"cpu {cpu / len(latencies) * 1000:.2f} ms/turn, "
        f"p50 {statistics.median(ordered) * 1000:.1f} ms, "
        f"p99 {ordered[int(len(ordered) * 0.99) - 1] * 1000:.1f} ms"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--no-feed", action="store_true", help="turn the change feed off")
    parser.add_argument("--drivers", default="run_sync", help="comma-separated, alternated")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    for round_ in range(args.rounds):
        for driver in args.drivers.split(","):
            name, _, pool = driver.partition(":")
            os.environ["TIERMEM_ASYNC_DRIVER"] = name
            os.environ["TIERMEM_POOL"] = (
                f'{{"pool_size": {pool.removeprefix("pool")}, "max_overflow": 0}}' if pool else "{}"
            )
            result = await measure(args)
            load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"round {round_ + 1} {driver:8} {result} (load {load})", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
