"""Every keyword of ConversationSummaryBufferMemory is accepted with its meaning or
refused with an InvalidArgument that names it, as the README's table says."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_classic.memory import ConversationSummaryBufferMemory
from langchain_classic.memory.prompt import SUMMARY_PROMPT
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage
from langchain_core.prompts import PromptTemplate
from pydantic import Field
from tiermem import ConversationMemory
from tiermem.errors import InvalidArgument
from tiermem.testing import check_invariants

from tiermem_classic import TieredConversationMemory

README = Path(__file__).resolve().parents[2] / "README.md"
INCUMBENT = list(ConversationSummaryBufferMemory.model_fields)
REFUSED = {"chat_memory", "moving_summary_buffer"}


def _refused_value(name: str) -> Any:
    """A value of a refused keyword, as code written for the incumbent passes it."""
    if name == "chat_memory":
        return InMemoryChatMessageHistory()
    return "The user is Ada."


class RecordingChatModel(FakeListChatModel):
    """A fake chat model that keeps the text of every prompt it is sent."""

    prompts: list[str] = Field(default_factory=list)

    def _call(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> str:
        """Record the prompt, then answer with the scripted summary."""
        self.prompts.append(str(messages[-1].content))
        return super()._call(messages, *args, **kwargs)


@pytest.fixture(name="mem")
def fixture_mem(backend_url: str) -> Iterator[ConversationMemory]:
    """A memory with the default config (no summarizer of its own)."""
    with ConversationMemory(url=backend_url) as mem:
        yield mem
        check_invariants(mem.engine)


def _documented() -> dict[str, str]:
    """The README's keyword table: each keyword named in a row's first cell -> the row."""
    rows: dict[str, str] = {}
    for line in README.read_text("utf-8").splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            for name in re.findall(r"`(\w+)`", first):
                rows[name] = line
    return rows


def _fill(memory: TieredConversationMemory, turns: int) -> None:
    """Store ``turns`` exchanges about parcels."""
    for turn in range(turns):
        memory.save_context(
            {"input": f"Question {turn}: where is parcel {turn} on its way to Lyon today?"},
            {"output": f"Parcel {turn} left the Paris warehouse and arrives in two days."},
        )


def test_every_incumbent_keyword_is_accepted_or_refused_as_documented(tmp_path: Path) -> None:
    """Each field of ConversationSummaryBufferMemory is a field here, or passing it
    raises InvalidArgument naming it; none is dropped silently, and the README's
    table has a row for each that says which."""
    rows = _documented()
    fields = TieredConversationMemory.model_fields
    refused = set()
    with ConversationMemory(url=f"sqlite:///{tmp_path}/k.db") as mem:
        for name in INCUMBENT:
            if name in fields:
                continue
            with pytest.raises(InvalidArgument, match=name):
                TieredConversationMemory(memory=mem, session_id="s", **{name: _refused_value(name)})
            refused.add(name)
    assert refused == REFUSED
    assert [name for name in INCUMBENT if name not in rows] == []
    assert {name for name in INCUMBENT if "Refused" in rows[name]} == REFUSED


@pytest.mark.parametrize(
    ("name", "instead"),
    [
        ("chat_memory", "pass memory=ConversationMemory(...) and session_id=..."),
        ("moving_summary_buffer", "memory.get_summaries(session_id)"),
    ],
)
def test_a_refused_keyword_says_what_to_use_instead(
    tmp_path: Path, name: str, instead: str
) -> None:
    """The refusal names the keyword and its replacement, at construction and when
    assigned afterwards."""
    with ConversationMemory(url=f"sqlite:///{tmp_path}/k.db") as mem:
        with pytest.raises(InvalidArgument, match=re.escape(instead)):
            TieredConversationMemory(memory=mem, session_id="s", **{name: _refused_value(name)})
        memory = TieredConversationMemory(memory=mem, session_id="s")
        with pytest.raises(InvalidArgument, match=name):
            setattr(memory, name, _refused_value(name))


def test_an_unknown_keyword_is_refused(tmp_path: Path) -> None:
    """A misspelt keyword, which LangChain's memories ignore, names the field meant."""
    with ConversationMemory(url=f"sqlite:///{tmp_path}/k.db") as mem:
        with pytest.raises(InvalidArgument, match="did you mean 'max_token_limit'"):
            TieredConversationMemory(memory=mem, session_id="s", max_tokens_limit=500)


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "500"])
def test_a_bad_max_token_limit_is_refused(tmp_path: Path, limit: Any) -> None:
    """max_token_limit must be an int >= 1, at construction and when assigned."""
    with ConversationMemory(url=f"sqlite:///{tmp_path}/k.db") as mem:
        with pytest.raises(InvalidArgument, match="max_token_limit must be an int >= 1"):
            TieredConversationMemory(memory=mem, session_id="s", max_token_limit=limit)
        memory = TieredConversationMemory(memory=mem, session_id="s", max_token_limit=500)
        with pytest.raises(InvalidArgument, match="max_token_limit"):
            memory.max_token_limit = limit
        assert memory.max_token_limit == 500


