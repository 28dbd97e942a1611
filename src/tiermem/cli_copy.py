"""``tiermem copy``: copy a whole project (or every project) to another database."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from .cli_common import QuietOption, console, err_console, reported
from .copying import CopyProgress, copy_project

__all__ = ["copy_command"]


class _Progress:
    """Progress lines on stderr: the last of each kind, and at most one a second
    between (a project of many sessions would otherwise print one line each)."""

    def __init__(self) -> None:
        self.printed = 0.0

    def __call__(self, step: CopyProgress) -> None:
        now = time.monotonic()
        if step.done < step.total and now - self.printed < 1.0:
            return
        self.printed = now
        err_console.print(
            f"{step.project}: {step.kind} {step.done}/{step.total}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def copy_command(
    source: Annotated[
        str, typer.Option("--from", help="SQLAlchemy URL of the database to copy from.")
    ],
    target: Annotated[
        str, typer.Option("--to", help="SQLAlchemy URL of the database to copy into.")
    ],
    project: Annotated[
        str | None, typer.Option("--project", help="The project to copy (default: 'default').")
    ] = None,
    all_projects: Annotated[
        bool, typer.Option("--all-projects", help="Copy every project of the source.")
    ] = False,
    quiet: QuietOption = False,
) -> None:
    """Copy a project's sessions, layer items, documents, vectors and change-feed
    events to another database (SQLite or PostgreSQL). Run it again after an
    interruption: what the target holds already is skipped; a target that differs is
    refused before anything is written."""
    if all_projects and project is not None:
        raise typer.BadParameter("pass --project or --all-projects, not both")
    with reported():
        result = copy_project(
            source,
            target,
            project=None if all_projects else project or "default",
            progress=None if quiet else _Progress(),
        )
    if not quiet:
        console.print(result.summary(), markup=False, highlight=False, soft_wrap=True)
