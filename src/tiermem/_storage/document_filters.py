"""LangGraph-style filters on stored JSON documents, compiled to one SQL condition
(SQLite ``json_extract``/``json_type``, PostgreSQL ``jsonb`` operators), so the
database evaluates them, never Python over rows."""

from __future__ import annotations

import functools
import json
import math
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from ..errors import InvalidArgument
from .document_schema import document_table
from .document_values import check_text, check_value

__all__ = ["FILTER_OPERATORS", "filter_clause"]

D = document_table.c

FILTER_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def _segments(path: str) -> list[str]:
    check_text(path, "a filter field")
    parts = path.split(".")
    if not path or any(not part for part in parts):
        raise InvalidArgument(
            f"Invalid filter key {path!r}: use dot-separated non-empty field names"
        )
    return parts


class _Target:
    """The JSON value at a path of ``value``, as SQL of one dialect."""

    def __init__(self, dialect: str, segments: list[str | int]) -> None:
        self.dialect = dialect
        self.segments = segments

    def child(self, segment: str | int) -> _Target:
        return _Target(self.dialect, [*self.segments, segment])

    # SQLite: JSON paths bound as parameters; PostgreSQL: a text[] path for #>.
    def sqlite_paths(self) -> list[str]:
        """The target's JSON path as SQLite reads it, each name quoted with JSON's
        escapes (``$."citt\\u00e0"``, ``$."a\\\\b"``). SQLite before 3.45 compares a
        path's names with the document's names as written, and documents are written
        with ASCII escapes; when a name is not ASCII, the path with the name as it is
        follows, for documents written without escapes. SQLite 3.45 and later read
        escapes on both sides, and either path finds the field."""
        paths = [self._sqlite_path(ascii_only=True)]
        raw = self._sqlite_path(ascii_only=False)
        return paths if raw == paths[0] else [*paths, raw]

    def _sqlite_path(self, *, ascii_only: bool) -> str:
        out = "$"
        for segment in self.segments:
            if isinstance(segment, int):
                out += f"[{segment}]"
                continue
            if '"' in segment and not _ESCAPED_PATHS:
                raise InvalidArgument(
                    f"filter field {segment!r}: SQLite {sqlite3.sqlite_version} cannot address"
                    " a name holding a double quote (3.45 and later can)"
                )
            out += "." + json.dumps(segment, ensure_ascii=ascii_only)
        return out

    def sqlite(self, function: Callable[[str], sa.ColumnElement[Any]]) -> sa.ColumnElement[Any]:
        """``function`` of the target's SQLite path: of the first path that finds it."""
        found = [function(path) for path in self.sqlite_paths()]
        return found[0] if len(found) == 1 else sa.func.coalesce(*found)

    def json_type(self) -> sa.ColumnElement[str]:
        if self.dialect == "sqlite":
            return self.sqlite(functools.partial(sa.func.json_type, D.value))
        return sa.func.jsonb_typeof(self.jsonb())

    def jsonb(self) -> sa.ColumnElement[Any]:
        path = sa.literal([str(s) for s in self.segments], postgresql.ARRAY(sa.Text))
        return D.value.op("#>", return_type=postgresql.JSONB)(path)

    def scalar(self) -> sa.ColumnElement[Any]:
        """SQLite: the value as SQL (text, number); PostgreSQL: the value as text."""
        if self.dialect == "sqlite":
            return self.sqlite(functools.partial(sa.func.json_extract, D.value))
        path = sa.literal([str(s) for s in self.segments], postgresql.ARRAY(sa.Text))
        return D.value.op("#>>", return_type=sa.Text)(path)


_TYPES = {
    "sqlite": {"string": "text", "object": "object", "array": "array"},
    "postgresql": {"string": "string", "object": "object", "array": "array"},
}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equals(target: _Target, expected: Any) -> sa.ColumnElement[bool]:
    """The value at ``target`` matches ``expected``: nested objects match as subsets
    (every given field), lists element by element, scalars by JSON equality."""
    kind = target.json_type()
    names = _TYPES[target.dialect]
    if isinstance(expected, Mapping):
        if any(str(name).startswith("$") for name in expected):
            return _operators(target, expected)
        for name in expected:
            check_text(str(name), "a filter field")
        return sa.and_(
            kind == names["object"],
            *(_equals(target.child(str(name)), inner) for name, inner in expected.items()),
        )
    if isinstance(expected, list | tuple):
        if target.dialect == "sqlite":
            length: sa.ColumnElement[bool] = target.sqlite(
                functools.partial(sa.func.json_array_length, D.value)
            ) == len(expected)
        else:  # jsonb_array_length raises on a non-array: only ask arrays
            length = sa.case(
                (kind == "array", sa.func.jsonb_array_length(target.jsonb()) == len(expected)),
                else_=sa.false(),
            )
        return sa.and_(
            kind == names["array"],
            length,
            *(_equals(target.child(i), inner) for i, inner in enumerate(expected)),
        )
    if expected is None:  # absent or JSON null, as a dict's .get() sees it
        return sa.or_(kind.is_(None), kind == "null")
    if isinstance(expected, bool):
        if target.dialect == "sqlite":
            return kind == ("true" if expected else "false")
        return sa.and_(kind == "boolean", target.scalar() == ("true" if expected else "false"))
    if _is_number(expected):
        return _compare(target, "=", expected)
    if isinstance(expected, str):
        if target.dialect == "postgresql" and "\x00" in expected:
            return sa.false()  # jsonb holds no NUL: no stored string equals it
        return sa.and_(kind == names["string"], _text(target) == expected)
    raise InvalidArgument(f"cannot filter on a {type(expected).__name__} value: {expected!r}")


