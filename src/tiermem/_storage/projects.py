"""The projects a database holds data for, with what each holds (four grouped
counts: sessions, layer items, stored documents, change-feed events)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .document_schema import document_table
from .event_schema import event_table
from .layer_schema import item_table, scope_table
from .schema import session_table

__all__ = ["ProjectCounts", "project_counts"]


@dataclass(frozen=True, slots=True)
class ProjectCounts:
    """What one project holds."""

    project: str
    sessions: int = 0
    items: int = 0
    documents: int = 0
    events: int = 0


def project_counts(conn: Connection) -> list[ProjectCounts]:
    """Every project with at least one session, layer item, document or event, by
    name."""
    queries = {
        "sessions": sa.select(session_table.c.project, sa.func.count()).group_by(
            session_table.c.project
        ),
        "items": sa.select(scope_table.c.project, sa.func.count(item_table.c.id))
        .select_from(item_table.join(scope_table, item_table.c.scope_pk == scope_table.c.pk))
        .group_by(scope_table.c.project),
        "documents": sa.select(document_table.c.project, sa.func.count()).group_by(
            document_table.c.project
        ),
        "events": sa.select(event_table.c.project, sa.func.count()).group_by(event_table.c.project),
    }
    found: dict[str, dict[str, int]] = {}
    for what, query in queries.items():
        for project, count in conn.execute(query):
            found.setdefault(project, {})[what] = int(count)
    return [ProjectCounts(project, **counts) for project, counts in sorted(found.items())]
