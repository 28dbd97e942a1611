"""langchain-core's chat history and ``RunnableWithMessageHistory`` tests, with every
``InMemoryChatMessageHistory`` they build replaced by a ``TieredChatMessageHistory``
on a fresh tiermem session, on SQLite and PostgreSQL.

The test files come from the pinned langchain-core sdist (``tests/conformance/fetch.py``).
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from tiermem import ConversationMemory, MemoryConfig
from tiermem.history import TieredChatMessageHistory

from ..conftest import MemoryFactory
from .fetch import peer_file

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


def _load(relative: str, name: str, aliases: dict[str, ModuleType]) -> ModuleType:
    """Import a fetched peer file as module ``name``, with ``aliases`` importable meanwhile."""
    path: Path = peer_file(PROJECT, relative)
    if not path.exists():
        msg = f"{path} is missing: run `make install-tests` (python tests/conformance/fetch.py)"
        raise FileNotFoundError(msg)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = {key: sys.modules.get(key) for key in aliases}
    sys.modules.update(aliases)
    try:
        spec.loader.exec_module(module)
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
    return module


def _peer_modules() -> list[ModuleType]:
    utils = _load("tests/unit_tests/pydantic_utils.py", "peer_core_pydantic_utils", {})
    aliases = {"tests.unit_tests.pydantic_utils": utils}
    return [
        _load("tests/unit_tests/runnables/test_history.py", "peer_core_test_history", aliases),
        _load(
            "tests/unit_tests/chat_history/test_chat_history.py", "peer_core_chat_history", aliases
        ),
    ]


PEERS = _peer_modules()


@pytest.fixture(autouse=True)
def _substitute(make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every history a peer test builds is a tiermem session of this test's backend."""
    memory = make_memory(config=MemoryConfig(auto_compress=False))
    monkeypatch.setattr(ConformanceHistory, "memory_under_test", memory)
    for peer in PEERS:
        monkeypatch.setattr(peer, "InMemoryChatMessageHistory", ConformanceHistory)


def _adopt(peer: ModuleType) -> Iterator[tuple[str, Callable[..., Any]]]:
    """The peer's test functions, marked as documented where they differ."""
    module_marks = getattr(peer, "pytestmark", [])
    if not isinstance(module_marks, list):
        module_marks = [module_marks]
    for name, function in list(vars(peer).items()):
        if not name.startswith("test_") or not callable(function) or name in NOT_ABOUT_HISTORY:
            continue
        marks = list(module_marks)
        if name in DIFFERENCES:
            marks.append(pytest.mark.xfail(reason=DIFFERENCES[name], strict=True))
        for mark in marks:
            function = mark(function)
        yield name, function


for _peer in PEERS:
    globals().update(_adopt(_peer))
