"""``tiermem forget``: erase everything tiermem keeps about a person."""

from __future__ import annotations

from typing import Annotated

import typer

from .cli_common import (
    ProjectOption,
    QuietOption,
    UrlOption,
    console,
    open_memory,
    plural,
    singular,
)
from .types import ForgetResult

__all__ = ["forget_command"]


def _listed(label: str, names: tuple[str, ...]) -> str:
    return f"{label} " + ", ".join(repr(name) for name in names) if names else ""


def summary(result: ForgetResult, project: str) -> str:
    """One line: what was (or would be) erased, by name and by count."""
    verb = "would forget" if result.dry_run else "forgot"
    named = [
        _listed("sessions", result.sessions),
        _listed("scopes", result.scopes),
        _listed("namespaces", tuple(".".join(labels) for labels in result.namespaces)),
    ]
    found = "; ".join(part for part in named if part) or "nothing stored"
    counts = ", ".join(
        plural(count, singular(kind.replace("_", " ")))
        for kind, count in result.counts().items()
        if kind not in ("sessions", "scopes", "namespaces")
    )
    return f"{verb} {found} of project {project!r}: {counts}"


def forget_command(
    session: Annotated[
        list[str] | None, typer.Option("--session", help="A session id (repeatable).")
    ] = None,
    scope: Annotated[
        list[str] | None, typer.Option("--scope", help="A layer scope (repeatable).")
    ] = None,
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace",
            help="A document namespace prefix, labels joined with '.' (repeatable).",
        ),
    ] = None,
    url: UrlOption = None,
    project: ProjectOption = "default",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list and count what would be erased.")
    ] = False,
    vacuum: Annotated[
        bool,
        typer.Option(
            "--vacuum",
            help="Also rewrite the database file (SQLite VACUUM; PostgreSQL VACUUM FULL of "
            "the tables erased from): clears what older writes left in free space.",
        ),
    ] = False,
    quiet: QuietOption = False,
) -> None:
    """Erase a person: the sessions, layer scopes and document namespaces named, with
    their entries, summaries, items, documents, vectors and change-feed events, in
    one transaction. Names are matched exactly (namespaces label by label)."""
    if not (session or scope or namespace):
        raise typer.BadParameter("name at least one --session, --scope or --namespace")
    namespaces = [tuple(text.split(".")) for text in namespace or ()]
    # A missing database (or one without tiermem's tables) is an error, never created.
    with open_memory(url, project, existing=True) as memory:
        result = memory.forget(
            sessions=session or (),
            scopes=scope or (),
            namespaces=namespaces,
            dry_run=dry_run,
            vacuum=vacuum,
        )
    if not quiet:
        console.print(summary(result, project), markup=False, highlight=False, soft_wrap=True)
