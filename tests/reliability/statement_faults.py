"""Fail the N-th SQL statement an engine runs (T34 and the state machine's fault rules)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine


@dataclass
class Fault:
    """Raise OperationalError on statement ``at`` (1-based), or on every one from it."""

    at: int
    always: bool = False
    seen: int = 0
    fired: int = 0

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        self.seen += 1
        if self.seen == self.at or (self.always and self.seen > self.at):
            self.fired += 1
            raise sa.exc.OperationalError(statement, None, Exception("disk I/O error"))


@contextmanager
def injected(engine: Engine, fault: Fault) -> Iterator[Fault]:
    """Install ``fault`` on every statement of ``engine`` for the block."""
    sa.event.listen(engine, "before_cursor_execute", fault)
    try:
        yield fault
    finally:
        sa.event.remove(engine, "before_cursor_execute", fault)
