"""Test-only failpoints: ``TIERMEM_FAILPOINTS="name=action,name2=action"``.

Actions: ``pause`` (write ``$TIERMEM_FAILPOINT_DIR/<name>.<pid>.hit`` and sleep
until killed) and ``raise:<ExceptionName>`` (``OperationalError`` raises
SQLAlchemy's, anything else a builtin). Without the variable, :func:`hit` is a
dictionary lookup on an empty dict.
"""

from __future__ import annotations

import builtins
import os
import time
from pathlib import Path

import sqlalchemy.exc

__all__ = ["hit"]


def _parse(spec: str) -> dict[str, str]:
    points: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, action = item.partition("=")
        points[name] = action
    return points


_POINTS = _parse(os.environ.get("TIERMEM_FAILPOINTS", ""))


def hit(name: str) -> None:
    """Run the action configured for failpoint ``name``, if any."""
    action = _POINTS.get(name)
    if action is None:
        return
    if action == "pause":
        directory = Path(os.environ.get("TIERMEM_FAILPOINT_DIR", "."))
        (directory / f"{name}.{os.getpid()}.hit").write_text(name)
        while True:
            time.sleep(3600)
    if action.startswith("raise:"):
        exc_name = action.removeprefix("raise:")
        if exc_name == "OperationalError":
            raise sqlalchemy.exc.OperationalError(f"failpoint {name}", None, Exception(name))
        raise getattr(builtins, exc_name, RuntimeError)(f"failpoint {name}")
