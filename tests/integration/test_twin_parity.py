"""Every public sync/async pair behaves the same: on two fresh memories (separate
databases, identical clocks) the sync method and its ``a``-prefixed twin get the same
inputs, edge cases included, and must return equal values, raise the same error type
and message, send the same signals and leave the same rows.

The pairs are found by introspection (every public coroutine ``aX`` with a sync ``X``
on ``ConversationMemory`` and ``LayeredMemory``); a pair without inputs in ``SPECS``
fails, so a new pair cannot be left untested.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, message_to_dict
from pydantic import BaseModel
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem.layers import LayeredMemory
from tiermem.testing import FakeSummarizer, ManualClock, SignalRecorder, check_invariants

from ..conftest import _create_schema, _drop_schema, pg_engine_for, sqlite_engine
from ..reliability.dump import canonical_dump

#: Ids tiermem generates (tool call ids, compression claim tokens): equal up to this.
GENERATED = re.compile(r"[0-9a-f]{32}")
SCOPE = "parity"


@dataclass(frozen=True)
class Side:
    """One of the two memories: its engine and clock."""

    memory: ConversationMemory
    clock: ManualClock
    engine: Engine


@dataclass(frozen=True)
class Lazy:
    """An argument computed from the side's own memory (for example its export)."""

    make: Callable[[ConversationMemory], Any]


