"""TieredMemoryMiddleware accepts and refuses trigger/keep as SummarizationMiddleware does."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from tiermem import ConversationMemory

from tiermem_agents import TieredMemoryMiddleware

BAD_SETTINGS: list[dict[str, Any]] = [
    {"trigger": ("tokens", 0)},
    {"trigger": ("fraction", 1.5)},
    {"trigger": ("words", 10)},
    {"trigger": {}},
    {"trigger": {"messages": True}},
    {"trigger": {"tokens": 2.5}},
    {"trigger": {"fraction": "0.5"}},
    {"trigger": {"bytes": 3}},
    {"trigger": "tokens"},
    {"trigger": ["tokens"]},
    {"keep": ("messages", 0)},
    {"keep": ("fraction", 2)},
    {"keep": ("lines", 3)},
    {"trigger": ("tokens", 0), "keep": ("messages", 0)},
    {"trigger": ("fraction", 0.5)},
    {"keep": ("fraction", 0.5)},
]


def _error(build: Any) -> BaseException:
    """The exception a constructor raises."""
    with pytest.raises(Exception) as info:  # noqa: PT011 - compared in full below
        build()
    return info.value


@pytest.mark.parametrize("settings", BAD_SETTINGS, ids=repr)
def test_invalid_settings_raise_what_summarization_raises(
    memory: ConversationMemory, settings: dict[str, Any]
) -> None:
    """Same exception type and message for the same invalid trigger or keep."""
    model = GenericFakeChatModel(messages=iter([]))
    theirs = _error(lambda: SummarizationMiddleware(model, **settings))
    ours = _error(lambda: TieredMemoryMiddleware(memory, model=model, **settings))
    assert (type(ours), str(ours)) == (type(theirs), str(theirs))


def test_trigger_is_copied(memory: ConversationMemory) -> None:
    """Editing the caller's trigger list or dict afterwards changes nothing."""
    clause = {"messages": 10}
    trigger: list[Any] = [clause, ("tokens", 500)]
    middleware = TieredMemoryMiddleware(memory, trigger=trigger)
    clause["messages"] = 1
    trigger.append(("messages", 2))
    assert middleware.trigger == [{"messages": 10}, ("tokens", 500)]
