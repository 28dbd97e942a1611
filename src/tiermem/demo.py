"""``tiermem demo``: a scripted support conversation that shows compression,
signals and tiers on an embedded SQLite file, with no API key.

Summaries come from the chat model named by ``TIERMEM_CHAT_MODEL`` (e.g.
``openai:gpt-4o-mini``) when it is set, otherwise from the heuristic summarizer.
Besides the conversation the demo keeps a session last used
``DEMO_OLD_SESSION_AGE`` ago, so the project shows more than one tier.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ._core.clock import utc_now
from ._core.named_models import chat_model_from_name
from .memory import ConversationMemory
from .types import CompressionResult, MemoryConfig, MemoryEntry

__all__ = ["DEMO_OLD_SESSION_AGE", "DEMO_PROJECT", "run_demo"]

#: The project the demo writes its sessions to.
DEMO_PROJECT = "demo"
#: How long ago the demo's second session was last used (RECENT by the default policy).
DEMO_OLD_SESSION_AGE = timedelta(hours=3)

_CITIES = ["Paris", "Lisbon", "Oslo", "Kyoto", "Lima", "Cairo"]


def _summarizer() -> Any:
    """The chat model named by ``TIERMEM_CHAT_MODEL``, or ``None``.

    Raises:
        InvalidArgument: the model cannot be made (its provider package, or
            langchain itself, is not installed; an unknown provider).
    """
    name = os.environ.get("TIERMEM_CHAT_MODEL")
    return chat_model_from_name(name, "TIERMEM_CHAT_MODEL") if name else None


def run_demo(path: Path, *, turns: int = 24, console: Console | None = None) -> ConversationMemory:
    """Run the demo conversation into project ``DEMO_PROJECT`` of the SQLite file
    ``path``, print what happens, and return the memory (the caller closes it).

    Raises:
        InvalidArgument: ``TIERMEM_CHAT_MODEL`` names a model that cannot be made.
    """
    console = console or Console()
    config = MemoryConfig(
        max_tokens=700, max_entries=40, recent_window=6, min_entries_to_compress=4
    )
    url = f"sqlite:///{path}"
    summarizer = _summarizer()
    old = "earlier-question"
    then = utc_now() - DEMO_OLD_SESSION_AGE
    with ConversationMemory(url, project=DEMO_PROJECT, clock=lambda: then) as earlier:
        earlier.clear_session(old)
        earlier.add_user_message(old, "Which trains run from Paris to Lisbon?")
    memory = ConversationMemory(url, project=DEMO_PROJECT, config=config, summarizer=summarizer)
    session = "trip-planning"
    memory.clear_session(session)
    console.print(
        f"Writing project {DEMO_PROJECT!r} to {path}, context budget {config.max_tokens} "
        f"tokens, {turns} turns",
        markup=False,
        highlight=False,
    )
    added: list[MemoryEntry] = []

    def on_added(_sender: object, *, entry: MemoryEntry, **_: Any) -> None:
        added.append(entry)

    def on_compressed(_sender: object, *, result: CompressionResult, **_: Any) -> None:
        what = (
            f"merged {result.merged_summaries} summaries"
            if result.merged_summaries
            else f"{result.entries_compressed} entries"
        )
        console.print(
            f"[bold green]compressed[/] {what}: "
            f"{result.tokens_before} -> {result.tokens_after} context tokens"
        )

    memory.on("entry:added", on_added)
    memory.on("compressed", on_compressed)
    memory.add_context(
        session, "The user prefers trains over planes.", source="profile", pinned=True
    )
    for turn in range(turns):
        city = _CITIES[turn % len(_CITIES)]
        memory.add_user_message(
            session,
            f"Turn {turn}: what is the weather like in {city} this week, "
            "and is it a good time to visit?",
        )
        memory.add_tool_call(session, "weather", {"city": city})
        memory.add_tool_result(session, "weather", f"{city}: 18C, light wind, no rain expected")
        memory.add_assistant_message(
            session,
            f"{city} looks pleasant: about 18C with light wind and no rain. "
            "It is a good week to go; trains suit your preference best.",
        )
    stats = memory.get_stats(session)
    table = Table(
        "stored entries",
        "active",
        "compressed",
        "summaries",
        "context tokens",
        "stored tokens",
        "tier",
    )
    table.add_row(
        str(stats.total_entries),
        str(stats.active_entries),
        str(stats.compressed_entries),
        str(stats.summaries),
        str(stats.context_tokens),
        str(stats.total_tokens),
        stats.memory_tier,
    )
    console.print(table)
    console.print(f"[bold]entry:added[/] fired {len(added)} times")
    console.print("[bold]Context handed to the model:[/]")
    console.print(memory.get_context_for_llm(session), markup=False)
    summary = memory.get_summaries(session)[0]
    console.print(
        f"[bold]Nothing is lost:[/] summary {summary.id} expands to "
        f"{len(memory.expand_summary(summary.id))} original entries"
    )
    return memory