@dataclass(frozen=True)
class Call:
    """One call: positional and keyword arguments."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def call(*args: Any, **kwargs: Any) -> Call:
    """A :class:`Call` of these arguments."""
    return Call(args, kwargs)


Setup = Callable[[ConversationMemory, ManualClock], None]


@dataclass(frozen=True)
class Spec:
    """The inputs of one pair: a setup run on both memories first, then the calls."""

    calls: list[Call]
    setup: Setup | None = None


# --------------------------------------------------------------------------- setups


def conversation(memory: ConversationMemory, _clock: ManualClock) -> None:
    """A session "s" with enough turns to compress."""
    for index in range(6):
        memory.add_user_message("s", f"question {index} about the harbour")
        memory.add_assistant_message("s", f"answer {index} about the harbour")


def compressed(memory: ConversationMemory, clock: ManualClock) -> None:
    """Session "s", compressed once."""
    conversation(memory, clock)
    memory.compress("s", force=True)


def pending_calls(memory: ConversationMemory, _clock: ManualClock) -> None:
    """Two parallel calls of one tool, ``call_z`` made before ``call_a``, and a third."""
    for call_id in ("call_z", "call_a", "call_m"):
        memory.add_tool_call("s", "search", {"q": call_id}, call_id=call_id)


def aged(memory: ConversationMemory, clock: ManualClock) -> None:
    """Sessions and layer items last used 400 days, 10 days and 2 hours ago."""
    start, layers = clock.now, memory.layers(SCOPE)
    for label, age in (("old", 400), ("mid", 10)):
        clock.set(start - timedelta(days=age))
        memory.add_user_message(label, "x")
        layers.learn(f"{label} fact", "value")
    clock.set(start - timedelta(hours=2))
    memory.add_user_message("new", "x")
    clock.set(start)


def layered(memory: ConversationMemory, _clock: ManualClock) -> None:
    """Items in every layer of the parity scope."""
    layers = memory.layers(SCOPE)
    for index in range(4):
        layers.append("episodic", f"event {index} at the harbour " + "with more words " * 8)
        layers.append("working", f"note {index} about the harbour " + "with more words " * 8)
    layers.learn("city", "Lisbon")
    layers.add_rule("user asks about weather", "check the forecast")


def person(memory: ConversationMemory, clock: ManualClock) -> None:
    """Session "s" and items in every layer of the parity scope."""
    conversation(memory, clock)
    layered(memory, clock)


# --------------------------------------------------------------------------- inputs

STATE = Lazy(lambda memory: memory.export_session("s"))
STATE_JSON = Lazy(lambda memory: memory.export_session("s").to_json())
BAD_SESSION = ("", " padded ", "x" * 300)

SPECS: dict[str, Spec] = {
    "memory.add_user_message": Spec(
        [
            call("s", "hello", channel="web"),
            call("s", ""),
            *(call(bad, "x") for bad in BAD_SESSION),
            call("s", 5),
            call("s", "nul \x00 and \ud800"),
        ]
    ),
    "memory.add_assistant_message": Spec(
        [call("s", "hi", mood="ok"), call("s", ""), call("", "x"), call("s", None)]
    ),
    "memory.add_message": Spec(
        [
            call("s", HumanMessage("hi", id="m1")),
            call("s", AIMessage("reply"), metadata={"k": [1, 2]}),
            call("s", "not a message"),
            call("s", HumanMessage("x"), metadata={"bad": object()}),
            call("", HumanMessage("x")),
        ]
    ),
    "memory.add_messages": Spec(
        [
            call("s", [HumanMessage("one", id="a"), AIMessage("two", id="b")]),
            call("s", []),
            call("s", [HumanMessage("one", id="a"), HumanMessage("three")], skip_existing=True),
            call("s", [HumanMessage("ok"), "not a message"]),
            call("s", None),
        ]
    ),
    "memory.add_and_get_messages": Spec(
        [
            call("s", [HumanMessage("one", id="a")]),
            call("s", [HumanMessage("one", id="a")], skip_existing=True),
            call("s", []),
            call("", [HumanMessage("x")]),
        ]
    ),
    "memory.add_tool_call": Spec(
        [
            call("s", "search", {"q": 1}, call_id="c1"),
            call("s", "search", {"q": 2}),
            call("s", "search", {"q": 3}, call_id=""),
            call("s", "search", {}, call_id="c1"),
            call("s", "search", "not a mapping"),
            call("s", 5, {}),
        ]
    ),
    "memory.add_tool_result": Spec(
        [
            call("s", "search", "for z"),
            call("s", "search", "for a", call_id=""),
            call("s", "search", "named", call_id="call_m"),
            call("s", "search", "none left"),
            call("s", "search", "unknown", call_id="nope"),
            call("s", "search", "typed", call_id=7),
            call("s", "search", 5),
            call("other", "search", "no session"),
            call("", "search", "x"),
        ],
        setup=pending_calls,
    ),
    "memory.add_context": Spec(
        [
            call("s", "ctx", "src"),
            call("s", "pinned ctx", "src", pinned=True),
            call("s", 5, "src"),
            call("", "ctx", "src"),
        ]
    ),
    "memory.clear_session": Spec(
        [call("s"), call("s"), call("unknown"), call("")], setup=conversation
    ),
    "memory.rename_session": Spec(
        [call("s", "t"), call("s", "t"), call("t", "t"), call("t", ""), call("t", "u")],
        setup=conversation,
    ),
    "memory.forget": Spec(
        [
            call(sessions=["s"], scopes=[SCOPE], dry_run=True),
            call(sessions=["s", "unknown"], scopes=[SCOPE], namespaces=[("users", "s")]),
            call(sessions=["s"]),
            call(),
            call(sessions="s"),
            call(namespaces=[("a.b",)]),
            call(scopes=[" padded "]),
        ],
        setup=person,
    ),
    "memory.close": Spec([call()], setup=conversation),
    "memory.compress": Spec(
        [
            call("s"),
            call("s", True, keep=-1),
            call("s", True, keep=2),
            call("s", True),
            call("unknown", True),
            call("", True),
        ],
        setup=conversation,
    ),
    # Without embeddings both refuse; with them, test_search_embeddings runs the pair.
    "memory.embed_missing": Spec([call(), call(progress=[].append)], setup=conversation),
    "memory.expand_summary": Spec(
        [call(1), call(999), call("1"), call(-1)],
        setup=compressed,
    ),
    "memory.export_session": Spec([call("s"), call("unknown"), call("")], setup=compressed),
    "memory.get_active_entries": Spec([call("s"), call("unknown"), call("")], setup=compressed),
    "memory.get_context_for_llm": Spec([call("s"), call("unknown"), call("")], setup=compressed),
    "memory.get_entries": Spec(
        [call("s"), call("s", False), call("unknown"), call("")], setup=compressed
    ),
    "memory.get_messages": Spec([call("s"), call("unknown"), call("")], setup=compressed),
    "memory.get_stats": Spec([call("s"), call("unknown"), call("")], setup=compressed),
    "memory.get_summaries": Spec([call("s"), call("unknown"), call("")], setup=compressed),
    "memory.get_tier_stats": Spec([call(), call("other"), call(""), call(5)], setup=aged),
    "memory.import_session": Spec(
        [
            call(STATE, session_id="copy"),
            call(STATE_JSON, session_id="copy"),
            call(STATE_JSON, session_id="copy", overwrite=True),
            call("{not json"),
            call(STATE, session_id=""),
        ],
        setup=compressed,
    ),
    "memory.load_context": Spec(
        [call(), call(1), call(0), call(-1), call(True), call("2")], setup=aged
    ),
    "memory.least_recently_used": Spec(
        [
            call("archived"),
            call("expired", 1),
            call("active", 0),
            call("active", -1),
            call("bogus"),
            call("recent", True),
        ],
        setup=aged,
    ),
    "memory.list_projects": Spec([call()], setup=aged),
    "memory.peek": Spec([call("s"), call("unknown"), call(""), call(5)], setup=compressed),
    "memory.list_sessions": Spec(
        [call(), call(limit=1), call(limit=1, offset=1), call(limit=-1), call(offset=-1)],
        setup=aged,
    ),
    "memory.prune_expired": Spec(
        [
            call(dry_run=True),
            call(limit=0),
            call(limit=-1),
            call(limit=True),
            call(dry_run="yes"),
            call(batch_size=0),
            call(limit=1),
            call(),
            call(),
        ],
        setup=aged,
    ),
    "memory.recalculate_tiers": Spec(
        [call(), call(), call(""), call(batch_size=0), call(progress=5)], setup=aged
    ),
    "memory.search": Spec(
        [
            call("harbour"),
            call("harbour", "s", 2),
            call("harbour", "s", 2, window=1),
            call("harbour", window=-1),
            call("?!"),
            call("harbour", limit=0),
            call(5),
            call("harbour", "unknown"),
        ],
        setup=conversation,
    ),
    "memory.track_access": Spec([call("s"), call("unknown"), call("")], setup=conversation),
    "layers.add_rule": Spec(
        [
            call("when asked", "answer", {"source": "test"}),
            call("", "answer"),
            call("when", 5),
            call("when", "do", "not a mapping"),
        ]
    ),
    "layers.append": Spec(
        [
            call("episodic", "an event"),
            call("working", "a note"),
            call("semantic", "a value", {"key": "k"}),
            call("semantic", "a value"),
            call("procedural", "an action", {"condition": "a condition"}),
            call("procedural", "an action"),
            call("bogus", "x"),
            call("episodic", "nul \x00"),
        ]
    ),
    "layers.clear": Spec([call("episodic"), call("working"), call(), call("bogus")], setup=layered),
    "layers.compact": Spec(
        [
            call("episodic", 1),
            call("working", 1),
            call("semantic"),
            call("procedural", 0, False),
            call("episodic", -1),
            call("episodic", 1, "yes"),
        ],
        setup=layered,
    ),
    "layers.get_stats": Spec([call()], setup=layered),
    "layers.learn": Spec([call("k", "v"), call("k", "v2", {"m": 1}), call("", "v"), call("k", 5)]),
    "layers.match_rules": Spec(
        [call("weather"), call("weather", 1), call("weather", 0), call(5)], setup=layered
    ),
    "layers.recall": Spec([call("city"), call("missing"), call(""), call(5)], setup=layered),
    "layers.recent": Spec(
        [call("episodic"), call("working", 2), call("semantic", 0), call("episodic", -1)],
        setup=layered,
    ),
    "layers.search": Spec(
        [
            call("episodic", "harbour"),
            call("working", "harbour", 2),
            call("episodic", ""),
            call("episodic", "harbour", 0),
            call("episodic", 5),
            call("bogus", "harbour"),
        ],
        setup=layered,
    ),
}


def public_pairs() -> list[str]:
    """``owner.name`` of every public sync method with an ``a``-prefixed coroutine twin."""
    pairs = []
    for owner, cls in (("memory", ConversationMemory), ("layers", LayeredMemory)):
        for name, member in inspect.getmembers(cls):
            if name.startswith("a") and not name.startswith("_") and hasattr(cls, name[1:]):
                if inspect.iscoroutinefunction(member):
                    pairs.append(f"{owner}.{name[1:]}")
    return sorted(pairs)


# --------------------------------------------------------------------------- comparing


def plain(value: Any) -> Any:
    """``value`` as comparable plain data, with generated ids replaced."""
    if isinstance(value, BaseException):
        return {"raised": type(value).__name__, "message": plain(str(value))}
    if isinstance(value, BaseMessage):
        return plain(message_to_dict(value))
    if isinstance(value, BaseModel):
        return plain(value.model_dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"type": type(value).__name__, **fields}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, str):
        return GENERATED.sub("<generated>", value)
    if isinstance(value, dict):
        return {plain(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float):
        return round(value, 9)
    if value is None or isinstance(value, bool | int):
        return value
    raise TypeError(f"no comparison for {type(value).__name__}: add it to plain()")


def outcome(run: Callable[[], Any]) -> Any:
    """What ``run`` returned or raised, as plain data."""
    try:
        return {"returned": plain(run())}
    except Exception as error:
        return plain(error)


def target(memory: ConversationMemory, owner: str) -> ConversationMemory | LayeredMemory:
    """The object whose methods the pair belongs to."""
    return memory if owner == "memory" else memory.layers(SCOPE)


def resolve(value: Any, memory: ConversationMemory) -> Any:
    """``value``, or what a :class:`Lazy` makes of it on this memory."""
    return value.make(memory) if isinstance(value, Lazy) else value


def run_side(side: Side, pair: str, step: Call, asynchronous: bool) -> tuple[Any, Any]:
    """One call on one side: its outcome and the signals it sent."""
    owner, name = pair.split(".")
    method = getattr(target(side.memory, owner), ("a" if asynchronous else "") + name)
    args = [resolve(arg, side.memory) for arg in step.args]
    kwargs = {key: resolve(arg, side.memory) for key, arg in step.kwargs.items()}
    recorder = SignalRecorder(side.memory)
    with recorder.recording():
        if asynchronous:
            result = outcome(lambda: asyncio.run(method(*args, **kwargs)))
        else:
            result = outcome(lambda: method(*args, **kwargs))
    return result, plain(recorder.events)


def rows(engine: Engine) -> str:
    """Every stored row, generated ids replaced (and the writing transactions' ids,
    which differ between the two databases on PostgreSQL)."""
    return GENERATED.sub("<generated>", canonical_dump(engine, ignore={"tiermem_event": {"xid"}}))


# --------------------------------------------------------------------------- tests


def _engine(backend: str, path: Path, schemas: list[str]) -> Engine:
    if backend == "sqlite":
        return sqlite_engine(path)
    schemas.append(_create_schema())
    return pg_engine_for(schemas[-1])


@pytest.fixture(name="twins")
def fixture_twins(backend: str, tmp_path: Path) -> Iterator[tuple[Side, Side]]:
    """Two fresh memories on separate databases of the backend, each with its own manual
    clock at the same time, a deterministic summarizer and manual compression."""
    schemas: list[str] = []
    sides = []
    for name in ("sync", "async"):
        engine = _engine(backend, tmp_path / f"{name}.db", schemas)
        clock = ManualClock()
        memory = ConversationMemory(
            engine=engine,
            clock=clock,
            config=MemoryConfig(auto_compress=False, recent_window=2, min_entries_to_compress=2),
            summarizer=FakeSummarizer(),
        )
        sides.append(Side(memory, clock, engine))
    yield sides[0], sides[1]
    for side in sides:
        side.memory.close()
        check_invariants(side.engine)
        side.engine.dispose()
    for schema in schemas:
        _drop_schema(schema)


def test_every_pair_has_inputs() -> None:
    """Each pair found has inputs here, and each input names a pair that exists."""
    pairs = public_pairs()
    assert {"memory.add_tool_result", "memory.prune_expired", "layers.search"} <= set(pairs)
    assert sorted(SPECS) == pairs


@pytest.mark.parametrize("pair", public_pairs())
def test_twins_match(twins: tuple[Side, Side], pair: str) -> None:
    """The sync method and its async twin, on the same inputs, return and raise the
    same, send the same signals and store the same rows."""
    spec = SPECS.get(pair)
    assert spec is not None, f"{pair} has no inputs in SPECS: add some"
    sync, async_ = twins
    if spec.setup is not None:
        for side in twins:
            spec.setup(side.memory, side.clock)
    for step in spec.calls:
        expected = run_side(sync, pair, step, asynchronous=False)
        got = run_side(async_, pair, step, asynchronous=True)
        assert got == expected, f"{pair}{step.args}{step.kwargs}"
        assert rows(async_.engine) == rows(sync.engine), f"{pair}{step.args}{step.kwargs}"


def test_a_difference_is_detected(twins: tuple[Side, Side]) -> None:
    """The comparison sees a twin that stores nothing and raises instead: the shape of
    the call_id="" difference between add_tool_result and aadd_tool_result."""
    sync, async_ = twins
    for side in twins:
        pending_calls(side.memory, side.clock)
    expected = run_side(sync, "memory.add_tool_result", call("s", "search", "x", ""), False)
    got = run_side(async_, "memory.add_tool_result", call("s", "search", "x", "nope"), True)
    assert got != expected
    assert got[0]["raised"] == "InvalidContent" and got[1] == []
    assert json.dumps(expected[1]).count("entry:added") == 1
