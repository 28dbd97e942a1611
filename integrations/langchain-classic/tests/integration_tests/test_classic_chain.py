"""TieredConversationMemory inside legacy chains with a fake LLM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_classic.chains import ConversationChain, LLMChain
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.prompts import PromptTemplate
from pydantic import Field
from tiermem import ConversationMemory, MemoryConfig
from tiermem.testing import FakeSummarizer, SignalRecorder, check_invariants

from tiermem_classic import TieredConversationMemory


class RecordingLLM(FakeListLLM):
    """FakeListLLM that keeps every prompt it receives."""

    prompts: list[str] = Field(default_factory=list)

    def _call(self, prompt: str, *args: Any, **kwargs: Any) -> str:
        """Record the prompt, then answer with the next scripted response."""
        self.prompts.append(prompt)
        return super()._call(prompt, *args, **kwargs)

    async def _acall(self, prompt: str, *args: Any, **kwargs: Any) -> str:
        """Async twin of :meth:`_call`."""
        return self._call(prompt)


def _open(url: str) -> ConversationMemory:
    """A memory that compresses once a session passes 250 tokens or 8 entries."""
    config = MemoryConfig(max_tokens=250, max_entries=8, recent_window=4, summary_share=0.4)
    return ConversationMemory(url=url, config=config, summarizer=FakeSummarizer())


@pytest.fixture(name="url")
def fixture_url(tmp_path: Path) -> str:
    """A SQLite database file in tmp_path."""
    return f"sqlite:///{tmp_path}/chain.db"


@pytest.fixture(name="mem")
def fixture_mem(url: str) -> Iterator[ConversationMemory]:
    """A compressing memory, checked for invariants afterwards."""
    with _open(url) as mem:
        yield mem
        check_invariants(mem.engine)


def _responses(count: int) -> list[str]:
    """Scripted answers, each naming its turn."""
    return [f"Noted fact number {i}; anything else?" for i in range(count)]


def test_conversation_chain_compresses_and_prompts_with_summary(mem: ConversationMemory) -> None:
    """Over many turns tiermem summarizes, and the LLM is prompted with summary + recent turns."""
    llm = RecordingLLM(responses=_responses(20))
    memory = TieredConversationMemory(memory=mem, session_id="chat")
    chain = ConversationChain(llm=llm, memory=memory)
    with SignalRecorder(sender=mem).recording() as recorder:
        for turn in range(20):
            result = chain.invoke({"input": f"Remember fact {turn}: the sky is shade {turn}."})
            assert result["response"] == f"Noted fact number {turn}; anything else?"
    assert recorder.of("compressed")
    stats = mem.get_stats("chat")
    assert stats.total_entries == 40 and stats.compressed_entries > 0
    assert stats.active_entries <= 8
    last = llm.prompts[-1]
    assert "System: Summary of the earlier conversation:" in last
    assert "Human: Remember fact 18: the sky is shade 18." in last
    assert "Human: Remember fact 0:" not in last
    assert max(len(p) for p in llm.prompts[10:]) < 2 * len(llm.prompts[5])


def test_history_persists_across_instances(url: str) -> None:
    """A new memory object on the same database continues the conversation."""
    with _open(url) as first:
        chain = ConversationChain(
            llm=RecordingLLM(responses=["Hi Ada."]),
            memory=TieredConversationMemory(memory=first, session_id="ada"),
        )
        chain.invoke({"input": "My name is Ada."})
    with _open(url) as second:
        llm = RecordingLLM(responses=["You are Ada."])
        chain = ConversationChain(
            llm=llm, memory=TieredConversationMemory(memory=second, session_id="ada")
        )
        chain.invoke({"input": "Who am I?"})
        assert "Human: My name is Ada.\nAI: Hi Ada." in llm.prompts[0]
        assert second.get_stats("ada").total_entries == 4
        check_invariants(second.engine)


def test_llm_chain_with_custom_keys(mem: ConversationMemory) -> None:
    """An LLMChain with its own prompt variables stores the chosen input and output."""
    prompt = PromptTemplate.from_template("{chat}\nTopic: {topic}\nUser: {question}\nBot:")
    memory = TieredConversationMemory(
        memory=mem,
        session_id="llm",
        memory_key="chat",
        input_key="question",
        human_prefix="User",
        ai_prefix="Bot",
    )
    llm = RecordingLLM(responses=["Paris.", "About 2 million."])
    chain = LLMChain(llm=llm, prompt=prompt, memory=memory)
    chain.invoke({"question": "Capital of France?", "topic": "geo"})
    chain.invoke({"question": "Population?", "topic": "geo"})
    assert llm.prompts[1].startswith("User: Capital of France?\nBot: Paris.\nTopic: geo")
    assert memory.load_memory_variables({})["chat"].endswith(
        "User: Population?\nBot: About 2 million."
    )


def test_search_finds_summarized_turns(mem: ConversationMemory) -> None:
    """Turns summarized away by the chain's memory stay searchable in tiermem."""
    chain = ConversationChain(
        llm=RecordingLLM(responses=_responses(12)),
        memory=TieredConversationMemory(memory=mem, session_id="chat"),
    )
    for turn in range(12):
        chain.invoke({"input": f"My locker code is zulu{turn}."})
    hits = mem.search("zulu0", session_id="chat")
    assert hits and hits[0].entry.compressed
    assert "zulu0" in hits[0].entry.content


async def test_async_chain(mem: ConversationMemory) -> None:
    """ainvoke goes through aload_memory_variables and asave_context."""
    llm = RecordingLLM(responses=_responses(3))
    chain = ConversationChain(llm=llm, memory=TieredConversationMemory(memory=mem, session_id="a"))
    for turn in range(3):
        await chain.ainvoke({"input": f"async turn {turn}"})
    assert "Human: async turn 1" in llm.prompts[2]
    assert (await mem.aget_stats("a")).total_entries == 6
