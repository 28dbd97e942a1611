"""What the ``tiermem`` commands share: the console, the common options, and
opening a memory with errors reported as one line and exit code 1."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from ._storage.database import DEFAULT_URL, DRIVER_ERRORS, parse_url, translate_error
from .errors import InvalidArgument, TiermemError
from .memory import ConversationMemory

__all__ = [
    "ProjectOption",
    "QuietOption",
    "UrlOption",
    "check_exists",
    "console",
    "err_console",
    "fail",
    "open_memory",
    "reported",
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
    """Turn the errors an operator can cause (tiermem's, the file system's, the
    driver's) into one line on stderr and exit code 1."""
    try:
        yield
    except TiermemError as error:
        fail(str(error))
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        fail(f"cannot access{where}: {error.strerror or error}")
    except DRIVER_ERRORS as error:
        fail(str(translate_error(error)))


def check_exists(url: str | None) -> None:
    """Refuse a SQLite URL whose file does not exist: a read must not create one.

    Raises:
        InvalidArgument: for a URL that does not parse or a missing SQLite file.
    """
    parsed = parse_url(url or DEFAULT_URL)
    path = parsed.database
    if parsed.get_backend_name() == "sqlite" and path not in (None, "", ":memory:"):
        if not path.startswith("file:") and not Path(path).is_file():
            raise InvalidArgument(f"no database at {path}")


@contextmanager
def open_memory(
    url: str | None, project: str = "default", *, read_only: bool = False, **kwargs: Any
) -> Iterator[ConversationMemory]:
    """A memory for one command; errors become one line on stderr and exit code 1.

    Args:
        read_only: the command only reads: a missing SQLite file, or a database
            without tiermem's tables, is an error instead of being created.
    """
    with reported():
        if read_only:
            check_exists(url)
        memory = ConversationMemory(url, project=project, **kwargs)
        try:
            if read_only and not memory.database.has_tables():
                # The first operation would create the tables: a read must not.
                where = memory.engine.url.render_as_string(hide_password=True)
                raise InvalidArgument(f"no tiermem tables in {where}: nothing stored yet")
            yield memory
        finally:
            memory.close()


QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="Print nothing unless something fails (cron).")
]
