"""The ``tiermem`` command line (needs the ``cli`` extra: typer and rich).

Exit codes: 0 success, 1 an error, 2 bad usage (the convention of Click and
argparse), 3 ``doctor`` found broken invariants; an error or a usage error is one
line on stderr, never a traceback or a boxed text. Every command but ``demo`` (which
takes ``--db``) and ``copy`` (``--from`` and ``--to``) takes ``--url`` (default:
the embedded SQLite file ``tiermem.db``);
those that read or write sessions take ``--project``. ``mcp`` serves the memory's
tools to MCP clients (the ``mcp`` extra). The maintenance commands
(``recalc``, ``prune``) suit cron: ``--quiet`` prints nothing on success.

Looking is not using: the read-only commands (``sessions``, ``show``, ``search``,
``projects``, ``stats``, ``export``, ``doctor``) never create a database (a
missing SQLite file is an error) and never record an access, so they change no
session's tier. Text that comes from the data (session ids, projects, contents) is
printed as it is, never read as rich markup.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Annotated

try:
    import typer
    from rich.markup import escape
    from rich.table import Column, Table
    from rich.text import Text
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the install
    raise SystemExit("the tiermem command needs the cli extra: pip install 'tiermem[cli]'") from exc

from . import state
from .cli_browse import empty_project_hint, projects, search
from .cli_common import (
    OneLineUsageGroup,
    ProjectOption,
    QuietOption,
    UrlOption,
    console,
    err_console,
    fail,
    listing,
    open_memory,
    reflow_help,
    reported,
)
from .cli_copy import copy_command
from .cli_embed import embed, load_embeddings
from .cli_events import events_app
from .cli_forget import forget_command
from .cli_mcp import mcp_command
from .doctor import find_violations
from .errors import ImportValidationError, InvalidArgument, TiermemError
from .maintenance import DEFAULT_PRUNE_BATCH, DEFAULT_RECALC_BATCH, Progress, upgrade_schema
from .memory import ConversationMemory
from .retention import preview_expired, prune_rule
from .tiers import calculate_tier
from .types import TierStats

__all__ = ["app", "main"]


app = typer.Typer(
    help="Tiered, token-aware conversation memory.",
    no_args_is_help=True,
    cls=OneLineUsageGroup,
)
db_app = typer.Typer(help="Schema management.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(events_app, name="events")
app.command("forget")(forget_command)
app.command()(search)
app.command()(projects)


def _print_version(value: bool) -> None:
    if value:
        from . import __version__

        console.print(f"tiermem {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Tiered, token-aware conversation memory."""


app.command("copy")(copy_command)


def sessions_table(memory: ConversationMemory, limit: int | None = None) -> Table:
    """The sessions of ``memory``'s project, each with its tier as of now (the stored
    tier is only as fresh as the last access or ``recalc``)."""
    now = memory.now()
    policy = memory.config.tier_policy
    listed = memory.list_sessions(limit=limit)
    # An id is never split or cut short (an operator copies it): its column does not
    # wrap, and the others are narrow enough for a 36-character id in 80 columns (a
    # time wraps between its date and its hour).
    longest = max((len(info.session_id) for info in listed), default=7)
    table = listing(
        Column("session", no_wrap=True, min_width=min(longest, 60)),
        Column("tier", no_wrap=True),
        Column("msgs", justify="right", no_wrap=True),
        Column("tokens", justify="right", no_wrap=True),
        Column("last access (UTC)", min_width=10),
        Column("uses", justify="right", no_wrap=True),
    )
    for info in listed:
        table.add_row(
            Text(info.session_id),
            calculate_tier(info.last_accessed, now, policy).value,
            str(info.total_entries),
            str(info.context_tokens),
            info.last_accessed.strftime("%Y-%m-%d %H:%M:%S"),
            str(info.access_count),
        )
    return table


