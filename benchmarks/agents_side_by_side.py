"""The same long agent conversation through SummarizationMiddleware and TieredMemoryMiddleware.

Each turn a user asks a question, the (scripted) model calls one or two tools, the
tools answer, and the model replies: four or five messages per turn, generated from
a seed so both runs see exactly the same conversation. Both middlewares get the same
trigger (tokens in the agent state) and keep (recent messages), the same checkpointer
and a summarizer that answers the same fixed text, so the difference is the memory's
own work. tiermem is budgeted like the trigger (``MemoryConfig(max_tokens=<trigger>,
summary_share=0.1)``): its summaries are merged once they pass 10% of it, whereas
``SummarizationMiddleware`` re-summarizes its one summary every time.

Per turn we record the wall time of ``agent.invoke``, the time spent inside the
middleware's hooks and the tokens sent to the model (tiktoken cl100k, tiermem's
counting rule, for both).

Run from the repository root::

    .venv/bin/python benchmarks/agents_side_by_side.py            # 1,000 turns
    .venv/bin/python benchmarks/agents_side_by_side.py --turns 200

Results go to ``benchmarks/results/agents_side_by_side.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, SummarizationMiddleware
from langchain.agents.middleware.summarization import ContextMessages, ContextTokens
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    MessageLikeRepresentation,
    convert_to_messages,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from tiermem_agents import TieredMemoryMiddleware
from tiermem_agents.testing import ToolCallingFakeModel

from tiermem import ConversationMemory, MemoryConfig, TokenCounter

WORDS = (
    "invoice shipment customs delay refund carrier warehouse pallet order ticket "
    "priority region quota tariff manifest label scanner route depot courier batch "
    "supplier contract audit ledger margin forecast backlog invoice status weight"
).split()
SUMMARY = (
    "SESSION INTENT: track orders and shipments for the customer. SUMMARY: orders were "
    "looked up one by one with the lookup tool; statuses, carriers and delays were "
    "reported; no errors. ARTIFACTS: none. NEXT STEPS: answer the next question."
)
CONFIG: RunnableConfig = {"configurable": {"thread_id": "bench"}}


def _text(rng: random.Random, words: int) -> str:
    """A sentence of ``words`` words drawn from the fixed vocabulary."""
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


@tool
def lookup(query: str) -> str:
    """Look up an order record."""
    rng = random.Random(query)
    return f"Record for {query}: {_text(rng, 45)}"


def script(turns: int, seed: int) -> tuple[list[str], list[AIMessage]]:
    """The users' questions and the model's messages (two model calls per turn)."""
    rng = random.Random(seed)
    questions, replies = [], []
    for turn in range(turns):
        questions.append(f"Turn {turn}: {_text(rng, 25)}")
        calls = [
            {"name": "lookup", "args": {"query": f"order {turn}-{i}"}, "id": f"c{turn}_{i}"}
            for i in range(1 + rng.randrange(2))
        ]
        replies.append(AIMessage("", tool_calls=calls, id=f"a{turn}c"))
        replies.append(AIMessage(_text(rng, 35), id=f"a{turn}r"))
    return questions, replies


class CountingSummarizer(FakeListChatModel):
    """Answers the fixed summary and counts its calls."""

    calls: int = 0

    def _call(self, *args: Any, **kwargs: Any) -> str:
        """Count the call, answer the summary."""
        self.calls += 1
        return SUMMARY


class TimedSummarization(SummarizationMiddleware):
    """SummarizationMiddleware that adds up the time spent in its hook."""

    spent = 0.0

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Time the parent hook."""
        start = time.perf_counter()
        try:
            return super().before_model(state, runtime)
        finally:
            self.spent += time.perf_counter() - start


class TimedTiered(TieredMemoryMiddleware):
    """TieredMemoryMiddleware that adds up the time spent in its hooks."""

    spent = 0.0

    def _timed(self, hook: Callable[..., dict[str, Any] | None], *args: Any) -> Any:
        """Run ``hook`` and add its duration."""
        start = time.perf_counter()
        try:
            return hook(*args)
        finally:
            self.spent += time.perf_counter() - start

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Time the parent hook."""
        return self._timed(super().before_model, state, runtime)  # type: ignore[no-any-return]

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Time the parent hook."""
        return self._timed(super().after_model, state, runtime)  # type: ignore[no-any-return]


