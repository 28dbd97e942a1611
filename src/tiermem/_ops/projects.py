"""Which projects a database holds data for (``tiermem projects``, and the hint of a
listing that is empty because of its project)."""

from __future__ import annotations

from .._core.context import MemoryContext
from .._core.runner import Op
from .._storage.projects import ProjectCounts, project_counts

__all__ = ["ProjectCounts", "list_projects"]


def list_projects(ctx: MemoryContext) -> Op[list[ProjectCounts]]:
    """Every project of the database with sessions, layer items, documents or events,
    by name, with their counts; not an access."""
    return (yield from ctx.transact(project_counts, write=False))
