"""Summarizers and embeddings named ``"provider:model"``, made by LangChain's own
``init_chat_model`` / ``init_embeddings``; what stops one from being made is an
``InvalidArgument`` naming what to install or set, before anything is stored."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_openai import ChatOpenAI, OpenAIEmbeddings

from tiermem import ConversationMemory
from tiermem.errors import InvalidArgument


@pytest.fixture(name="url")
def fixture_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A SQLite URL; providers' keys set to dummies (no model is ever called)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    return f"sqlite:///{tmp_path / 'named.db'}"


def test_a_summarizer_named_provider_model_is_that_chat_model(url: str) -> None:
    """``summarizer="openai:gpt-4o-mini"`` summarizes with ``ChatOpenAI(gpt-4o-mini)``."""
    with ConversationMemory(url, summarizer="openai:gpt-4o-mini") as memory:
        model = memory._context.summarizer.target  # type: ignore[union-attr]
        assert isinstance(model, ChatOpenAI) and model.model_name == "gpt-4o-mini"
        memory.set_summarizer("anthropic:claude-haiku-4-5")
        model = memory._context.summarizer.target  # type: ignore[union-attr]
        assert isinstance(model, ChatAnthropic) and model.model == "claude-haiku-4-5"


def test_embeddings_named_provider_model_are_those_embeddings(url: str) -> None:
    """``embeddings="openai:text-embedding-3-small"`` embeds with ``OpenAIEmbeddings``."""
    with ConversationMemory(url, embeddings="openai:text-embedding-3-small") as memory:
        embeddings = memory._context.embedder.embeddings  # type: ignore[union-attr]
        assert isinstance(embeddings, OpenAIEmbeddings)
        assert embeddings.model == "text-embedding-3-small"


@pytest.mark.parametrize(
    ("argument", "name", "said"),
    [
        ("summarizer", "nosuch:model", "nosuch"),
        ("summarizer", "justaname", "Unable to infer model provider"),
        ("embeddings", "nosuch:model", "Provider 'nosuch' is not supported"),
        ("embeddings", "text-embedding-3-small", "provider:model-name"),
        ("summarizer", "  ", "'provider:model'"),
    ],
)
def test_an_unknown_provider_is_an_invalid_argument(
    url: str, tmp_path: Path, argument: str, name: str, said: str
) -> None:
    """LangChain's reason, on one line, under tiermem's error type; nothing stored."""
    with pytest.raises(InvalidArgument) as caught:
        ConversationMemory(url, **{argument: name})  # type: ignore[arg-type]
    assert said in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "named.db").exists()


@pytest.mark.parametrize(
    ("argument", "name", "package"),
    [
        ("summarizer", "mistralai:mistral-small-latest", "langchain-mistralai"),
        ("embeddings", "mistralai:mistral-embed", "langchain-mistralai"),
    ],
)
def test_a_missing_provider_package_is_named(
    url: str, monkeypatch: pytest.MonkeyPatch, argument: str, name: str, package: str
) -> None:
    """The provider's package is not installed: the error says which to install."""
    monkeypatch.setitem(sys.modules, "langchain_mistralai", None)  # an import fails
    with pytest.raises(InvalidArgument, match=f"pip install {package}"):
        ConversationMemory(url, **{argument: name})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argument", "module"),
    [("summarizer", "langchain.chat_models"), ("embeddings", "langchain.embeddings")],
)
def test_without_langchain_the_error_says_to_install_it(
    url: str, monkeypatch: pytest.MonkeyPatch, argument: str, module: str
) -> None:
    """Names are made by the ``langchain`` package, which tiermem does not require."""
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(InvalidArgument, match=r"pip install langchain\)"):
        ConversationMemory(url, **{argument: "openai:gpt-4o-mini"})  # type: ignore[arg-type]


def test_missing_credentials_are_an_invalid_argument(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider's own reason (its key is not set) reaches the caller."""
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(InvalidArgument, match="OPENAI_API_KEY"):
        ConversationMemory(url, summarizer="openai:gpt-4o-mini")
