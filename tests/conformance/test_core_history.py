"""langchain-core's chat history and ``RunnableWithMessageHistory`` tests, with every
``InMemoryChatMessageHistory`` they build replaced by a ``TieredChatMessageHistory``
on a fresh tiermem session, on SQLite and PostgreSQL.

The test files come from the pinned langchain-core sdist (``tests/conformance/fetch.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any, ClassVar

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from tiermem import ConversationMemory, MemoryConfig
from tiermem.history import TieredChatMessageHistory

from ..conftest import MemoryFactory
from ._peers import adopt, load

PROJECT = "langchain-core"

#: Peer tests that check something other than a chat history's behaviour.
NOT_ABOUT_HISTORY: dict[str, str] = {
    "test_chat_history_deprecated": "checks the docstrings of LangChain's own classes",
    "test_add_message_implementation_only": "tests a LangChain-defined history subclass",
    "test_bulk_message_implementation_only": "tests a LangChain-defined history subclass",
    "test_async_interface": "tests a LangChain-defined history subclass",
}

#: Documented, deliberate differences (mirrored in the README), as strict xfails.
DIFFERENCES: dict[str, str] = {}


class ConformanceHistory(TieredChatMessageHistory):
    """``TieredChatMessageHistory`` built the way the peer tests build theirs.

    Each instance is a new session of the memory under test; ``messages=`` is
    stored first, and two histories are equal when they hold equal messages
    (``InMemoryChatMessageHistory`` is a pydantic model compared by its fields).
    """

    memory_under_test: ClassVar[ConversationMemory | None] = None
    _sessions: ClassVar[Iterator[int]] = itertools.count()

    def __init__(self, messages: Sequence[BaseMessage] = (), **_: Any) -> None:
        assert self.memory_under_test is not None
        super().__init__(self.memory_under_test, f"peer-{next(self._sessions)}")
        if messages:
            self.add_messages(messages)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BaseChatMessageHistory):
            return NotImplemented
        return self.messages == other.messages

    __hash__ = None  # type: ignore[assignment]


def _peer_modules() -> list[ModuleType]:
    utils = load(PROJECT, "tests/unit_tests/pydantic_utils.py", "peer_core_pydantic_utils", {})
    aliases = {"tests.unit_tests.pydantic_utils": utils}
    return [
        load(PROJECT, f"tests/unit_tests/{path}", f"peer_core_{index}", aliases)
        for index, path in enumerate(
            ["runnables/test_history.py", "chat_history/test_chat_history.py"]
        )
    ]


PEERS = _peer_modules()


@pytest.fixture(autouse=True)
def _substitute(make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every history a peer test builds is a tiermem session of this test's backend."""
    memory = make_memory(config=MemoryConfig(auto_compress=False))
    monkeypatch.setattr(ConformanceHistory, "memory_under_test", memory)
    for peer in PEERS:
        monkeypatch.setattr(peer, "InMemoryChatMessageHistory", ConformanceHistory)


for _peer in PEERS:
    globals().update(adopt(_peer, NOT_ABOUT_HISTORY, DIFFERENCES))
