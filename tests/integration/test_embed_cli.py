"""``tiermem embed``: backfill a database's entry vectors from the command line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from typer.testing import CliRunner

from tiermem import ConversationMemory, cli
from tiermem.testing import check_invariants

from ..conftest import store_url

runner = CliRunner()


def small_model() -> DeterministicFakeEmbedding:
    """The factory the command is pointed at."""
    return DeterministicFakeEmbedding(size=16)


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL on a fresh SQLite file or PostgreSQL schema; invariants checked afterwards."""
    url = store_url(backend, tmp_path, request)
    yield url
    with ConversationMemory(url) as memory:
        check_invariants(memory)


def test_embed_backfills_then_has_nothing_left(url: str) -> None:
    """Entries stored without embeddings are embedded once; a second run embeds none."""
    with ConversationMemory(url) as memory:
        for n in range(5):
            memory.add_user_message("s", f"entry {n}")
    spec = f"{__name__}:small_model"
    first = runner.invoke(cli.app, ["embed", "--url", url, "--embeddings", spec])
    assert first.exit_code == 0, first.output
    assert "5 entries and layer items of project 'default' embedded" in first.stdout
    again = runner.invoke(cli.app, ["embed", "--url", url, "--embeddings", spec])
    assert "0 entries" in again.stdout
    with ConversationMemory(url, embeddings=small_model()) as memory:
        assert memory.embed_missing() == 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no-colon", "module:attribute"),
        ("no_such_module_xyz:thing", "cannot load embeddings"),
        ("tiermem:NoSuchThing", "cannot load embeddings"),
        # A class that needs arguments: its error, on one line.
        ("langchain_core.embeddings:DeterministicFakeEmbedding", "cannot make embeddings"),
        ("tiermem:MemoryConfig", "must be a LangChain Embeddings"),
    ],
)
def test_embed_refuses_a_bad_spec(url: str, spec: str, message: str) -> None:
    """A spec that does not name an importable object is one error line, exit 1."""
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", "hello")
    result = runner.invoke(cli.app, ["embed", "--url", url, "--embeddings", spec])
    assert result.exit_code == 1
    assert message in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
