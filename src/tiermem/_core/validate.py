"""Argument checks shared by every public method: one function per kind."""

from __future__ import annotations

from ..errors import InvalidArgument

__all__ = ["MAX_SQL_INT", "check_int", "check_optional_int"]

#: SQL integers are signed 64-bit: larger limits and offsets are clamped to this.
MAX_SQL_INT = 2**62


def check_int(name: str, value: object, *, minimum: int = 0, maximum: int | None = None) -> int:
    """``value`` if it is an int (not a bool) within ``minimum``..``maximum``.

    Raises:
        InvalidArgument: for anything else, naming the argument.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgument(f"{name} must be an int >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise InvalidArgument(f"{name} must be an int <= {maximum}, got {value!r}")
    return value


def check_optional_int(name: str, value: object, *, minimum: int = 0) -> int | None:
    """:func:`check_int`, letting ``None`` through."""
    return None if value is None else check_int(name, value, minimum=minimum)
