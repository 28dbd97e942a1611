"""Pure trigger and retention rules, with the semantics of ``SummarizationMiddleware``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, cast

from langchain.agents.middleware.summarization import ContextSize, TriggerClause
from langchain_core.messages import BaseMessage

Trigger: TypeAlias = ContextSize | TriggerClause | list[ContextSize | TriggerClause]
"""A ``SummarizationMiddleware`` trigger: one threshold, an AND clause, or an OR list."""

Clause: TypeAlias = dict[str, float]
"""One normalized AND clause: metric name to threshold."""

_METRICS = frozenset({"tokens", "messages", "fraction"})


def validate_context_size(context: ContextSize, parameter_name: str) -> ContextSize:
    """Check one ``(kind, value)`` pair.

    Args:
        context: The pair, e.g. ``("tokens", 3000)``.
        parameter_name: ``"trigger"`` or ``"keep"``, for the error message.

    Returns:
        The pair, unchanged.

    Raises:
        ValueError: On an unknown kind or an out-of-range value.
    """
    kind, value = context
    if kind == "fraction":
        if not 0 < value <= 1:
            msg = f"Fractional {parameter_name} values must be between 0 and 1, got {value}."
            raise ValueError(msg)
    elif kind in {"tokens", "messages"}:
        if value <= 0:
            msg = f"{parameter_name} thresholds must be greater than 0, got {value}."
            raise ValueError(msg)
    else:
        msg = f"Unsupported context size type {kind} for {parameter_name}."
        raise ValueError(msg)
    return context


def _clause_from_mapping(mapping: Mapping[str, Any]) -> Clause:
    """Validate a ``TriggerClause`` dict."""
    if not mapping:
        msg = "trigger clause must specify at least one of 'tokens', 'messages', 'fraction'"
        raise ValueError(msg)
    clause: Clause = {}
    for kind, value in mapping.items():
        if kind not in _METRICS:
            msg = f"Unsupported trigger metric: {kind!r}"
            raise ValueError(msg)
        # bool is an int: {"messages": True} must not become a threshold of 1.
        if isinstance(value, bool):
            msg = f"{kind} trigger value must be numeric, got {value!r}"
            raise ValueError(msg)
        if kind == "fraction" and not isinstance(value, (int, float)):
            msg = f"Fraction trigger values must be numeric, got {value!r}"
            raise ValueError(msg)
        if kind != "fraction" and not isinstance(value, int):
            msg = f"{kind} trigger values must be integers, got {value!r}"
            raise ValueError(msg)
        validate_context_size(cast("ContextSize", (kind, value)), "trigger")
        clause[kind] = value
    return clause


def _clause_from_item(item: object) -> Clause:
    """Validate one tuple or dict trigger item."""
    if isinstance(item, Mapping):
        return _clause_from_mapping(item)
    if isinstance(item, tuple):
        kind, value = validate_context_size(cast("ContextSize", item), "trigger")
        return {kind: value}
    msg = f"Unsupported trigger item type: {type(item)}"
    raise TypeError(msg)


def normalize_trigger(trigger: Trigger | None) -> list[Clause]:
    """Turn any trigger form into OR-ed AND clauses.

    Args:
        trigger: ``("tokens", 3000)``, ``{"tokens": 4000, "messages": 10}``, a list of
            either, or ``None``.

    Returns:
        The clauses; empty for ``None``.

    Raises:
        ValueError: On a bad metric or value.
        TypeError: On an unsupported trigger type.
    """
    if trigger is None:
        return []
    if isinstance(trigger, list):
        return [_clause_from_item(item) for item in trigger]
    if not isinstance(trigger, (Mapping, tuple)):
        msg = f"Unsupported trigger type: {type(trigger)}"
        raise TypeError(msg)
    return [_clause_from_item(trigger)]


def copy_trigger(trigger: Trigger | None) -> Trigger | None:
    """Copy a trigger's list and dicts, so later edits by the caller change nothing.

    Args:
        trigger: Any trigger form, or ``None``.

    Returns:
        An equal trigger sharing no mutable container with ``trigger``.
    """
    if isinstance(trigger, Mapping):
        return cast("TriggerClause", dict(trigger))
    if isinstance(trigger, list):
        return [
            cast("TriggerClause", dict(item)) if isinstance(item, Mapping) else item
            for item in trigger
        ]
    return trigger


def should_compress(
    clauses: Sequence[Clause], *, messages: int, tokens: int, max_input_tokens: int | None
) -> bool:
    """Decide whether any clause is met.

    Args:
        clauses: Normalized trigger clauses.
        messages: Number of messages in the agent state.
        tokens: Their token count.
        max_input_tokens: The model's context size, for ``fraction`` metrics.

    Returns:
        ``True`` when every threshold of at least one clause is reached.
    """
    return any(
        _clause_met(clause, messages=messages, tokens=tokens, max_input_tokens=max_input_tokens)
        for clause in clauses
    )


def _clause_met(
    clause: Clause, *, messages: int, tokens: int, max_input_tokens: int | None
) -> bool:
    """Check one AND clause."""
    for kind, value in clause.items():
        if kind == "messages" and messages < value:
            return False
        if kind == "tokens" and tokens < value:
            return False
        if kind == "fraction":
            if max_input_tokens is None:
                return False
            if tokens < max(int(max_input_tokens * value), 1):
                return False
    return True


def keep_count(
    keep: ContextSize,
    messages: Sequence[BaseMessage],
    count_tokens: Callable[[Sequence[BaseMessage]], int],
    max_input_tokens: int | None,
) -> int:
    """How many of the newest messages to keep out of compression.

    ``("messages", n)`` keeps ``n``; ``("tokens", n)`` and ``("fraction", f)`` keep
    the longest suffix that fits the budget (at least one message). tiermem then
    widens the kept part where it would split a tool call from its results.

    Args:
        keep: The retention policy.
        messages: The active (not yet compressed) messages, oldest first.
        count_tokens: Token counter for a list of messages.
        max_input_tokens: The model's context size, for ``fraction``.

    Returns:
        The number of trailing messages to keep, between 0 and ``len(messages)``.

    Raises:
        ValueError: When ``fraction`` is used and the context size is unknown.
    """
    kind, value = keep
    if kind == "messages":
        return min(int(value), len(messages))
    if kind == "fraction":
        if max_input_tokens is None:
            msg = "keep=('fraction', ...) needs the model's max_input_tokens; pass model=."
            raise ValueError(msg)
        budget = max(int(max_input_tokens * value), 1)
    else:
        budget = max(int(value), 1)
    if count_tokens(messages) <= budget:
        return len(messages)
    # Binary search for the earliest start whose suffix fits the budget.
    low, high = 0, len(messages)
    while low < high:
        mid = (low + high) // 2
        if count_tokens(messages[mid:]) <= budget:
            high = mid
        else:
            low = mid + 1
    return max(len(messages) - low, 1) if messages else 0
