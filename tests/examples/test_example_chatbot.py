"""examples/chatbot.py runs a scripted conversation through RunnableWithMessageHistory."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from tiermem import ConversationMemory, is_summary_message
from tiermem.testing import check_invariants

EXAMPLE = Path(__file__).parents[2] / "examples" / "chatbot.py"


def _load() -> ModuleType:
    """Import the example as a module."""
    spec = importlib.util.spec_from_file_location("example_chatbot", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(name="chatbot")
def fixture_chatbot(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The example, with no real model configured and a non-interactive stdin."""
    monkeypatch.delenv("TIERMEM_CHAT_MODEL", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    return _load()


def test_scripted_conversation_is_stored_and_compressed(
    chatbot: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every scripted turn and reply is stored, and the history gets summarized."""
    url = f"sqlite:///{tmp_path}/x.db"
    chatbot.main(url=url)
    out = capsys.readouterr().out
    assert out.count("bot> ") == len(chatbot.SCRIPT)
    assert "with a summary" in out
    with ConversationMemory(url=url) as mem:
        stats = mem.get_stats(chatbot.SESSION)
        assert stats.total_entries == 2 * len(chatbot.SCRIPT)
        assert stats.summaries >= 1 and stats.compressed_entries > 0
        assert is_summary_message(mem.get_messages(chatbot.SESSION)[0])
        contents = [entry.content for entry in mem.get_entries(chatbot.SESSION)]
        assert contents[0] == chatbot.SCRIPT[0]
        check_invariants(mem)


def test_scripted_mode_needs_no_langchain_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a real model the example imports and runs with ``langchain`` absent."""
    for name in [m for m in sys.modules if m == "langchain" or m.startswith("langchain.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "langchain", None)  # None: importing it fails
    monkeypatch.delenv("TIERMEM_CHAT_MODEL", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    _load().main(url=f"sqlite:///{tmp_path}/x.db")
    assert "memory: 18 entries" in capsys.readouterr().out


def test_a_second_scripted_run_starts_afresh(chatbot: ModuleType, tmp_path: Path) -> None:
    """Played again on the same database, the script starts its conversation afresh."""
    url = f"sqlite:///{tmp_path}/x.db"
    chatbot.main(url=url)
    chatbot.main(url=url)
    with ConversationMemory(url=url) as mem:
        assert mem.get_stats(chatbot.SESSION).total_entries == 2 * len(chatbot.SCRIPT)


def test_configured_model_is_used(
    chatbot: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With TIERMEM_CHAT_MODEL set, init_chat_model's model answers and summarizes."""
    requested: list[str] = []

    def fake_init(name: str) -> GenericFakeChatModel:
        requested.append(name)
        return GenericFakeChatModel(messages=iter(["A short reply."] * 100))

    monkeypatch.setenv("TIERMEM_CHAT_MODEL", "provider:some-model")
    monkeypatch.setattr("langchain.chat_models.init_chat_model", fake_init)
    url = f"sqlite:///{tmp_path}/x.db"
    chatbot.main(url=url)
    assert requested == ["provider:some-model"]
    with ConversationMemory(url=url) as mem:
        replies = [e.content for e in mem.get_entries(chatbot.SESSION) if e.role == "assistant"]
        assert set(replies) == {"A short reply."}


def test_interactive_lines_come_from_the_terminal(
    chatbot: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal, typed lines are used until /quit or end of input."""
    typed = iter(["hello", "", "/stats", "/quit", "never read"])
    monkeypatch.setattr("builtins.input", lambda prompt: next(typed))
    assert list(chatbot._lines(True)) == ["hello", "/stats"]

    def end_of_input(prompt: str) -> str:
        raise EOFError

    monkeypatch.setattr("builtins.input", end_of_input)
    assert list(chatbot._lines(True)) == []
