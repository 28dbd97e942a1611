"""What the ``tiermem`` commands share: the console, the common options, and
opening a memory with errors reported as one line and exit code 1."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table
from typer._click.exceptions import NoArgsIsHelpError, UsageError  # typer's own click
from typer.core import TyperGroup

from .errors import TiermemError
from .memory import ConversationMemory

__all__ = [
    "OneLineUsageGroup",
    "ProjectOption",
    "QuietOption",
    "UrlOption",
    "console",
    "err_console",
    "fail",
    "listing",
    "open_memory",
    "plural",
    "reflow_help",
    "reported",
    "singular",
]

console = Console()
err_console = Console(stderr=True)

UrlOption = Annotated[
    str | None, typer.Option("--url", envvar="TIERMEM_URL", help="SQLAlchemy URL of the store.")
]
ProjectOption = Annotated[str, typer.Option("--project", help="Project (namespace) of sessions.")]


def fail(message: str) -> NoReturn:
    """Print ``message`` as one line on stderr and exit with code 1."""
    line = " ".join(message.split())  # driver messages can span several lines
    err_console.print(f"[red]error:[/red] {escape(line)}", soft_wrap=True, highlight=False)
    raise typer.Exit(1)


@contextmanager
def reported() -> Iterator[None]:
    """Turn the errors an operator can cause (tiermem's, database failures
    included, and the file system's) into one line on stderr and exit code 1."""
    try:
        yield
    except TiermemError as error:
        fail(str(error))
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        fail(f"cannot access{where}: {error.strerror or error}")


def check_exists(url: str | None, project: str = "default") -> None:
    """Refuse a database that does not exist or has no tiermem tables, creating
    nothing (a missing SQLite file stays missing).

    Raises:
        StorageUnavailable: no such SQLite file, or no tiermem tables.
        InvalidArgument: for a URL that does not parse.
    """
    with ConversationMemory(url, project=project, read_only=True) as probe:
        probe.database.ensure_schema()  # read-only: checks, creates nothing


@contextmanager
def open_memory(
    url: str | None,
    project: str = "default",
    *,
    read_only: bool = False,
    existing: bool = False,
    **kwargs: Any,
) -> Iterator[ConversationMemory]:
    """A memory for one command; errors become one line on stderr and exit code 1.

    Args:
        read_only: the command only looks: a read-only memory (a missing SQLite
            file, or a database without tiermem's tables, is an error; nothing is
            created, no access recorded).
        existing: the command writes, but only to a database that has tiermem's
            tables: a missing one is an error instead of being created.
    """
    with reported():
        if existing and not read_only:
            check_exists(url, project)
        memory = ConversationMemory(url, project=project, read_only=read_only, **kwargs)
        try:
            if read_only:
                memory.database.ensure_schema()  # checks the tables before any output
            yield memory
        finally:
            memory.close()


def listing(*columns: Column | str, expand: bool = False) -> Table:
    """A table of listed things, with no vertical borders or edge padding: as many
    characters as possible go to the data, so that 80 columns hold a listing."""
    return Table(
        *columns,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        expand=expand,
    )


QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="Print nothing unless something fails (cron).")
]


class OneLineUsageGroup(TyperGroup):
    """The root command group: a usage error (an unknown option, a bad value, a
    missing argument) is one line on stderr and exit code 2, the convention of
    Click and argparse, instead of a boxed usage text."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except NoArgsIsHelpError as error:
            error.show()  # the help itself, not an error
            sys.exit(error.exit_code)
        except UsageError as error:
            where = f" (see '{error.ctx.command_path} --help')" if error.ctx else ""
            line = " ".join(error.format_message().split())
            err_console.print(
                f"[red]error:[/red] {escape(line)}{escape(where)}", soft_wrap=True, highlight=False
            )
            sys.exit(error.exit_code)
        except typer.TyperException as error:
            fail(error.format_message())
        except typer.Abort:
            err_console.print("[red]error:[/red] aborted", highlight=False)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def reflow_help(app: typer.Typer) -> None:
    """Give every command of ``app`` (and of its sub-apps) its docstring as help with
    each paragraph on one line, so that the terminal wraps it at its own width rather
    than at the docstring's line breaks (which split sentences)."""
    for command in app.registered_commands:
        if command.help is None and command.callback is not None and command.callback.__doc__:
            paragraphs = inspect.cleandoc(command.callback.__doc__).split("\n\n")
            command.help = "\n\n".join(" ".join(p.split()) for p in paragraphs)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            reflow_help(group.typer_instance)


#: Plurals that are not the noun and an ``s``, by their singular.
_IRREGULAR = {"entry": "entries", "summary": "summaries", "entry vector": "entry vectors"}


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` and ``noun`` (singular), its plural when ``count`` is not 1:
    ``nouns`` if given, else a known irregular one, else the noun and an ``s``."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {nouns or _IRREGULAR.get(noun) or noun + 's'}"


def singular(nouns: str) -> str:
    """The singular of a plural ``plural`` makes (``entries`` -> ``entry``)."""
    for noun, many in _IRREGULAR.items():
        if nouns == many:
            return noun
    return nouns[:-1] if nouns.endswith("s") else nouns
