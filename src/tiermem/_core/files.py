"""Reading an input whose size the caller bounds, before anything looks at it.

A size check after ``read()`` comes too late for an endless input (``/dev/zero``,
a pipe that never ends): the read itself exhausts the memory. Here a regular file
larger than the bound is refused by its size, and any other input is read only
up to one byte past the bound.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

__all__ = ["read_at_most"]


def read_at_most(source: str | Path | BinaryIO, limit: int) -> bytes | None:
    """The bytes of ``source`` (a path, or a binary stream such as stdin), or
    ``None`` when it holds more than ``limit`` bytes (then at most ``limit + 1``
    bytes were read).

    Raises:
        OSError: the file cannot be opened or read.
    """
    if not isinstance(source, str | Path):
        return _bounded(source, limit)
    with open(source, "rb") as file:
        try:
            size = os.fstat(file.fileno()).st_size
        except OSError:
            size = 0
        if size > limit:
            return None
        return _bounded(file, limit)


def _bounded(stream: BinaryIO, limit: int) -> bytes | None:
    data = stream.read(limit + 1)
    return None if len(data) > limit else data
