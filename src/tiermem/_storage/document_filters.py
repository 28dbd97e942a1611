"""LangGraph-style filters on stored JSON documents, compiled to one SQL condition
(SQLite ``json_extract``/``json_type``, PostgreSQL ``jsonb`` operators), so the
database evaluates them, never Python over rows."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
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

    # SQLite: a JSON path bound as a parameter; PostgreSQL: a text[] path for #>.
    def sqlite_path(self) -> str:
        out = "$"
        for segment in self.segments:
            if isinstance(segment, int):
                out += f"[{segment}]"
            elif '"' in segment or "\\" in segment:
                raise InvalidArgument(f"filter field {segment!r} may not contain quotes")
            else:
                out += f'."{segment}"'
        return out

    def json_type(self) -> sa.ColumnElement[str]:
        if self.dialect == "sqlite":
            return sa.func.json_type(D.value, self.sqlite_path())
        return sa.func.jsonb_typeof(self.jsonb())

    def jsonb(self) -> sa.ColumnElement[Any]:
        path = sa.literal([str(s) for s in self.segments], postgresql.ARRAY(sa.Text))
        return D.value.op("#>", return_type=postgresql.JSONB)(path)

    def scalar(self) -> sa.ColumnElement[Any]:
        """SQLite: the value as SQL (text, number); PostgreSQL: the value as text."""
        if self.dialect == "sqlite":
            return sa.func.json_extract(D.value, self.sqlite_path())
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
            length: sa.ColumnElement[bool] = sa.func.json_array_length(
                D.value, target.sqlite_path()
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
    if _is_number(operand):
        if target.dialect == "sqlite":
            number = sa.cast(target.scalar(), sa.Float)
            return sa.and_(kind.in_(("integer", "real")), number.op(operator)(float(operand)))
        number = sa.cast(target.scalar(), postgresql.DOUBLE_PRECISION)
        # A CASE: PostgreSQL does not promise to test the type before the cast.
        return sa.case((kind == "number", number.op(operator)(float(operand))), else_=sa.false())
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
