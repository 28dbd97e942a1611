"""A legacy ConversationChain with tiermem in place of ConversationSummaryBufferMemory.

Needs tiermem and ``tiermem-classic`` (which brings ``langchain-classic``), not on a
package index: ``make demo`` installs both, or from the repository's root
``pip install -e '.[offline]' -e integrations/langchain-classic``.
Run ``python examples/legacy_chain.py``: it starts the conversation afresh, and a second
``TieredConversationMemory`` on the same session then reads it back from the database.
With ``TIERMEM_CHAT_MODEL`` set (then also ``pip install langchain`` and the provider's
package) the chain and the summarizer use that model; otherwise a scripted LLM answers
and tiermem writes its heuristic summary.
"""

from __future__ import annotations

import os
from typing import Any

from langchain_classic.chains import ConversationChain
from langchain_core.language_models import BaseChatModel, BaseLanguageModel
from langchain_core.language_models.fake import FakeListLLM
from tiermem_classic import TieredConversationMemory

from tiermem import ConversationMemory, MemoryConfig

DEFAULT_URL = "sqlite:///legacy_chain.db"
SESSION = "legacy-user"
TURNS = [
    "My name is Grace and I maintain a COBOL payroll system.",
    "It runs nightly batch jobs on a mainframe.",
    "We want to expose the payroll totals through a REST API.",
    "The API must never write to the mainframe datasets.",
    "Which language would you use for the API layer?",
    "Remind me: what must the API never do?",
]


def _llm() -> tuple[BaseLanguageModel[Any], BaseChatModel | None]:
    """The chain's model and the summarizer: real if configured, else scripted."""
    name = os.environ.get("TIERMEM_CHAT_MODEL")
    if name:
        # Imported here: only a real model needs the ``langchain`` package.
        from langchain.chat_models import init_chat_model

        model = init_chat_model(name)
        return model, model
    answers = [f"Understood ({i + 1}). Anything else about the payroll project?" for i in range(50)]
    return FakeListLLM(responses=answers), None


def main(url: str | None = None) -> None:
    """Talk through the legacy chain on ``url`` (default: ``legacy_chain.db`` here).

    Args:
        url: A SQLAlchemy URL for the memory.
    """
    llm, summarizer = _llm()
    config = MemoryConfig(max_tokens=150, recent_window=4, min_entries_to_compress=4)
    with ConversationMemory(url=url or DEFAULT_URL, config=config, summarizer=summarizer) as mem:
        memory = TieredConversationMemory(memory=mem, session_id=SESSION)
        memory.clear()  # start afresh: the file keeps what an earlier run stored
        chain = ConversationChain(llm=llm, memory=memory)
        for turn in TURNS:
            print(f"Human: {turn}")
            print(f"AI: {chain.invoke({'input': turn})['response']}")
        print("\nWhat the next prompt will contain (read by another instance):")
        reader = TieredConversationMemory(memory=mem, session_id=SESSION)
        print(reader.load_memory_variables({})["history"])
        stats = mem.get_stats(SESSION)
        print(
            f"\n{stats.total_entries} entries stored, {stats.compressed_entries} summarized; "
            f"search still finds them: {mem.search('COBOL', session_id=SESSION)[0].entry.content}"
        )


if __name__ == "__main__":
    main()
