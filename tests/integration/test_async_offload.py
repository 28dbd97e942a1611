"""Under the async API, what computes at length (serializing and counting a large
message, validating an import) runs off the event loop's thread; small appends stay
on it, where a thread hop would cost more than the work."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from tiermem import ConversationMemory
from tiermem._ops import transfer, write

from ..conftest import MemoryFactory

LARGE = "word " * (write.OFFLOAD_CHARS // 4)


def _record_threads(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str
) -> list[threading.Thread]:
    """Wrap ``module.name`` so that each call records the thread it ran on."""
    seen: list[threading.Thread] = []
    original: Callable[..., Any] = getattr(module, name)

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.current_thread())
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, recording)
    return seen


async def test_a_large_message_is_prepared_off_the_event_loop(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``aadd_message`` of a large message serializes and counts it on a worker thread."""
    memory = make_memory()
    seen = _record_threads(monkeypatch, write, "_prepare")
    await memory.aadd_message("s", HumanMessage(LARGE))
    assert seen and all(t is not threading.main_thread() for t in seen)
    assert (await memory.aget_entries("s"))[0].content == LARGE


async def test_a_small_message_is_prepared_on_the_event_loop(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A short turn pays no thread hop for its preparation."""
    memory = make_memory()
    seen = _record_threads(monkeypatch, write, "_prepare")
    await memory.aadd_messages("s", [HumanMessage("hi"), HumanMessage("there")])
    assert seen == [threading.main_thread()] * 2


async def test_an_import_is_validated_off_the_event_loop(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``aimport_session`` parses and validates the export on a worker thread."""
    source: ConversationMemory = make_memory()
    source.add_user_message("s", "hello")
    exported = source.export_session("s").to_json()
    target = make_memory(project="other")
    seen = _record_threads(monkeypatch, transfer, "import_state")
    assert await target.aimport_session(exported) == "s"
    assert seen and all(t is not threading.main_thread() for t in seen)


def test_the_sync_api_prepares_in_the_calling_thread(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync driver performs a computation where it is called."""
    memory = make_memory()
    seen = _record_threads(monkeypatch, write, "_prepare")
    memory.add_message("s", HumanMessage(LARGE))
    assert seen == [threading.main_thread()]


async def test_a_large_image_block_counts_as_large(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A base64 image in a content block makes the message large, like long text."""
    memory = make_memory()
    seen = _record_threads(monkeypatch, write, "_prepare")
    url = "data:image/png;base64," + "QUJD" * (write.OFFLOAD_CHARS // 4 + 1)
    message = HumanMessage(content=[{"type": "image_url", "image_url": {"url": url}}])
    await memory.aadd_message("s", message)
    assert seen and all(t is not threading.main_thread() for t in seen)
