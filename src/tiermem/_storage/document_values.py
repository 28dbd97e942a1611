"""What a stored JSON document (and a filter on documents) may hold, checked before
anything is written or any SQL is built, so bad input is ``InvalidArgument`` on both
backends and never a driver's ``UnicodeEncodeError``, a ``RecursionError`` or a
number one backend stores and another reader cannot compare.

* Text is UTF-8 (no lone surrogates); stored text holds no NUL, which PostgreSQL's
  ``jsonb`` and ``text`` cannot hold (refused on SQLite too, so both backends take
  the same documents). A filter may look for a string with NUL: it matches nothing.
* Stored numbers are those a double holds the range of (JSON interoperability, and
  SQLite's ``json_extract``): floats finite, integers of magnitude below 2**1024.
  A filter may compare with any float (NaN matches nothing, infinities bound every
  number) and any integer of up to :data:`MAX_FILTER_INT_BITS` bits, exactly
  (``document_filters``).
* Values nest at most :data:`MAX_DEPTH` levels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgument

__all__ = ["MAX_DEPTH", "MAX_FILTER_INT_BITS", "check_number", "check_text", "check_value"]

#: The deepest nesting of objects and lists a document or filter may have (as deep
#: as common JSON parsers read by default; far below Python's recursion limit).
MAX_DEPTH = 128

#: The widest integer a filter may compare with (about 4,200 digits: Python writes
#: integers of up to 4,300 digits as text by default).
MAX_FILTER_INT_BITS = 14_000


def check_text(text: str, what: str, *, stored: bool = True) -> None:
    """Refuse text that is not UTF-8 (a lone surrogate) or, if ``stored``, holds NUL."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidArgument(f"{what} is not valid UTF-8 text: {error.reason}") from error
    if stored and "\x00" in text:
        raise InvalidArgument(f"{what} may not contain NUL (\\x00)")


def check_number(value: int | float, what: str) -> None:
    """Refuse a non-finite float or an integer beyond the range of a double."""
    try:
        as_float = float(value)
    except OverflowError as error:
        raise InvalidArgument(f"{what}: the integer is beyond the range of a double") from error
    if as_float != as_float or as_float in (float("inf"), float("-inf")):
        raise InvalidArgument(f"{what}: {value!r} is not a finite number")


def check_value(value: Any, what: str, *, stored: bool = True) -> None:
    """Check every string, number and nesting level of a JSON ``value`` (a stored one
    if ``stored``, else a filter), without recursion: a value nested past Python's
    limit is refused, not a crash.

    Other types are left to the caller (a stored value is then serialized, which
    refuses them; a filter refuses operands it cannot compare).
    """
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            check_text(item, what, stored=stored)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int | float):
            if stored:
                check_number(item, what)
            elif isinstance(item, int) and item.bit_length() > MAX_FILTER_INT_BITS:
                raise InvalidArgument(f"{what}: an integer wider than {MAX_FILTER_INT_BITS} bits")
        elif isinstance(item, Mapping | list | tuple):
            if depth >= MAX_DEPTH:
                raise InvalidArgument(f"{what} nests deeper than {MAX_DEPTH} levels")
            if isinstance(item, Mapping):
                for key, inner in item.items():
                    pending.append((key, depth + 1))
                    pending.append((inner, depth + 1))
            else:
                pending.extend((inner, depth + 1) for inner in item)
