"""The repository's LangGraph store examples run and leave what they say in the store."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tiermem_langgraph import TieredStore

EXAMPLES = Path(__file__).parents[4] / "examples"


def _load(name: str) -> ModuleType:
    """Import an example as a module."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_agent_example(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The agent example saves two preferences and answers from a word search."""
    _load("langgraph_store_agent").main(url=url)
    out = capsys.readouterr().out
    assert "agent> You prefer aisle seats." in out
    with TieredStore.from_url(url) as store:
        texts = sorted(i.value["text"] for i in store.search(("preferences", "ada")))
        assert texts == ["Prefers aisle seats on flights", "Vegetarian meals"]


def test_graph_example(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The graph example counts visits per user in the store."""
    _load("langgraph_store_graph").main(url=url)
    out = capsys.readouterr().out
    assert "ada: visit 2" in out and "bob: visit 1" in out
    with TieredStore.from_url(url) as store:
        counter = store.get(("visits", "ada"), "counter")
        assert counter is not None and counter.value == {"n": 2}


def test_langmem_example(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The LangMem example stores a memory and finds it again."""
    _load("langgraph_langmem").main(url=url)
    out = capsys.readouterr().out
    assert "memory" in out and "Pixel" in out
    with TieredStore.from_url(url) as store:
        contents = [i.value["content"] for i in store.search(("memories", "ada"))]
        assert contents == ["The user's dog is called Pixel"]