def _text(target: _Target) -> sa.ColumnElement[Any]:
    value = target.scalar()
    return value.collate("C") if target.dialect == "postgresql" else value


def _compare(target: _Target, operator: str, operand: Any) -> sa.ColumnElement[bool]:
    """A numeric comparison with a JSON number, or a byte-wise one with a JSON string."""
    kind = target.json_type()
    if isinstance(operand, float) and not math.isfinite(operand):
        # NaN equals and orders with nothing; an infinity bounds every number.
        holds = operator != "=" and operand == operand and (operator[0] == "<") == (operand > 0)
        numeric = kind.in_(("integer", "real")) if target.dialect == "sqlite" else kind == "number"
        return sa.and_(numeric, sa.true() if holds else sa.false())
    if _is_number(operand):
        if target.dialect == "sqlite":
            return _sqlite_number(target, operator, operand)
        # jsonb numbers are exact numerics, and jsonb orders numbers as numerics: the
        # value is compared as jsonb with the operand as a jsonb number, never through
        # float8, so integers of any size compare exactly and nothing is cast per row.
        # A float is the decimal its JSON text (its repr) says, as a stored one is.
        text = str(operand) if isinstance(operand, int) else repr(operand)
        number = sa.cast(sa.literal(text, sa.Text), postgresql.JSONB)
        # jsonb orders types before values: compare numbers only.
        return sa.and_(kind == "number", target.jsonb().op(operator)(number))
    if isinstance(operand, str) and not isinstance(operand, bool):
        if target.dialect == "postgresql" and "\x00" in operand:
            # PostgreSQL text holds no NUL, and jsonb strings never do; NUL sorts first,
            # so against NUL-free strings "x > s" is "x > cut", "x < s" is "x <= cut".
            operand = operand[: operand.index("\x00")]
            operator = {">": ">", ">=": ">", "<": "<=", "<=": "<="}[operator]
        return sa.and_(
            kind == _TYPES[target.dialect]["string"], _text(target).op(operator)(operand)
        )
    raise InvalidArgument(
        f"{operator!r} compares numbers or strings, got {type(operand).__name__} {operand!r}"
    )


#: The integers SQLite holds as integers; ``json_extract`` gives larger ones as reals.
_INT64 = range(-(2**63), 2**63)

#: SQLite 3.45 and later (its JSON rewrite) read escapes in a path's quoted names, so a
#: name may hold a double quote.
_ESCAPED_PATHS = sqlite3.sqlite_version_info >= (3, 45)

#: SQLite's ``->`` (3.38 and later) gives a value's JSON text, the exact digits of an
#: integer beyond 64 bits.
_HAS_ARROW = sqlite3.sqlite_version_info >= (3, 38)

