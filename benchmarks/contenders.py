"""Registry of contenders: name -> factory.

Each factory imports its contender's module when called, so a child process
loads only the library it measures (which keeps peak RSS per contender honest)
and a package that is missing or broken becomes that contender's error rather
than the harness's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from base import Contender

Factory = Callable[[Path], Contender[Any]]
"""Builds a contender; its argument is a scratch directory for database files."""


def _tiermem_sqlite(workdir: Path) -> Contender[Any]:
    from tiermem_contender import TiermemContender

    return TiermemContender(url=f"sqlite:///{workdir / 'tiermem.db'}")


def _tiermem_postgres(workdir: Path) -> Contender[Any]:
    from tiermem_contender import TiermemPostgresContender

    return TiermemPostgresContender()


def _token_buffer(workdir: Path) -> Contender[Any]:
    from lc_contenders import ClassicMemoryContender

    return ClassicMemoryContender(summarize=False)


def _summary_buffer(workdir: Path) -> Contender[Any]:
    from lc_contenders import ClassicMemoryContender

    return ClassicMemoryContender(summarize=True)


def _trim_messages(workdir: Path) -> Contender[Any]:
    from lc_contenders import TrimMessagesContender

    return TrimMessagesContender()


def _summarization_middleware(workdir: Path) -> Contender[Any]:
    from lc_contenders import SummarizationMiddlewareContender

    return SummarizationMiddlewareContender()


def _llamaindex(workdir: Path) -> Contender[Any]:
    from llamaindex_contender import LlamaIndexContender

    return LlamaIndexContender(workdir)


def _floor_tiktoken(workdir: Path) -> Contender[Any]:
    from floors import TiktokenFloor

    return TiktokenFloor()


def _floor_sqlite(workdir: Path) -> Contender[Any]:
    from floors import SqliteFloor

    return SqliteFloor(workdir)


CONTENDERS: dict[str, Factory] = {
    "tiermem-sqlite": _tiermem_sqlite,
    "tiermem-postgres": _tiermem_postgres,
    "lc-token-buffer": _token_buffer,
    "lc-summary-buffer": _summary_buffer,
    "lc-trim-messages": _trim_messages,
    "lc-summarization-mw": _summarization_middleware,
    "llamaindex-memory": _llamaindex,
    "floor-tiktoken": _floor_tiktoken,
    "floor-sqlite": _floor_sqlite,
}
"""Every contender by name, in the order the harness runs and reports them."""

BASELINE = "tiermem-sqlite"
"""The contender the report's ratio columns are relative to."""