@app.command()
def sessions(
    url: UrlOption = None,
    project: ProjectOption = "default",
    limit: Annotated[int, typer.Option(min=0, help="List at most this many sessions.")] = 50,
) -> None:
    """List sessions, most recently accessed first, with each one's tier as of now.
    Records no access."""
    with open_memory(url, project, read_only=True) as memory:
        table = sessions_table(memory, limit)
        console.print(table)
        if not table.row_count:
            empty_project_hint(memory, "sessions")


@app.command()
def show(
    session_id: Annotated[str, typer.Argument(help="The session to print.")],
    url: UrlOption = None,
    project: ProjectOption = "default",
) -> None:
    """Print a session's context as the model sees it, and its counters. Records no
    access: looking at a session does not change its tier."""
    with open_memory(url, project, read_only=True) as memory:
        view = memory.peek(session_id)
        text, stats = view.context, view.stats
        console.print(text, markup=False, highlight=False)
        console.print(
            f"\n{stats.total_entries} entries ({stats.active_entries} active, "
            f"{stats.compressed_entries} compressed), {stats.summaries} summaries, "
            f"{stats.context_tokens} context tokens of {stats.total_tokens} stored"
        )


@app.command("export")
def export_command(
    session_id: Annotated[str, typer.Argument(help="The session to export.")],
    url: UrlOption = None,
    project: ProjectOption = "default",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file, not stdout.")
    ] = None,
) -> None:
    """Write a session as canonical JSON (to stdout or a file). Records no access."""
    with open_memory(url, project, read_only=True) as memory:
        text = memory.export_session(session_id).to_json()
    if output is None:
        sys.stdout.write(text + "\n")
    else:
        with reported():
            output.write_text(text, encoding="utf-8")


def read_input(file: Path) -> bytes:
    """The bytes of ``file``, or of stdin for ``-``, read no further than the largest
    export an import takes.

    Raises:
        InvalidArgument: stdin is a terminal or empty.
        ImportValidationError: the input is larger than ``MAX_IMPORT_BYTES``.
        OSError: the file cannot be read.
    """
    if str(file) != "-":
        data = state.read_export(file)
    elif sys.stdin.isatty():
        raise InvalidArgument("stdin is a terminal: pipe an export into 'tiermem import -'")
    else:
        data = state.read_export(sys.stdin.buffer)
        if data is not None and not data.strip():
            raise InvalidArgument("nothing to import on stdin")
    if data is None:
        raise ImportValidationError(f"export larger than {state.MAX_IMPORT_BYTES} bytes")
    return data


@app.command("import")
def import_command(
    file: Annotated[
        Path, typer.Argument(help="A file written by 'tiermem export', or - for stdin.")
    ],
    url: UrlOption = None,
    project: ProjectOption = "default",
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace a session of the same id.")
    ] = False,
    session_id: Annotated[
        str | None, typer.Option("--as", help="Import under this session id.")
    ] = None,
) -> None:
    """Import a session written by 'tiermem export' (all or nothing)."""
    with reported():
        data = read_input(file)  # before the database: a bad file must create nothing
    with open_memory(url, project) as memory:
        try:
            imported = memory.import_session(data, overwrite=overwrite, session_id=session_id)
        except TiermemError as error:
            fail(str(error).replace("pass overwrite=True", "pass --overwrite"))
    console.print(f"imported session {imported!r}", markup=False, highlight=False)


@db_app.command("upgrade")
def db_upgrade(
    url: UrlOption = None,
    revision: Annotated[
        str, typer.Option(help="The schema revision to migrate to (default: the latest).")
    ] = "head",
) -> None:
    """Apply the schema migrations (idempotent); creates a missing SQLite file."""
    with reported():
        upgrade_schema(url, revision)
    console.print(f"schema at {escape(revision)}")


