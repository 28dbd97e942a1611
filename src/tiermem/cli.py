"""The ``tiermem`` command line (needs the ``cli`` extra: typer and rich).

Exit codes: 0 success, 1 a tiermem error (printed), 2 bad usage, 3 ``doctor``
found broken invariants. Every command takes ``--url`` (default: the embedded
SQLite file ``tiermem.db``) and ``--project``. The maintenance commands
(``recalc``, ``prune``) suit cron: ``--quiet`` prints nothing on success.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

try:
    import typer
    from rich.console import Console
    from rich.table import Table
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the install
    raise SystemExit("the tiermem command needs the cli extra: pip install 'tiermem[cli]'") from exc

from .errors import TiermemError
from .invariants import find_violations
from .lifecycle import DEFAULT_PRUNE_BATCH, DEFAULT_RECALC_BATCH, Progress, TierStats
from .memory import ConversationMemory

__all__ = ["app", "main"]

app = typer.Typer(help="Tiered, token-aware conversation memory.", no_args_is_help=True)
db_app = typer.Typer(help="Schema management.", no_args_is_help=True)
app.add_typer(db_app, name="db")
console = Console()
err_console = Console(stderr=True)

UrlOption = Annotated[
    str | None, typer.Option("--url", envvar="TIERMEM_URL", help="SQLAlchemy URL of the store.")
]
ProjectOption = Annotated[str, typer.Option("--project", help="Project (namespace) of sessions.")]


@contextmanager
def open_memory(
    url: str | None, project: str = "default", **kwargs: Any
) -> Iterator[ConversationMemory]:
    """A memory for one command; tiermem errors become exit code 1."""
    try:
        memory = ConversationMemory(url, project=project, **kwargs)
        try:
            yield memory
        finally:
            memory.close()
    except TiermemError as error:
        err_console.print(f"[red]error:[/red] {error}")
        raise typer.Exit(1) from error


@app.command()
def sessions(url: UrlOption = None, project: ProjectOption = "default", limit: int = 50) -> None:
    """List sessions, most recently accessed first."""
    with open_memory(url, project) as memory:
        table = Table("session", "tier", "entries", "context tokens", "last accessed", "accesses")
        for info in memory.list_sessions(limit=limit):
            table.add_row(
                info.session_id,
                info.memory_tier,
                str(info.total_entries),
                str(info.context_tokens),
                info.last_accessed.isoformat(timespec="seconds"),
                str(info.access_count),
            )
        console.print(table)


@app.command()
def show(session_id: str, url: UrlOption = None, project: ProjectOption = "default") -> None:
    """Print a session's context as the model sees it, and its counters."""
    with open_memory(url, project) as memory:
        stats = memory.get_stats(session_id)
        console.print(memory.get_context_for_llm(session_id), markup=False)
        console.print(
            f"\n{stats.total_entries} entries ({stats.active_entries} active, "
            f"{stats.compressed_entries} compressed), {stats.summaries} summaries, "
            f"{stats.context_tokens} context tokens of {stats.total_tokens} stored"
        )


@app.command("export")
def export_command(
    session_id: str,
    url: UrlOption = None,
    project: ProjectOption = "default",
    output: Annotated[Path | None, typer.Option("-o", "--output")] = None,
) -> None:
    """Write a session as canonical JSON (to stdout or a file)."""
    with open_memory(url, project) as memory:
        text = memory.export_session(session_id).to_json()
    if output is None:
        sys.stdout.write(text + "\n")
    else:
        output.write_text(text, encoding="utf-8")


@app.command("import")
def import_command(
    file: Path,
    url: UrlOption = None,
    project: ProjectOption = "default",
    overwrite: bool = False,
    session_id: Annotated[str | None, typer.Option("--as")] = None,
) -> None:
    """Import a session exported with ``tiermem export`` (all or nothing)."""
    with open_memory(url, project) as memory:
        imported = memory.import_session(
            file.read_bytes(), overwrite=overwrite, session_id=session_id
        )
    console.print(f"imported session {imported!r}")


@db_app.command("upgrade")
def db_upgrade(url: UrlOption = None, revision: str = "head") -> None:
    """Apply the schema migrations (idempotent)."""
    from .migrations import upgrade

    try:
        upgrade(url, revision)
    except TiermemError as error:
        err_console.print(f"[red]error:[/red] {error}")
        raise typer.Exit(1) from error
    console.print(f"schema at {revision}")


@app.command()
def doctor(url: UrlOption = None) -> None:
    """Check the storage invariants; exit code 3 when any is broken."""
    with open_memory(url) as memory:
        problems = find_violations(memory.engine, now=memory.now())
    if problems:
        for problem in problems:
            console.print(f"[red]x[/red] {problem}", markup=True)
        raise typer.Exit(3)
    console.print("[green]ok[/green]: every invariant holds")


