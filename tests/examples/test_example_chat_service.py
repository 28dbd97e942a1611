"""examples/chat_service.py answers chat turns in-process, storing each turn once within budget."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tiermem import ConversationMemory
from tiermem.testing import check_invariants, wait_for_feed

from ..conftest import store_url

EXAMPLE = Path(__file__).parents[2] / "examples" / "chat_service.py"
#: Small enough that a handful of turns compress.
BUDGET = 300


def _load() -> ModuleType:
    """Import the example as a module."""
    spec = importlib.util.spec_from_file_location("example_chat_service", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(name="service", scope="module")
def fixture_service() -> ModuleType:
    """The example module."""
    return _load()


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh SQLite file or PostgreSQL schema."""
    return store_url(backend, tmp_path, request)


@contextlib.asynccontextmanager
async def _client(
    service: ModuleType, settings: Any, backend: Any = None
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app (on ``backend``, default the settings' own), its lifespan
    running."""
    app = service.create_app(settings, backend)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://chat") as client,
    ):
        yield client


async def _post(client: httpx.AsyncClient, turn: int, session: str = "s1") -> dict[str, Any]:
    body = {"session_id": session, "message": f"Turn {turn}: is parcel {turn} late?"}
    response = await client.post("/chat", json=body | {"message_id": f"m{turn}"})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def test_turns_are_stored_once_and_the_context_fits(service: ModuleType, url: str) -> None:
    """Twelve turns store 24 messages by id, compress, and never hand over more than the
    budget; a retried turn returns its stored answer and stores nothing."""
    settings = service.Settings(url=url, project="t", max_tokens=BUDGET)
    answers = []
    async with _client(service, settings) as client:
        answers = [await _post(client, turn) for turn in range(12)]
        again = await _post(client, 11)
        assert again["replayed"] and again["reply"] == answers[-1]["reply"]
        # The context as stored now: a compression may have run after the turn.
        assert again["context"][-1] == answers[-1]["context"][-1]
        assert again["context_tokens"] <= BUDGET
    assert all(a["context_tokens"] <= BUDGET for a in answers)
    assert answers[0]["context"] == [{"type": "human", "content": "Turn 0: is parcel 0 late?"}]
    assert sum(a["compressed"] for a in answers) >= 1
    with ConversationMemory(url, project="t") as mem:
        ids = Counter(entry.message.id for entry in mem.get_entries("s1"))
        expected = {f"m{t}:{role}" for t in range(12) for role in ("user", "ai")}
        assert set(ids) == expected and set(ids.values()) == {1}
        assert mem.get_stats("s1").summaries >= 1
        check_invariants(mem)


async def test_a_worker_answers_its_conversations_from_the_context_it_kept(
    service: ModuleType, url: str
) -> None:
    """After a conversation's first turn a worker reads no context: each turn is
    answered from the context the previous turn's write returned, and stored with
    the next one in one call."""
    settings = service.Settings(url=url, project="t", max_tokens=BUDGET)
    backend = service.TiermemBackend(settings)
    reads = 0
    read = backend.memory.aget_messages

    async def counted(session_id: str) -> Any:
        nonlocal reads
        reads += 1
        return await read(session_id)

    backend.memory.aget_messages = counted
    async with _client(service, settings, backend) as client:
        answers = [await _post(client, turn) for turn in range(8)]
    assert reads == 1
    assert all(a["context"][-2]["content"] == b["reply"] for b, a in itertools.pairwise(answers))


async def test_a_conversation_moving_between_workers_is_never_answered_stale(
    service: ModuleType, url: str
) -> None:
    """Two workers (two apps on one database) take turns of one conversation: a
    worker whose kept context went stale (the other answered since) reads again, so
    every turn is answered with the turn before it in its context, and each turn is
    stored once."""
    settings = service.Settings(url=url, project="t", max_tokens=BUDGET)
    workers = [service.TiermemBackend(settings), service.TiermemBackend(settings)]
    async with (
        _client(service, settings, workers[0]) as first,
        _client(service, settings, workers[1]) as second,
    ):
        answers = [await _post((first, second)[turn % 2], turn) for turn in range(8)]
    for before, after in itertools.pairwise(answers):
        assert after["context"][-2]["content"] == before["reply"]
    assert workers[0].stale + workers[1].stale == 6  # every turn after the first two
    with ConversationMemory(url, project="t") as mem:
        ids = Counter(entry.message.id for entry in mem.get_entries("s1"))
        assert set(ids.values()) == {1} and len(ids) == 16


async def test_a_retry_stored_by_another_worker_is_replayed_from_storage(
    service: ModuleType, url: str
) -> None:
    """A turn stored by another worker (its answer lost), retried on a worker that
    kept an older context of the conversation, is answered from storage: the stored
    reply, marked replayed, and nothing stored again."""
    settings = service.Settings(url=url, project="t", max_tokens=BUDGET)
    first, second = service.TiermemBackend(settings), service.TiermemBackend(settings)
    async with (
        _client(service, settings, first) as kept,
        _client(service, settings, second) as other,
    ):
        for turn in range(2):
            await _post(kept, turn)
        stored = await _post(other, 2)
        retried = await _post(kept, 2)
    assert retried["replayed"] and retried["reply"] == stored["reply"]
    with ConversationMemory(url, project="t") as mem:
        ids = Counter(entry.message.id for entry in mem.get_entries("s1"))
        assert set(ids.values()) == {1} and len(ids) == 6


async def test_bad_requests_are_refused(service: ModuleType, tmp_path: Path) -> None:
    """A body without a message is a 400, a message over the reserve a 413; neither stores."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    async with _client(service, service.Settings(url=url, project="t")) as client:
        assert (await client.post("/chat", json={"session_id": "s"})).status_code == 400
        assert (await client.post("/chat", json=["not", "an", "object"])).status_code == 400
        long = " ".join(["parcel"] * (service.MESSAGE_RESERVE + 10))
        response = await client.post("/chat", json={"session_id": "s", "message": long})
        assert response.status_code == 413
        assert (await client.get("/health")).json()["backend"] == "tiermem"
    with ConversationMemory(url, project="t") as mem:
        assert mem.list_sessions() == []


@pytest.mark.parametrize("backend", ["postgres"])
async def test_langgraph_reference_answers_and_summarizes(service: ModuleType, url: str) -> None:
    """The reference backend answers each turn from its checkpointed thread and
    summarizes once the thread passes the budget."""
    settings = service.Settings(url=url, backend="langgraph", project="t", max_tokens=BUDGET)
    async with _client(service, settings) as client:
        answers = [await _post(client, turn) for turn in range(10)]
    assert [a["context"][-1]["content"] for a in answers[:2]] == [
        "Turn 0: is parcel 0 late?",
        "Turn 1: is parcel 1 late?",
    ]
    assert len(answers[1]["context"]) == 3  # the first turn's two messages, then the new one
    assert sum(a["compressed"] for a in answers) >= 1


def test_settings_round_trip_through_the_environment(
    service: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spawned workers rebuild the launcher's settings from the environment."""
    settings = service.Settings(url="sqlite:///x.db", backend="langgraph", max_tokens=99)
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    assert service.Settings.from_env() == settings
    with pytest.raises(ValueError, match="unknown backend"):
        service.make_backend(service.Settings(backend="nope"))


def _settle(url: str) -> None:
    """Wait until every event written is deliverable (on PostgreSQL other clients'
    older transactions may delay that for seconds): the subscriber's idle timeout
    then only ends its follow once it has read them."""
    with ConversationMemory(url, project="t") as mem:
        wait_for_feed(mem)


async def test_subscriber_logs_every_entry_in_order_and_resumes(
    service: ModuleType, url: str
) -> None:
    """The subscriber writes each stored entry's event in seq order and acknowledges it:
    started again under the same name it gets only what came after."""
    settings = service.Settings(url=url, project="t", max_tokens=BUDGET)
    async with _client(service, settings) as client:
        for turn in range(3):
            await _post(client, turn)
    first, second = io.StringIO(), io.StringIO()
    _settle(url)
    assert await service.subscribe(settings, "audit", first, idle_timeout=0.3) == 6
    records = [json.loads(line) for line in first.getvalue().splitlines()]
    assert [(r["kind"], r["seq"]) for r in records] == [("entry:added", s) for s in range(1, 7)]
    assert all(r["received_at"] >= r["created_at"] for r in records)
    async with _client(service, settings) as client:
        await _post(client, 3)
    _settle(url)
    assert await service.subscribe(settings, "audit", second, idle_timeout=0.3) == 2
    assert [json.loads(line)["seq"] for line in second.getvalue().splitlines()] == [7, 8]
