"""Async throughput under many concurrent conversations.

Runs ``--conversations`` conversations at once (default 200), each ``--turns``
turns of ``aadd_and_get_messages`` on one memory, and prints turns per second,
the process's CPU time per turn (the event loop's and the worker threads') and
the p50 / p99 latency of a turn.

Usage: python benchmarks/async_concurrency.py --url postgresql+psycopg://... [--turns 10]
"""

from __future__ import annotations

import argparse
import asyncio
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


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--no-feed", action="store_true", help="turn the change feed off")
    args = parser.parse_args()
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
    print(
        f"{args.conversations} conversations x {args.turns} turns: "
        f"{len(latencies) / elapsed:.0f} turns/s, "
        f"CPU {cpu / len(latencies) * 1000:.2f} ms/turn, "
        f"p50 {statistics.median(ordered) * 1000:.1f} ms, "
        f"p99 {ordered[int(len(ordered) * 0.99) - 1] * 1000:.1f} ms"
    )
    memory.close()


if __name__ == "__main__":
    asyncio.run(main())
