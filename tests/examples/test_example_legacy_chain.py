"""examples/legacy_chain.py runs a ConversationChain with TieredConversationMemory."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tiermem import ConversationMemory
from tiermem.testing import check_invariants

EXAMPLE = Path(__file__).parents[2] / "examples" / "legacy_chain.py"


def _load() -> ModuleType:
    """Import the example as a module."""
    spec = importlib.util.spec_from_file_location("example_legacy_chain", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(name="legacy")
def fixture_legacy(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The example with no real model configured."""
    monkeypatch.delenv("TIERMEM_CHAT_MODEL", raising=False)
    return _load()


def test_chain_history_is_summarized_and_searchable(
    legacy: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chain's turns are stored, the oldest summarized, and still found by search."""
    url = f"sqlite:///{tmp_path}/x.db"
    legacy.main(url=url)
    out = capsys.readouterr().out
    assert "System: Summary of the earlier conversation:" in out
    assert f"Human: {legacy.TURNS[-1]}" in out
    with ConversationMemory(url=url) as mem:
        stats = mem.get_stats(legacy.SESSION)
        assert stats.total_entries == 2 * len(legacy.TURNS)
        assert stats.compressed_entries > 0
        hit = mem.search("COBOL", session_id=legacy.SESSION)[0]
        assert hit.entry.compressed and hit.entry.content == legacy.TURNS[0]
        check_invariants(mem)


def test_scripted_mode_needs_no_langchain_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without a real model the example needs tiermem-classic only, not ``langchain``."""
    for name in [m for m in sys.modules if m == "langchain" or m.startswith("langchain.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "langchain", None)  # None: importing it fails
    monkeypatch.delenv("TIERMEM_CHAT_MODEL", raising=False)
    legacy = _load()
    legacy.main(url=f"sqlite:///{tmp_path}/x.db")
    with ConversationMemory(url=f"sqlite:///{tmp_path}/x.db") as mem:
        assert mem.get_stats(legacy.SESSION).total_entries == 2 * len(legacy.TURNS)


def test_a_second_run_starts_afresh(legacy: ModuleType, tmp_path: Path) -> None:
    """A second run clears the session first: it holds one run's turns."""
    url = f"sqlite:///{tmp_path}/x.db"
    legacy.main(url=url)
    legacy.main(url=url)
    with ConversationMemory(url=url) as mem:
        assert mem.get_stats(legacy.SESSION).total_entries == 2 * len(legacy.TURNS)