@app.command()
def doctor(url: UrlOption = None) -> None:
    """Check the storage invariants; exit code 3 when any is broken. Never creates
    a database."""
    with open_memory(url, read_only=True) as memory:
        problems = find_violations(memory.engine, now=memory.now())
    if problems:
        for problem in problems:
            console.print(f"[red]x[/red] {escape(problem)}")
        raise typer.Exit(3)
    console.print("[green]ok[/green]: every invariant holds")


@app.command()
def demo(
    db: Annotated[Path, typer.Option(help="SQLite file of the demo.")] = Path("tiermem-demo.db"),
    turns: Annotated[int, typer.Option(min=1, help="Conversation turns to play.")] = 24,
) -> None:
    """A conversation on an embedded SQLite file: compression, signals and tiers.
    Summaries come from the chat model named by TIERMEM_CHAT_MODEL (e.g.
    openai:gpt-4o-mini) when it is set, otherwise from the heuristic summarizer."""
    from .demo import DEMO_PROJECT, run_demo

    with reported():
        memory = run_demo(db, turns=turns, console=console)
        with memory:
            console.print(f"[bold]Sessions of project {DEMO_PROJECT!r}, tiers as of now:[/]")
            console.print(sessions_table(memory))
    url = f"sqlite:///{db}"
    console.print(
        f"Stored in {db} (project {DEMO_PROJECT!r}). Try next:\n"
        f"  tiermem sessions --url {url} --project {DEMO_PROJECT}\n"
        f"  tiermem show trip-planning --url {url} --project {DEMO_PROJECT}\n"
        f"  tiermem stats --url {url} --project {DEMO_PROJECT}",
        markup=False,
        highlight=False,
    )


# ------------------------------------------------------------------ access tiers

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
    with open_memory(url, project, read_only=True) as memory:
        tiers = memory.get_tier_stats()
        policy = memory.config.tier_policy
    if as_json:
        sys.stdout.write(json.dumps(dataclasses.asdict(tiers)) + "\n")
        return
    table = Table(
        "tier",
        "last accessed",
        "sessions",
        "share",
        "layer items",
        title=Text(f"project {project!r}"),
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
        int, typer.Option(min=1, help="Sessions, layer items or documents per transaction.")
    ] = DEFAULT_RECALC_BATCH,
    quiet: QuietOption = False,
) -> None:
    """Store every session's, layer item's and stored document's tier by its last
    access (set-based SQL, in batches)."""
    with open_memory(url, project) as memory, _progress("recalculating tiers", quiet) as progress:
        changed = memory.recalculate_tiers(batch_size=batch_size, progress=progress)
    if not quiet:
        console.print(
            f"{changed} sessions, layer items and documents of project {project!r} changed tier",
            markup=False,
        )


app.command()(embed)


