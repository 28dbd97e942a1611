"""``tiermem events``: read, follow and prune the durable change feed."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Annotated

import typer

from .cli_browse import empty_project_hint
from .cli_common import ProjectOption, QuietOption, UrlOption, console, open_memory
from .feed import ChangeEvent

__all__ = ["events_app"]

events_app = typer.Typer(help="The durable change feed.", no_args_is_help=True)


def _line(event: ChangeEvent) -> str:
    return json.dumps(
        {
            "position": event.position,
            "kind": event.kind,
            "project": event.project,
            "session_id": event.session_id,
            "created_at": event.created_at.isoformat(),
            "version": event.version,
            "payload": event.payload,
        },
        sort_keys=True,
    )


@events_app.command("tail")
def tail(
    url: UrlOption = None,
    project: ProjectOption = "default",
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep waiting for new events.")
    ] = False,
    consumer: Annotated[
        str | None,
        typer.Option(
            help="Start after this consumer's acknowledged position and acknowledge "
            "each event once printed (resumable)."
        ),
    ] = None,
    after: Annotated[str | None, typer.Option(help="Start after this position instead.")] = None,
    limit: Annotated[
        int, typer.Option(min=1, help="Without --follow: print at most this many events.")
    ] = 100,
) -> None:
    """Print events as JSON lines, oldest first: from the oldest kept (or after
    --after, or after the --consumer's position), and with --follow every new one
    as it commits, until interrupted."""
    with open_memory(url, project, read_only=not consumer and not follow) as memory:
        feed = memory.feed
        if not follow:
            start = after if after is not None or consumer is None else feed.position(consumer)
            events = feed.changes(start, limit=limit)
            for event in events:
                console.print(_line(event), markup=False, highlight=False, soft_wrap=True)
            if consumer is not None and events:
                feed.ack(consumer, events[-1])
            if not events and start is None:
                empty_project_hint(memory, "events")  # only if the project has none
            return
        try:
            for event in feed.follow(consumer, after=after):
                console.print(_line(event), markup=False, highlight=False, soft_wrap=True)
                if consumer is not None:
                    feed.ack(consumer, event)
        except KeyboardInterrupt:
            return


@events_app.command("prune")
def prune(
    url: UrlOption = None,
    project: ProjectOption = "default",
    older_than_days: Annotated[
        float | None,
        typer.Option(
            "--older-than-days",
            min=0,
            help="Delete events older than this (default: the configured retention, 7 days).",
        ),
    ] = None,
    quiet: QuietOption = False,
) -> None:
    """Delete change-feed events past their retention (tiermem prune does it too)."""
    age = None if older_than_days is None else timedelta(days=older_than_days)
    with open_memory(url, project) as memory:
        count = memory.feed.prune(age)
    if not quiet:
        console.print(f"deleted {count} events of project {project!r}", markup=False)