_ORDER = {
    "=": lambda c: c == 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


def _sqlite_number(target: _Target, operator: str, operand: int | float) -> sa.ColumnElement[bool]:
    """An exact numeric comparison on SQLite.

    ``json_extract`` gives a JSON integer within 64 bits as an SQL integer and any
    other number as a real (an integer beyond 64 bits rounded), and SQLite compares
    integers with reals exactly. Against an operand strictly inside the 64-bit range
    that is all it takes: a rounded integer beyond it is still on the same side of
    the operand. An operand at or beyond the range's ends is compared with a real as
    the double nearest it, the tie (the real equals that double) settled here
    exactly, and with a stored integer beyond 64 bits by that integer's JSON text
    (``->``, the digits Python wrote), by sign, length and digits.
    """
    kind = target.json_type()
    value = target.scalar()
    numeric = kind.in_(("integer", "real"))
    if -(2**63) < operand < 2**63:
        bound = sa.literal(operand, sa.Integer if isinstance(operand, int) else sa.Float)
        return sa.and_(numeric, value.op(operator)(bound))
    exact = int(operand)  # a float this large is an integer
    if isinstance(operand, int) and operand not in _INT64:
        try:
            nearest = float(operand)
        except OverflowError:  # beyond every double: every real is on one side of it
            nearest = math.inf if operand > 0 else -math.inf
        tie = math.isfinite(nearest) and _ORDER[operator](
            (int(nearest) > operand) - (int(nearest) < operand)
        )
        ordinary: sa.ColumnElement[bool] = sa.case(
            (value == sa.literal(nearest, sa.Float), sa.true() if tie else sa.false()),
            else_=value.op(operator)(sa.literal(nearest, sa.Float)),
        )
    else:
        kind_of = sa.Integer if isinstance(operand, int) else sa.Float
        ordinary = value.op(operator)(sa.literal(operand, kind_of))
    if not _HAS_ARROW:  # no JSON text of a value: wide integers compare rounded
        return sa.and_(numeric, ordinary)
    text = target.sqlite(D.value.op("->", return_type=sa.Text))
    return sa.case(
        (sa.and_(kind == "integer", sa.func.typeof(value) == "real"), _wide(text, operator, exact)),
        (numeric, ordinary),
        else_=sa.false(),
    )


def _wide(text: sa.ColumnElement[Any], operator: str, exact: int) -> Any:
    """``text`` (the digits of an integer beyond 64 bits) ``operator`` ``exact``."""
    negative = sa.func.substr(text, 1, 1) == "-"
    wanted = str(exact)
    length = sa.func.length(text)
    equal = text == wanted
    if exact >= 0:  # larger: positive and longer, or as long and later in byte order
        above = sa.and_(
            sa.not_(negative),
            sa.or_(length > len(wanted), sa.and_(length == len(wanted), text > wanted)),
        )
    else:  # larger: positive, or negative and shorter, or as long and earlier
        above = sa.or_(
            sa.not_(negative),
            length < len(wanted),
            sa.and_(length == len(wanted), text < wanted),
        )
    return {
        "=": equal,
        ">": above,
        ">=": sa.or_(above, equal),
        "<": sa.and_(sa.not_(above), sa.not_(equal)),
        "<=": sa.not_(above),
    }[operator]


_SQL_OPS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _operators(target: _Target, spec: Mapping[str, Any]) -> sa.ColumnElement[bool]:
    conditions = []
    for operator, operand in spec.items():
        if operator not in FILTER_OPERATORS:
            known = ", ".join(sorted(FILTER_OPERATORS))
            raise InvalidArgument(f"unsupported filter operator {operator!r} (use {known})")
        if operator == "$eq":
            conditions.append(_equals(target, operand))
        elif operator == "$ne":
            # Absent fields differ from every value, as in LangGraph's stores.
            conditions.append(sa.not_(sa.func.coalesce(_equals(target, operand), sa.false())))
        else:
            conditions.append(_compare(target, _SQL_OPS[operator], operand))
    return sa.and_(sa.true(), *conditions)


def filter_clause(dialect: str, spec: Mapping[str, Any] | None) -> sa.ColumnElement[bool]:
    """The SQL condition of a filter: every entry must hold.

    Keys are field paths (``"a.b"``: field ``b`` of object ``a``); a value is
    matched for equality (objects as subsets, lists element-wise), or is an object
    of operators (``$eq $ne $gt $gte $lt $lte``; ordering operators compare numbers
    numerically and strings byte-wise, never across types).

    Raises:
        InvalidArgument: for an unknown operator, an empty path segment, an operand
            that cannot be compared, text that is not UTF-8, a number beyond a
            double's range or nesting deeper than ``MAX_DEPTH``.
    """
    if not spec:
        return sa.true()
    if not isinstance(spec, Mapping):
        raise InvalidArgument(f"filter must be a mapping, got {type(spec).__name__}")
    check_value(spec, "a filter", stored=False)
    try:
        text = json.dumps(spec, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):  # not JSON: built (and refused) without the cache
        return _build(dialect, spec)
    return _cached(dialect, text)


# Building a filter's SQL costs more than running it against a namespace's documents,
# and an application sends the same few filters again and again. Keyed by the JSON
# text, which tells True from 1 and 1.0 from 1 as the filter does.
@functools.lru_cache(maxsize=256)
def _cached(dialect: str, text: str) -> sa.ColumnElement[bool]:
    return _build(dialect, json.loads(text))


def _build(dialect: str, spec: Mapping[str, Any]) -> sa.ColumnElement[bool]:
    conditions = [
        sa.func.coalesce(_equals(_Target(dialect, list(_segments(str(path)))), expected), False)
        for path, expected in spec.items()
    ]
    return sa.and_(sa.true(), *conditions)