@app.command()
def prune(
    url: UrlOption = None,
    project: ProjectOption = "default",
    limit: Annotated[
        int | None,
        typer.Option(min=0, help="Delete at most this many sessions, layer items and documents."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be deleted; delete nothing.")
    ] = False,
    batch_size: Annotated[
        int, typer.Option(min=1, help="Sessions, layer items or documents per transaction.")
    ] = DEFAULT_PRUNE_BATCH,
    quiet: QuietOption = False,
) -> None:
    """Delete expired sessions with their entries and summaries, then expired episodes
    (learned facts and rules are kept), oldest first, then stored documents whose time
    to live has passed; --dry-run lists what would go."""
    with open_memory(url, project) as memory, _progress("pruning", quiet) as progress:
        preview = preview_expired(memory) if dry_run and not quiet else None
        count = memory.prune_expired(
            limit=limit, dry_run=dry_run, batch_size=batch_size, progress=progress
        )
        rule = prune_rule(memory.config)
    if not quiet:
        verb = "would delete" if dry_run else "deleted"
        what = f"{count} expired sessions, layer items and documents of project {project!r}"
        lines = [f"{verb} {what}", *(preview.lines() if preview is not None else [])]
        console.print("\n".join([*lines, rule]), markup=False, soft_wrap=True)


# ------------------------------------------------------------------ evaluation

eval_app = typer.Typer(help="Measure how well search finds what was said.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


@eval_app.command("retrieval")
def eval_retrieval(
    dataset: Annotated[Path, typer.Argument(help="A dataset JSON file (benchmarks/recall/).")],
    k: Annotated[int, typer.Option("--k", min=1, help="Cut-off of every metric.")] = 10,
    url: Annotated[
        str | None,
        typer.Option(
            "--url", help="Store to load into (a fresh project); default: a temporary SQLite file."
        ),
    ] = None,
    limit_questions: Annotated[
        int | None, typer.Option(min=1, help="Ask only the first N questions.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    embeddings: Annotated[
        str | None,
        typer.Option(help="Search with these Embeddings too (module:attribute, as for embed)."),
    ] = None,
) -> None:
    """Load a labelled dataset into a fresh memory, ask its questions with search and
    print recall and nDCG per category, beside plain SQLite FTS5 BM25 baselines."""
    from .evaluation import load_dataset, run_retrieval  # only this command needs them
    from .evaluation.table import report_table

    with reported():
        data = load_dataset(dataset)
        extra = {} if embeddings is None else {"embeddings": load_embeddings(embeddings)}
        report = run_retrieval(
            data, k=k, url=url, limit_questions=limit_questions, memory_kwargs=extra
        )
    if as_json:
        sys.stdout.write(json.dumps(report.as_dict(), indent=2) + "\n")
        return
    console.print(report_table(report))
    console.print(
        f"loaded {report.turns} turns of {report.conversations} conversations "
        f"in {report.load_seconds:.1f} s"
    )


@eval_app.command("context")
def eval_context(
    dataset: Annotated[Path, typer.Argument(help="A dataset JSON file (benchmarks/context/).")],
    budgets: Annotated[
        str, typer.Option(help="Token budgets, comma-separated.")
    ] = "2000,4000,8000",
    url: Annotated[
        str | None,
        typer.Option("--url", help="Store to load into (a fresh project); default: SQLite."),
    ] = None,
    limit_questions: Annotated[
        int | None, typer.Option(min=1, help="Ask only the first N questions.")
    ] = None,
    replay_turns: Annotated[
        int, typer.Option(min=0, help="Turns of the prompt-cache replay (0: none).")
    ] = 400,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    embeddings: Annotated[
        str | None,
        typer.Option(help="Give the memory these Embeddings (module:attribute, as for embed)."),
    ] = None,
) -> None:
    """Load a labelled dataset at each token budget and judge the context each question
    gets (evidence and answer in it, tokens), beside plain buffers (of the budget and of
    60 % of it) and "last 10 turns + BM25"; then replay a conversation and count what a
    prompt cache could serve."""
    from .evaluation import load_dataset  # only this command needs them
    from .evaluation.context import run_context
    from .evaluation.table import context_tables

    with reported():
        try:
            sizes = [int(size) for size in budgets.split(",")]
        except ValueError as error:
            raise InvalidArgument(f"--budgets must be integers, got {budgets!r}") from error
        if not sizes or min(sizes) < 1:
            raise InvalidArgument("--budgets must be positive integers")
        data = load_dataset(dataset)
        extra = {} if embeddings is None else {"embeddings": load_embeddings(embeddings)}
        report = run_context(
            data,
            budgets=sizes,
            url=url,
            limit_questions=limit_questions,
            memory_kwargs=extra,
            replay_turns=replay_turns,
        )
    if as_json:
        sys.stdout.write(json.dumps(report.as_dict(), indent=2) + "\n")
        return
    for table in context_tables(report):
        console.print(table)


# ------------------------------------------------------------------ MCP server

app.command("mcp")(mcp_command)


reflow_help(app)


def main() -> None:
    """Entry point of the ``tiermem`` script."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
