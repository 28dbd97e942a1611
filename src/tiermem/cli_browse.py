"""``tiermem search`` and ``tiermem projects``: finding what a database holds, and the
hint a listing prints when it is empty because of its ``--project``."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Literal

import typer
from rich.table import Column
from rich.text import Text

from .cli_common import (
    ProjectOption,
    UrlOption,
    console,
    err_console,
    listing,
    open_memory,
    plural,
)
from .maintenance import ProjectCounts
from .memory import ConversationMemory

__all__ = ["empty_project_hint", "projects", "search"]


def _described(counts: ProjectCounts) -> str:
    parts = [
        plural(count, noun)
        for count, noun in (
            (counts.sessions, "session"),
            (counts.items, "layer item"),
            (counts.documents, "document"),
            (counts.events, "event"),
        )
        if count
    ]
    return f"{counts.project!r} ({', '.join(parts)})"


def empty_project_hint(memory: ConversationMemory, what: Literal["sessions", "events"]) -> None:
    """When project ``memory.project`` holds no ``what``, tell so on stderr and name
    the projects that have data (the usual reason: a forgotten ``--project``)."""
    found = memory.list_projects()
    if any(p.project == memory.project and getattr(p, what) for p in found):
        return  # the project has some: the listing is empty for another reason
    others = [p for p in found if p.project != memory.project]
    line = f"no {what} in project {memory.project!r}"
    if others:
        shown = ", ".join(_described(p) for p in others[:5])
        more = f" and {len(others) - 5} more (tiermem projects)" if len(others) > 5 else ""
        line += f"; projects with data: {shown}{more}: pass --project NAME"
    err_console.print(Text(f"! {line}", style="yellow"), soft_wrap=True)


def projects(url: UrlOption = None) -> None:
    """List the projects that hold data, with their sessions, layer items, stored
    documents and change events. Records no access."""
    with open_memory(url, read_only=True) as memory:
        found = memory.list_projects()
    table = listing(
        Column("project", overflow="fold"),
        Column("sessions", justify="right"),
        Column("layer items", justify="right"),
        Column("documents", justify="right"),
        Column("events", justify="right"),
    )
    for counts in found:
        table.add_row(
            Text(counts.project),
            str(counts.sessions),
            str(counts.items),
            str(counts.documents),
            str(counts.events),
        )
    console.print(table)
    if not found:
        err_console.print("! no project holds data yet", style="yellow")


def search(
    query: Annotated[str, typer.Argument(help="Plain words; no syntax.")],
    url: UrlOption = None,
    project: ProjectOption = "default",
    session_id: Annotated[
        str | None, typer.Option("--session", help="Search only this session.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Show at most this many.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the hits as JSON lines.")] = False,
) -> None:
    """Search a project's messages (or one session's), compressed originals included,
    best first, as the MCP search_memory tool does. Records no access."""
    with open_memory(url, project, read_only=True) as memory:
        hits = memory.search(query, session_id, limit)
        if not hits:
            empty_project_hint(memory, "sessions")
    if as_json:
        for hit in hits:
            entry = hit.entry
            line = {
                "score": hit.score,
                "session_id": entry.session_id,
                "seq": entry.seq,
                "role": entry.role,
                "content": entry.content,
                "compressed": entry.compressed,
            }
            sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
        return
    table = listing(
        Column("score", justify="right", no_wrap=True),
        Column("session", no_wrap=True, overflow="fold"),
        Column("#", justify="right", no_wrap=True),
        Column("role", no_wrap=True),
        Column("content", overflow="ellipsis", no_wrap=True, ratio=1),
        expand=True,
    )
    for hit in hits:
        entry = hit.entry
        content = " ".join(entry.content.split())
        table.add_row(
            f"{hit.score:.3f}", Text(entry.session_id), str(entry.seq), entry.role, Text(content)
        )
    console.print(table)
    console.print(plural(len(hits), "hit"), highlight=False)
