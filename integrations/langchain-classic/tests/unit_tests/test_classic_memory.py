"""TieredConversationMemory implements the BaseMemory contract on a tiermem session."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from tiermem import ConversationMemory, MemoryConfig
from tiermem.errors import InvalidArgument
from tiermem.testing import FakeSummarizer, check_invariants

import tiermem_classic
from tiermem_classic import TieredConversationMemory


@pytest.fixture(name="mem")
def fixture_mem(tmp_path: Path) -> Iterator[ConversationMemory]:
    """A memory on SQLite in tmp_path that never compresses on its own."""
    config = MemoryConfig(auto_compress=False)
    url = f"sqlite:///{tmp_path}/classic.db"
    with ConversationMemory(url=url, config=config, summarizer=FakeSummarizer()) as mem:
        yield mem
        check_invariants(mem.engine)


def test_all_is_pinned() -> None:
    """__all__ lists exactly the documented names, and a version is set."""
    assert tiermem_classic.__all__ == ["TieredConversationMemory"]
    assert tiermem_classic.__version__


def test_defaults_match_summary_buffer_memory(mem: ConversationMemory) -> None:
    """Field defaults are those of ConversationSummaryBufferMemory."""
    memory = TieredConversationMemory(memory=mem, session_id="s")
    assert memory.memory_variables == ["history"]
    assert (memory.return_messages, memory.input_key, memory.output_key) == (False, None, None)
    assert (memory.human_prefix, memory.ai_prefix) == ("Human", "AI")
    assert memory.load_memory_variables({}) == {"history": ""}


def test_save_then_load_as_text(mem: ConversationMemory) -> None:
    """A saved exchange loads back as prefixed lines."""
    memory = TieredConversationMemory(memory=mem, session_id="s")
    memory.save_context({"input": "Hi, I'm Ada."}, {"response": "Hello Ada!"})
    assert memory.load_memory_variables({"input": "next"}) == {
        "history": "Human: Hi, I'm Ada.\nAI: Hello Ada!"
    }


def test_save_then_load_as_messages(mem: ConversationMemory) -> None:
    """return_messages=True returns HumanMessage/AIMessage objects under memory_key."""
    memory = TieredConversationMemory(
        memory=mem, session_id="s", return_messages=True, memory_key="chat"
    )
    memory.save_context({"question": "2+2?"}, {"answer": "4"})
    loaded = memory.load_memory_variables({})["chat"]
    assert [type(m) for m in loaded] == [HumanMessage, AIMessage]
    assert [m.content for m in loaded] == ["2+2?", "4"]


def test_custom_prefixes(mem: ConversationMemory) -> None:
    """human_prefix and ai_prefix label the text form."""
    memory = TieredConversationMemory(
        memory=mem, session_id="s", human_prefix="User", ai_prefix="Bot"
    )
    memory.save_context({"input": "ping"}, {"output": "pong"})
    assert memory.load_memory_variables({})["history"] == "User: ping\nBot: pong"


def test_explicit_keys_pick_among_several(mem: ConversationMemory) -> None:
    """input_key and output_key choose which values are stored."""
    memory = TieredConversationMemory(
        memory=mem, session_id="s", input_key="q", output_key="a", return_messages=True
    )
    memory.save_context({"q": "asked", "lang": "en"}, {"a": "answered", "cost": "1"})
    assert [m.content for m in memory.load_memory_variables({})["history"]] == [
        "asked",
        "answered",
    ]


def test_ambiguous_keys_raise(mem: ConversationMemory) -> None:
    """Several inputs or outputs without explicit keys raise ValueError and store nothing."""
    memory = TieredConversationMemory(memory=mem, session_id="s")
    with pytest.raises(ValueError):
        memory.save_context({"a": "1", "b": "2"}, {"output": "x"})
    with pytest.raises(ValueError, match="output_key"):
        memory.save_context({"input": "1"}, {"x": "1", "y": "2"})
    assert mem.get_entries("s") == []


def test_output_key_defaults_to_output_among_several(mem: ConversationMemory) -> None:
    """Among several outputs, "output" is stored, as BaseChatMemory does."""
    memory = TieredConversationMemory(memory=mem, session_id="s", return_messages=True)
    memory.save_context({"input": "i"}, {"output": "chosen", "extra": "ignored"})
    assert memory.load_memory_variables({})["history"][1].content == "chosen"


def test_clear_deletes_the_session(mem: ConversationMemory) -> None:
    """clear removes every entry of the session and nothing else."""
    memory = TieredConversationMemory(memory=mem, session_id="s")
    other = TieredConversationMemory(memory=mem, session_id="other")
    memory.save_context({"input": "a"}, {"output": "b"})
    other.save_context({"input": "c"}, {"output": "d"})
    memory.clear()
    assert memory.load_memory_variables({}) == {"history": ""}
    assert other.load_memory_variables({})["history"] == "Human: c\nAI: d"


async def test_async_twins(mem: ConversationMemory) -> None:
    """asave_context, aload_memory_variables and aclear use the async API."""
    memory = TieredConversationMemory(memory=mem, session_id="s")
    await memory.asave_context({"input": "a"}, {"output": "b"})
    assert await memory.aload_memory_variables({}) == {"history": "Human: a\nAI: b"}
    await memory.aclear()
    assert await memory.aload_memory_variables({}) == {"history": ""}


@pytest.mark.parametrize("return_messages", [True, False])
def test_loads_within_max_tokens_when_the_summarizer_fails(
    tmp_path: Path, return_messages: bool
) -> None:
    """A chain's history stays within the memory's max_tokens, as messages or as
    text, when every compression fails; every exchange stays stored."""
    config = MemoryConfig(max_tokens=150, recent_window=4, min_entries_to_compress=4)
    url = f"sqlite:///{tmp_path}/classic.db"
    summarizer = FakeSummarizer(mode="raise")
    with ConversationMemory(url=url, config=config, summarizer=summarizer) as mem:
        memory = TieredConversationMemory(
            memory=mem, session_id="s", return_messages=return_messages
        )
        for turn in range(40):
            memory.save_context(
                {"input": f"question {turn}: when does order {turn} ship?"},
                {"response": f"Order {turn} ships within two days of payment."},
            )
            history = memory.load_memory_variables({})["history"]
            if return_messages:
                assert mem.counter.count_messages(history) <= 150
            else:
                assert mem.counter.count_text(history) <= 150
        assert mem.get_stats("s").total_entries == 80


def test_buffer_is_the_loaded_context(mem: ConversationMemory) -> None:
    """buffer and abuffer return what load_memory_variables gives, as on the summary buffer."""
    memory = TieredConversationMemory(memory=mem, session_id="s")
    memory.save_context({"input": "Hi, I'm Ada."}, {"response": "Hello Ada!"})
    assert memory.buffer == "Human: Hi, I'm Ada.\nAI: Hello Ada!"
    as_messages = TieredConversationMemory(memory=mem, session_id="s", return_messages=True)
    assert as_messages.buffer == [HumanMessage("Hi, I'm Ada."), AIMessage("Hello Ada!")]
    assert asyncio.run(memory.abuffer()) == memory.buffer


@pytest.mark.parametrize(
    ("inputs", "outputs", "said"),
    [
        ({"input": "Hi"}, {}, "no output to store: outputs is empty"),
        ({}, {"response": "Hello"}, "no human input to store"),
        ({"history": "old", "stop": ["\n"]}, {"response": "Hello"}, "no human input to store"),
        ({"a": "1", "b": "2"}, {"output": "x"}, "several inputs ['a', 'b']"),
        ({"input": "1"}, {"x": "1", "y": "2"}, "several outputs ['x', 'y']"),
    ],
)
def test_a_turn_that_cannot_be_stored_says_what_is_wrong(
    mem: ConversationMemory, inputs: dict[str, object], outputs: dict[str, object], said: str
) -> None:
    """A missing or ambiguous input or output is named, sync and async; nothing stored."""
    memory = TieredConversationMemory(memory=mem, session_id="s")
    with pytest.raises(InvalidArgument, match=re.escape(said)):
        memory.save_context(inputs, outputs)
    with pytest.raises(InvalidArgument, match=re.escape(said)):
        asyncio.run(memory.asave_context(inputs, outputs))
    assert mem.get_entries("s") == []


def test_a_chosen_key_that_is_absent_is_named(mem: ConversationMemory) -> None:
    """An input_key or output_key the chain did not produce is an InvalidArgument, not
    a KeyError."""
    memory = TieredConversationMemory(memory=mem, session_id="s", input_key="q", output_key="a")
    with pytest.raises(InvalidArgument, match=r"input_key 'q' is not among the inputs \['x'\]"):
        memory.save_context({"x": "1"}, {"a": "2"})
    with pytest.raises(InvalidArgument, match=r"output_key 'a' is not among the outputs \['b'\]"):
        memory.save_context({"q": "1"}, {"b": "2"})
    assert mem.get_entries("s") == []