def run(
    name: str, middleware: AgentMiddleware[Any, Any, Any], turns: int, seed: int
) -> dict[str, Any]:
    """Drive ``turns`` turns through one middleware and collect per-turn figures."""
    counter = TokenCounter()
    questions, replies = script(turns, seed)
    model = ToolCallingFakeModel(messages=iter(replies))
    agent = create_agent(model, [lookup], middleware=[middleware], checkpointer=InMemorySaver())
    wall, hooks, sent, state_sizes = [], [], [], []
    for turn, question in enumerate(questions):
        before_requests, before_spent = len(model.requests), middleware.spent  # type: ignore[attr-defined]
        start = time.perf_counter()
        result = agent.invoke({"messages": [HumanMessage(question, id=f"h{turn}")]}, CONFIG)
        wall.append(time.perf_counter() - start)
        hooks.append(middleware.spent - before_spent)  # type: ignore[attr-defined]
        sent.append(sum(counter.count_messages(r) for r in model.requests[before_requests:]))
        state_sizes.append(len(result["messages"]))
        if turn % 100 == 99:
            print(f"  {name}: {turn + 1} turns", flush=True)
    return {"wall_s": wall, "hook_s": hooks, "tokens_sent": sent, "state_messages": state_sizes}


def _summary(series: dict[str, Any]) -> dict[str, float]:
    """Percentiles of one run."""
    wall_ms = [s * 1000 for s in series["wall_s"]]
    hook_ms = [s * 1000 for s in series["hook_s"]]
    tenth = max(len(wall_ms) // 10, 1)

    def pct(values: list[float], q: int) -> float:
        return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]

    return {
        "turn_ms_p50_first_10pct": pct(wall_ms[:tenth], 50),
        "turn_ms_p50_last_10pct": pct(wall_ms[-tenth:], 50),
        "turn_ms_p95": pct(wall_ms, 95),
        "hook_ms_mean": statistics.fmean(hook_ms),
        "hook_ms_p95": pct(hook_ms, 95),
        "tokens_sent_per_turn_mean": statistics.fmean(series["tokens_sent"]),
        "tokens_sent_per_turn_max": max(series["tokens_sent"]),
        "tokens_sent_total": sum(series["tokens_sent"]),
    }


def main(argv: list[str] | None = None) -> None:
    """Run both middlewares and write the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--trigger-tokens", type=int, default=3000)
    parser.add_argument("--keep-messages", type=int, default=10)
    parser.add_argument("--summary-share", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    trigger: ContextTokens = ("tokens", args.trigger_tokens)
    keep: ContextMessages = ("messages", args.keep_messages)
    counter = TokenCounter()

    def count(messages: Iterable[MessageLikeRepresentation]) -> int:
        return counter.count_messages(convert_to_messages(messages))

    summarizer = CountingSummarizer(responses=[SUMMARY])
    baseline = TimedSummarization(
        summarizer,
        trigger=trigger,
        keep=keep,
        token_counter=count,  # the same token rule as tiermem
    )
    results: dict[str, Any] = {"settings": vars(args) | {"results_dir": str(args.results_dir)}}
    print(f"SummarizationMiddleware, {args.turns} turns")
    results["SummarizationMiddleware"] = run("summarization", baseline, args.turns, args.seed)
    results["SummarizationMiddleware"]["summarizer_calls"] = summarizer.calls

    with tempfile.TemporaryDirectory() as tmp:
        config = MemoryConfig(
            max_tokens=args.trigger_tokens, summary_share=args.summary_share, auto_compress=False
        )
        tiered_summarizer = CountingSummarizer(responses=[SUMMARY])
        mem = ConversationMemory(
            url=f"sqlite:///{tmp}/bench.db", config=config, summarizer=tiered_summarizer
        )
        tiered = TimedTiered(mem, trigger=trigger, keep=keep)
        print(f"TieredMemoryMiddleware, {args.turns} turns")
        results["TieredMemoryMiddleware"] = run("tiered", tiered, args.turns, args.seed)
        stats = mem.get_stats("bench")
        results["TieredMemoryMiddleware"]["stored_entries"] = stats.total_entries
        results["TieredMemoryMiddleware"]["summarizer_calls"] = tiered_summarizer.calls
        mem.close()

    _report(results)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / "agents_side_by_side.json"
    out.write_text(json.dumps(results, indent=1))
    print(f"\nwrote {out}")


def _report(results: dict[str, Any]) -> None:
    """Print one table comparing the two runs."""
    names = ["SummarizationMiddleware", "TieredMemoryMiddleware"]
    summaries = {name: _summary(results[name]) for name in names}
    for name in names:
        results[name]["summary"] = summaries[name]
    print(f"\n{'metric':<30}" + "".join(f"{name:>26}" for name in names))
    for metric in summaries[names[0]]:
        print(f"{metric:<30}" + "".join(f"{summaries[n][metric]:>26.2f}" for n in names))
    calls = [results[n]["summarizer_calls"] for n in names]
    print(f"{'summarizer calls':<30}{calls[0]:>26}{calls[1]:>26}")
    print(
        f"{'messages kept after the run':<30}"
        f"{results[names[0]]['state_messages'][-1]:>26}"
        f"{results[names[1]]['stored_entries']:>26}"
    )


if __name__ == "__main__":
    main()