def test_llm_summarizes_this_conversation(mem: ConversationMemory) -> None:
    """llm is the summarizer of this conversation only; moving_summary_buffer reads
    what it wrote."""
    llm = RecordingChatModel(responses=["Parcels travel from Paris to Lyon."])
    memory = TieredConversationMemory(memory=mem, session_id="s", llm=llm, max_token_limit=150)
    assert memory.moving_summary_buffer == ""
    _fill(memory, 6)
    assert llm.prompts
    assert memory.moving_summary_buffer.startswith("Parcels travel from Paris to Lyon.")
    history = memory.load_memory_variables({})["history"]
    assert history.startswith("System: Summary of the earlier conversation:\nParcels")
    assert mem.context.summarizer is None  # the memory's own summarizer is unchanged


def test_an_llm_that_cannot_summarize_is_refused(tmp_path: Path) -> None:
    """An llm tiermem cannot call is an InvalidArgument naming llm."""
    with ConversationMemory(url=f"sqlite:///{tmp_path}/k.db") as mem:
        with pytest.raises(InvalidArgument, match="llm cannot summarize"):
            TieredConversationMemory(memory=mem, session_id="s", llm=42)


def test_prompt_is_the_summary_prompt(mem: ConversationMemory) -> None:
    """prompt reaches the summarizer with the lines to summarize as {new_lines} and an
    empty {summary}; the incumbent's own default prompt is accepted too."""
    prompt = PromptTemplate.from_template("Shorten{summary} these lines:\n{new_lines}\nShort:")
    llm = RecordingChatModel(responses=["Parcels travel to Lyon."])
    memory = TieredConversationMemory(
        memory=mem, session_id="s", llm=llm, prompt=prompt, max_token_limit=150
    )
    _fill(memory, 6)
    assert llm.prompts[0].startswith("Shorten these lines:\nUser: Question 0:")
    assert llm.prompts[0].endswith("\nShort:")
    TieredConversationMemory(memory=mem, session_id="t", prompt=SUMMARY_PROMPT)


def test_a_prompt_without_its_variables_is_refused(tmp_path: Path) -> None:
    """As the incumbent requires, the prompt's variables are exactly summary and new_lines."""
    with ConversationMemory(url=f"sqlite:///{tmp_path}/k.db") as mem:
        with pytest.raises(InvalidArgument, match=r"needs exactly \['new_lines', 'summary'\]"):
            TieredConversationMemory(
                memory=mem, session_id="s", prompt=PromptTemplate.from_template("{lines}")
            )


@pytest.mark.parametrize(
    ("cls", "line"), [(HumanMessage, "Human: Summary"), (AIMessage, "AI: Summary")]
)
def test_summary_message_cls_is_the_summary_s_class(
    mem: ConversationMemory, cls: type[BaseMessage], line: str
) -> None:
    """The summary loads as summary_message_cls, as a message and in the text form."""
    llm = RecordingChatModel(responses=["Parcels travel to Lyon."])
    memory = TieredConversationMemory(
        memory=mem,
        session_id="s",
        llm=llm,
        max_token_limit=150,
        summary_message_cls=cls,
        return_messages=True,
    )
    _fill(memory, 6)
    first = memory.load_memory_variables({})["history"][0]
    assert type(first) is cls and "Parcels travel to Lyon." in first.content
    memory.return_messages = False
    history = memory.load_memory_variables({})["history"]
    assert history.startswith(f"{line} of the earlier conversation:")


@pytest.mark.parametrize("cls", [ChatMessage, str, 5])
def test_a_summary_message_cls_that_cannot_hold_a_summary_is_refused(
    tmp_path: Path, cls: Any
) -> None:
    """A class that needs more than content (ChatMessage's role), or no message class."""
    with ConversationMemory(url=f"sqlite:///{tmp_path}/k.db") as mem:
        with pytest.raises(InvalidArgument, match="summary_message_cls"):
            TieredConversationMemory(memory=mem, session_id="s", summary_message_cls=cls)
