"""tiermem as the chat history of LangChain's ``RunnableWithMessageHistory``.

Needs only tiermem (``make demo`` installs it, as does ``make dist`` then
``pip install --find-links dist 'tiermem[offline]'``, and
the ``postgres`` extra for a PostgreSQL URL).

``mem.history`` is the ``get_session_history`` callable: each session id gets a
chat history backed by tiermem. The chain is handed the summaries plus the recent
messages; every message is stored, and old ones are summarized once the token
budget is passed (the originals stay recallable). A fake chat model answers and
tiermem's heuristic summary compresses, so this runs without an API key::

    python examples/history.py                      # ./history.db
    python examples/history.py sqlite:///other.db   # or a PostgreSQL URL
"""

from __future__ import annotations

import asyncio
import sys

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from tiermem import ConversationMemory, MemoryConfig, is_summary_message

DEFAULT_URL = "sqlite:///history.db"
QUESTIONS = [
    "Hi, I'm Grace. I need to plan a three-day trip to Kyoto in April.",
    "I prefer quiet temples over crowded ones. Any suggestions?",
    "What is the best way to get there from Osaka?",
    "I'm allergic to peanuts; is that a problem with local food?",
    "Which neighbourhood should I stay in for an early start?",
    "Can you list the three things I told you about myself?",
]
PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "You are a concise travel assistant."),
        MessagesPlaceholder("history"),
        ("human", "{input}"),
    ]
)


def build_chain(memory: ConversationMemory) -> RunnableWithMessageHistory:
    """A prompt and a fake chat model, with tiermem keeping each session's history."""
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage("Noted. Kyoto in April is cherry-blossom season, so book early."),
            AIMessage("Try Honen-in and Gio-ji: small, mossy and calm in the morning."),
            AIMessage("Take the JR Special Rapid from Osaka Station: about 30 minutes."),
            AIMessage("Ask for peanut-free dishes; carry a card in Japanese to be safe."),
            AIMessage("Stay near Kyoto Station for early trains and buses."),
        ]
    )
    return RunnableWithMessageHistory(
        PROMPT | model,
        memory.history,
        input_messages_key="input",
        history_messages_key="history",
    )


async def _continue_async(chain: RunnableWithMessageHistory, session_id: str) -> str:
    """One more turn through the async API (``ainvoke``, ``aget_messages``...)."""
    config = {"configurable": {"session_id": session_id}}
    reply = await chain.ainvoke({"input": "Thanks! One last tip?"}, config=config)  # type: ignore[arg-type]
    return str(reply.content)


def main(url: str | None = None) -> None:
    """Chat through the chain, then show what tiermem stored and handed the model."""
    memory = ConversationMemory(
        url or DEFAULT_URL,
        config=MemoryConfig(max_tokens=250, recent_window=4, min_entries_to_compress=2),
    )
    try:
        memory.clear_session("grace")  # start afresh: the file keeps an earlier run's turns
        chain = build_chain(memory)
        config = {"configurable": {"session_id": "grace"}}
        for question in QUESTIONS:
            reply = chain.invoke({"input": question}, config=config)  # type: ignore[arg-type]
            print(f"user: {question}\nbot:  {reply.content}")
        print(f"bot (async): {asyncio.run(_continue_async(chain, 'grace'))}")

        stats = memory.get_stats("grace")
        context = memory.get_messages("grace")
        summarized = any(is_summary_message(m) for m in context)
        print(
            f"\nstored {stats.total_entries} messages, {stats.compressed_entries} of them "
            f"summarized into {stats.summaries} summary(ies); the model now sees "
            f"{len(context)} messages, {stats.context_tokens} tokens"
            f"{' (summary first)' if summarized else ''}"
        )
        for summary in memory.get_summaries("grace"):
            originals = memory.expand_summary(summary.id)
            print(f"summary of {len(originals)} messages: {summary.content}")
    finally:
        memory.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