@app.command()
def demo(
    db: Annotated[Path, typer.Option(help="SQLite file of the demo.")] = Path("tiermem-demo.db"),
    turns: int = 24,
) -> None:
    """A conversation on an embedded SQLite file: compression, signals and tiers."""
    from .demo import run_demo

    run_demo(db, turns=turns, console=console)


# ------------------------------------------------------------------ access tiers

QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="Print nothing unless something fails (cron).")
]
#: ``stats`` suggests a prune once this share of a project's sessions is expired.
EXPIRED_HINT_SHARE = 0.10


@contextmanager
def _progress(label: str, quiet: bool) -> Iterator[Progress | None]:
    """A transient progress bar on a terminal's stderr; it appears once the first
    batch commits, so only runs of several batches really show it."""
    if quiet or not err_console.is_terminal:
        yield None
        return
    from rich.progress import Progress as ProgressBar

    with ProgressBar(console=err_console, transient=True) as bar:
        task = bar.add_task(label, total=None, visible=False)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, visible=True)

        yield update


def _span(window: timedelta) -> str:
    seconds = int(window.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _share(count: int, total: int) -> str:
    return f"{count / total:.1%}" if total else "-"


def tier_hints(tiers: TierStats) -> list[str]:
    """The health hints ``tiermem stats`` prints under the table."""
    if not tiers.total and not tiers.items:
        return ["no sessions in this project yet"]
    hints = []
    for expired, total, what in (
        (tiers.expired, tiers.total, "sessions"),
        (tiers.expired_items, tiers.items, "layer items"),
    ):
        if expired and expired >= EXPIRED_HINT_SHARE * total:
            hints.append(
                f"{expired} {what} ({_share(expired, total)}) are expired: "
                "run `tiermem prune` to delete them"
            )
    if tiers.total and not tiers.active:
        hints.append("no active sessions: none was read or written within the active window")
    return hints


@app.command()
def stats(
    url: UrlOption = None,
    project: ProjectOption = "default",
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
) -> None:
    """Show how a project's sessions and layer items spread over the access tiers,
    with health hints."""
    with open_memory(url, project) as memory:
        tiers = memory.get_tier_stats()
        policy = memory.config.tier_policy
    if as_json:
        sys.stdout.write(json.dumps(dataclasses.asdict(tiers)) + "\n")
        return
    table = Table(
        "tier", "last accessed", "sessions", "share", "layer items", title=f"project {project!r}"
    )
    rows = [
        ("active", f"< {_span(policy.active_within)}", tiers.active, tiers.active_items),
        ("recent", f"< {_span(policy.recent_within)}", tiers.recent, tiers.recent_items),
        ("archived", f"<= {_span(policy.expired_after)}", tiers.archived, tiers.archived_items),
        ("expired", f"> {_span(policy.expired_after)}", tiers.expired, tiers.expired_items),
    ]
    for name, window, count, items in rows:
        table.add_row(name, window + " ago", str(count), _share(count, tiers.total), str(items))
    table.add_row(
        "total",
        "",
        str(tiers.total),
        _share(tiers.total, tiers.total),
        str(tiers.items),
        style="bold",
    )
    console.print(table)
    for hint in tier_hints(tiers):
        console.print(f"[yellow]![/yellow] {hint}")


@app.command()
def recalc(
    url: UrlOption = None,
    project: ProjectOption = "default",
    batch_size: Annotated[
        int, typer.Option(min=1, help="Sessions or layer items per transaction.")
    ] = DEFAULT_RECALC_BATCH,
    quiet: QuietOption = False,
) -> None:
    """Store every session's and layer item's tier by its last access (set-based SQL,
    in batches)."""
    with open_memory(url, project) as memory, _progress("recalculating tiers", quiet) as progress:
        changed = memory.recalculate_tiers(batch_size=batch_size, progress=progress)
    if not quiet:
        console.print(f"{changed} sessions and layer items of project {project!r} changed tier")


@app.command()
def prune(
    url: UrlOption = None,
    project: ProjectOption = "default",
    limit: Annotated[
        int | None,
        typer.Option(min=0, help="Delete at most this many sessions and layer items."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only count what would be deleted.")
    ] = False,
    batch_size: Annotated[
        int, typer.Option(min=1, help="Sessions or layer items per transaction.")
    ] = DEFAULT_PRUNE_BATCH,
    quiet: QuietOption = False,
) -> None:
    """Delete expired sessions with their entries and summaries, then expired layer
    items, oldest first."""
    with open_memory(url, project) as memory, _progress("pruning", quiet) as progress:
        count = memory.prune_expired(
            limit=limit, dry_run=dry_run, batch_size=batch_size, progress=progress
        )
    if not quiet:
        verb = "would delete" if dry_run else "deleted"
        console.print(f"{verb} {count} expired sessions and layer items of project {project!r}")


def main() -> None:
    """Entry point of the ``tiermem`` script."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
