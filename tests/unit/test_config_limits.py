"""Configuration and input that would overflow later are refused when given."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle
from datetime import timedelta
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from tiermem import MemoryConfig, TierPolicy
from tiermem._compression.policy import build_prompt
from tiermem._compression.summarizer import normalize_output
from tiermem._core.messages import MAX_NESTING, check_nesting
from tiermem.errors import InvalidArgument, InvalidContent, SummarizerOutputInvalid
from tiermem.tiers import MAX_TIER_AGE
from tiermem.types import MAX_DURATION_SECONDS


@pytest.mark.parametrize("name", ["claim_ttl", "backoff_base", "backoff_max"])
@pytest.mark.parametrize("value", [math.inf, 1e20, MAX_DURATION_SECONDS + 1])
def test_durations_added_to_the_clock_are_bounded(name: str, value: float) -> None:
    """claim_ttl and the backoff are added to the clock's time: an infinite or huge value
    (which overflowed the datetime on the first compression) is refused at once."""
    bad: dict[str, Any] = {name: value}
    with pytest.raises(InvalidArgument):
        MemoryConfig(**bad)
    with pytest.raises(InvalidArgument):
        MemoryConfig().replace(**bad)
    longest: dict[str, Any] = {name: MAX_DURATION_SECONDS}
    assert getattr(MemoryConfig(**longest), name) == MAX_DURATION_SECONDS


@pytest.mark.parametrize(
    "policy",
    [
        {"expired_after": timedelta(days=999_999_999)},
        {"expired_after": MAX_TIER_AGE + timedelta(microseconds=1)},
        {"recent_within": timedelta(days=10**6), "expired_after": timedelta(days=10**6)},
        {"expired_after": 30},
        {"active_within": "1h"},
    ],
    ids=repr,
)
def test_tier_thresholds_are_bounded_timedeltas(policy: dict[str, Any]) -> None:
    """Cutoffs are the clock's time minus a threshold: more than MAX_TIER_AGE (or not a
    timedelta at all) raises InvalidArgument instead of OverflowError or TypeError later."""
    with pytest.raises(InvalidArgument):
        TierPolicy(**policy)


def test_the_longest_tier_threshold_is_accepted() -> None:
    """MAX_TIER_AGE itself is a valid threshold for every tier."""
    policy = TierPolicy(
        active_within=MAX_TIER_AGE, recent_within=MAX_TIER_AGE, expired_after=MAX_TIER_AGE
    )
    assert policy.expired_after == MAX_TIER_AGE


def _typo(name: str, value: object) -> dict[str, Any]:
    """Keywords a type checker cannot see, as a caller without one passes them."""
    return {name: value}


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: MemoryConfig(**_typo("max_token", 1)), "'max_token'; did you mean 'max_tokens'"),
        (lambda: MemoryConfig().replace(recent_windows=3), "'recent_windows'; did you mean"),
        (
            lambda: TierPolicy(**_typo("expire_after", timedelta(days=1))),
            "'expire_after'; did you mean 'expired_after'",
        ),
    ],
    ids=["MemoryConfig", "replace", "TierPolicy"],
)
def test_a_misspelt_setting_is_invalid_argument_naming_it(build: Any, message: str) -> None:
    """A keyword that names no field raises InvalidArgument naming it and the field meant,
    like every other bad setting, not the TypeError of a generated constructor."""
    with pytest.raises(InvalidArgument, match="no field " + message) as info:
        build()
    assert not isinstance(info.value, TypeError)


def test_settings_keep_their_defaults_copies_and_pickling() -> None:
    """Checking keywords leaves defaults, ``replace``, copies and pickling as they were."""
    config = MemoryConfig(max_tokens=1_000).replace(recent_window=3)
    assert (config.max_tokens, config.recent_window, config.max_entries) == (1_000, 3, None)
    assert pickle.loads(pickle.dumps(config)) == config == copy.deepcopy(config)
    assert dataclasses.replace(config, max_entries=7).max_entries == 7
    assert not hasattr(config, "__dict__")


def test_only_the_two_placeholders_are_filled() -> None:
    """Other braces stay as written (a JSON example, ``{{``, an unknown name), and text
    substituted for one placeholder is not searched for the other."""
    template = '{"a": {"b": 1}} {{x}} {other} {target_tokens}|{conversation}'
    prompt = build_prompt("say {target_tokens}", 42, template)
    assert prompt == '{"a": {"b": 1}} {{x}} {other} 42|say {target_tokens}'


@pytest.mark.parametrize(
    "answer",
    ["summary \ud800 text", ["summary", "\udfff"], AIMessage(content="lone \udc00")],
    ids=["str", "blocks", "message"],
)
def test_a_lone_surrogate_is_invalid_output(answer: Any) -> None:
    """An answer no database can store is a typed SummarizerOutputInvalid."""
    with pytest.raises(SummarizerOutputInvalid):
        normalize_output(answer)


def test_nesting_is_checked_without_recursion() -> None:
    """The check walks any depth iteratively; a cycle counts as too deep."""
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(InvalidContent):
        check_nesting("value", [deep])
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(InvalidContent):
        check_nesting("value", [cycle])
    flat: list[Any] = [[]]
    for _ in range(MAX_NESTING - 2):
        flat = [flat]
    check_nesting("value", [flat, "text", 1, None])
    with pytest.raises(InvalidContent):
        check_nesting("value", [[flat]])
