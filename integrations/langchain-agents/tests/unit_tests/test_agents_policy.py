"""The pure trigger and keep rules mirror SummarizationMiddleware."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from tiermem_agents._policy import (
    keep_count,
    normalize_trigger,
    should_compress,
    validate_context_size,
)


def _length(messages: Sequence[BaseMessage]) -> int:
    """A counter where each message costs its number of characters."""
    return sum(len(str(m.content)) for m in messages)


def test_normalize_accepts_every_summarization_form() -> None:
    """Tuples, AND dicts and mixed OR lists normalize to clauses; None to none."""
    assert normalize_trigger(None) == []
    assert normalize_trigger(("tokens", 3000)) == [{"tokens": 3000}]
    assert normalize_trigger({"tokens": 4000, "messages": 10}) == [{"tokens": 4000, "messages": 10}]
    assert normalize_trigger([("fraction", 0.8), {"messages": 100}]) == [
        {"fraction": 0.8},
        {"messages": 100},
    ]


@pytest.mark.parametrize(
    "trigger",
    [
        ("tokens", 0),
        ("fraction", 1.5),
        ("words", 10),
        {},
        {"messages": True},
        {"tokens": 2.5},
        {"bytes": 3},
    ],
)
def test_normalize_rejects_bad_values(trigger: Any) -> None:
    """Out-of-range values, unknown metrics, booleans and float counts raise ValueError."""
    with pytest.raises(ValueError):
        normalize_trigger(trigger)


def test_normalize_rejects_bad_types() -> None:
    """A trigger that is neither tuple, dict nor list raises TypeError."""
    with pytest.raises(TypeError):
        normalize_trigger("tokens")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        normalize_trigger(["tokens"])  # type: ignore[list-item]


def test_validate_context_size_checks_keep() -> None:
    """keep values follow the same rules as trigger values."""
    assert validate_context_size(("messages", 3), "keep") == ("messages", 3)
    with pytest.raises(ValueError, match="keep"):
        validate_context_size(("messages", -1), "keep")


def test_clauses_are_and_within_or_across() -> None:
    """A clause needs all its thresholds; any met clause triggers."""
    clauses = normalize_trigger([{"tokens": 100, "messages": 5}, ("messages", 50)])
    assert not should_compress(clauses, messages=4, tokens=500, max_input_tokens=None)
    assert should_compress(clauses, messages=5, tokens=100, max_input_tokens=None)
    assert should_compress(clauses, messages=50, tokens=0, max_input_tokens=None)


def test_fraction_needs_a_context_size() -> None:
    """A fraction clause is met at that share of max_input_tokens, never without one."""
    clauses = normalize_trigger(("fraction", 0.5))
    assert not should_compress(clauses, messages=1, tokens=10**6, max_input_tokens=None)
    assert not should_compress(clauses, messages=1, tokens=499, max_input_tokens=1000)
    assert should_compress(clauses, messages=1, tokens=500, max_input_tokens=1000)


def test_keep_messages_is_capped_by_the_history() -> None:
    """("messages", n) keeps n, or everything when there are fewer."""
    history: list[BaseMessage] = [HumanMessage("a"), AIMessage("b")]
    assert keep_count(("messages", 1), history, _length, None) == 1
    assert keep_count(("messages", 5), history, _length, None) == 2


def test_keep_tokens_keeps_the_longest_fitting_suffix() -> None:
    """("tokens", n) keeps the newest messages whose total fits n, at least one."""
    history: list[BaseMessage] = [HumanMessage("x" * size) for size in (50, 30, 20, 10)]
    assert keep_count(("tokens", 35), history, _length, None) == 2
    assert keep_count(("tokens", 1000), history, _length, None) == 4
    assert keep_count(("tokens", 5), history, _length, None) == 1
    assert keep_count(("tokens", 5), [], _length, None) == 0


def test_keep_fraction_uses_the_context_size() -> None:
    """("fraction", f) is a token budget of f * max_input_tokens, and needs one."""
    history: list[BaseMessage] = [HumanMessage("x" * 40), HumanMessage("x" * 40)]
    assert keep_count(("fraction", 0.05), history, _length, 1000) == 1
    with pytest.raises(ValueError, match="model="):
        keep_count(("fraction", 0.05), history, _length, None)
