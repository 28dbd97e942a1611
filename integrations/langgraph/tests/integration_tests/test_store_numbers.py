"""Numeric filters compare exactly on both backends: integers of any size a stored value
may hold (filtering on one user's 64-bit id never returns another user's items), and
one number that was stored beyond a double's range never fails anyone's search."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from tiermem_langgraph import TieredStore

#: Integers around every boundary where a float or a 64-bit integer loses them.
INTEGERS = [
    0,
    7,
    -7,
    2**53,
    2**53 + 1,
    -(2**53) - 1,
    2**63 - 2,
    2**63 - 1,
    2**63,
    2**63 + 1,
    -(2**63),
    -(2**63) + 1,
    -(2**63) - 1,
    2**64,
    2**64 + 1,
    10**30,
    10**30 + 1,
    -(10**30),
    -(10**30) - 1,
    2**1023,
    2**1023 + 1,
]
#: Floats whose JSON text is their exact value (so both backends agree what they are).
FLOATS = [0.5, -2.25, 7.0, 1e19, -1e19]
OTHERS: list[Any] = ["7", True, None, [7], {"n": 7}]
#: Operands no stored number equals: beyond a double, infinite, not a number.
BEYOND = [10**400, -(10**400), math.inf, -math.inf, math.nan]

OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@pytest.fixture(name="numbers")
def fixture_numbers(store: TieredStore) -> TieredStore:
    """One item per value, its value in field ``id``, each under its own user."""
    for index, value in enumerate([*INTEGERS, *FLOATS, *OTHERS]):
        store.put(("users", f"u{index}"), "profile", {"id": value})
    return store


def _found(store: TieredStore, spec: dict[str, Any]) -> set[str]:
    return {item.namespace[1] for item in store.search(("users",), filter=spec, limit=100)}


def _expected(test: Callable[[Any, Any], bool], operand: Any) -> set[str]:
    values = [*INTEGERS, *FLOATS, *OTHERS]
    return {f"u{i}" for i, value in enumerate(values) if _is_number(value) and test(value, operand)}


def test_numeric_filters_compare_exactly(numbers: TieredStore) -> None:
    """Every operator, with every boundary integer and float (and numbers beyond a
    double, infinities and NaN) as operand, selects exactly the items Python's exact
    comparison selects, on both backends."""
    everyone = {f"u{i}" for i in range(len(INTEGERS) + len(FLOATS) + len(OTHERS))}
    for operand in INTEGERS + FLOATS + BEYOND:
        equal = _expected(operator.eq, operand)
        assert _found(numbers, {"id": operand}) == equal, operand
        assert _found(numbers, {"id": {"$ne": operand}}) == everyone - equal, operand
        for name, test in OPERATORS.items():
            assert _found(numbers, {"id": {name: operand}}) == _expected(test, operand), (
                name,
                operand,
            )


def test_a_64_bit_id_finds_its_own_user_only(store: TieredStore) -> None:
    """Ids one apart above 2**53 (equal as doubles) each find their own user's items."""
    base = 2**62 + 12_345
    for offset in range(8):
        store.put(("users", f"user{offset}"), "memo", {"user_id": base + offset})
    for offset in range(8):
        found = store.search(("users",), filter={"user_id": base + offset})
        assert [item.namespace for item in found] == [("users", f"user{offset}")]


def _store_raw(store: TieredStore, namespace: str, key: str, text: str) -> None:
    """Rewrite a stored value as JSON text, as a version that accepted any number (or
    another writer of the table) left it."""
    engine = store.memory.engine
    value = "CAST(:text AS jsonb)" if engine.dialect.name == "postgresql" else ":text"
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                f"UPDATE tiermem_document SET value = {value} "
                "WHERE namespace = :namespace AND key = :key"
            ),
            {"text": text, "namespace": namespace, "key": key},
        )


def test_a_number_beyond_a_double_never_fails_other_searches(store: TieredStore) -> None:
    """A stored 10**400 (and -10**400) leaves every numeric filter of every user
    working, and compares as the number it is."""
    store.put(("users", "mallory"), "n", {"n": 0})
    store.put(("users", "eve"), "n", {"n": 0})
    store.put(("users", "ada"), "n", {"n": 5})
    _store_raw(store, "users.mallory", "n", '{"n": 1' + "0" * 400 + "}")
    _store_raw(store, "users.eve", "n", '{"n": -1' + "0" * 400 + "}")

    def users(spec: dict[str, Any]) -> set[str]:
        return {item.namespace[1] for item in store.search((), filter=spec)}

    assert users({"n": 5}) == {"ada"}
    assert users({"n": {"$gt": 5}}) == {"mallory"}
    assert users({"n": {"$gte": 10**300}}) == {"mallory"}
    assert users({"n": {"$lt": 2**1023}}) == {"ada", "eve"}
    assert users({"n": {"$lt": -(10**300)}}) == {"eve"}
    assert users({"n": {"$lte": 0.5}}) == {"eve"}
    assert users({"n": {"$ne": 5}}) == {"mallory", "eve"}
    assert [item.key for item in store.search(("users", "ada"), filter={"n": 5})] == ["n"]
