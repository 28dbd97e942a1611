"""A console chatbot whose history lives in tiermem, through RunnableWithMessageHistory.

Needs only tiermem (``make demo`` installs it, as does ``make dist`` then
``pip install --find-links dist 'tiermem[offline]'``).
Run ``python examples/chatbot.py``. With ``TIERMEM_CHAT_MODEL`` set (for example
``openai:gpt-4o-mini``; then also ``pip install langchain`` and that provider's package,
and set its key) the bot and the summarizer use that model; otherwise a scripted bot
answers and tiermem uses its heuristic summary. On a terminal it reads your lines
(``/stats`` shows the memory, ``/quit`` or Ctrl-D ends); with piped input it plays a
scripted conversation.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from tiermem import ConversationMemory, MemoryConfig, is_summary_message

DEFAULT_URL = "sqlite:///chatbot.db"
SESSION = "console"
SCRIPT = [
    "Hi! I'm Ada and I'm planning a trip to Lisbon in May.",
    "I'd like to stay near Alfama, budget about 120 euros a night.",
    "I'm vegetarian, so food tips should take that into account.",
    "Also, I get seasick, so no boat tours please.",
    "What's a good day trip from Lisbon by train?",
    "How long does the train to Sintra take?",
    "Which palace in Sintra is the most colourful?",
    "Can you remind me what my budget per night was?",
    "Thanks! Summarize my trip constraints in one line.",
]
PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "You are a concise travel assistant."),
        MessagesPlaceholder("history"),
        ("human", "{input}"),
    ]
)


def _scripted_reply(prompt: PromptValue) -> AIMessage:
    """A deterministic stand-in for a chat model: reports what context it was given."""
    messages: list[BaseMessage] = prompt.to_messages()
    summary = any(is_summary_message(m) for m in messages)
    question = str(messages[-1].content)
    return AIMessage(
        f"(context: {len(messages)} messages{', with a summary' if summary else ''}) "
        f"Noted: {question[:60]}"
    )


def _model() -> tuple[Runnable[PromptValue, BaseMessage], BaseChatModel | None]:
    """The chat model and the summarizer: a real model if configured, else the script."""
    name = os.environ.get("TIERMEM_CHAT_MODEL")
    if name:
        # Imported here: only a real model needs the ``langchain`` package.
        from langchain.chat_models import init_chat_model

        model = init_chat_model(name)
        return model, model
    return RunnableLambda(_scripted_reply), None  # None: tiermem's heuristic summary


def _lines(interactive: bool) -> Iterator[str]:
    """The user's lines: typed on a terminal, or the scripted conversation."""
    if not interactive:
        yield from SCRIPT
        return
    while True:
        try:
            line = input("you> ").strip()
        except EOFError:
            return
        if line == "/quit":
            return
        if line:
            yield line


def chat(
    mem: ConversationMemory, model: Runnable[PromptValue, BaseMessage], lines: Iterable[str]
) -> None:
    """Answer each line, keeping the conversation in the memory's SESSION.

    Args:
        mem: The memory that stores (and compresses) the conversation.
        model: The chat model (or stand-in) that answers.
        lines: The user's messages; ``/stats`` prints the session's counters.
    """
    bot = RunnableWithMessageHistory(
        PROMPT | model,
        mem.history,
        input_messages_key="input",
        history_messages_key="history",
    )
    for line in lines:
        if line == "/stats":
            print(mem.get_stats(SESSION))
            continue
        print(f"you> {line}")
        reply = bot.invoke({"input": line}, {"configurable": {"session_id": SESSION}})
        print(f"bot> {reply.content}")


def main(url: str | None = None) -> None:
    """Run the chatbot on ``url`` (default: ``chatbot.db`` in the working directory).

    Args:
        url: A SQLAlchemy URL for the memory.
    """
    model, summarizer = _model()
    config = MemoryConfig(max_tokens=250, recent_window=6, min_entries_to_compress=4)
    interactive = sys.stdin.isatty()
    with ConversationMemory(url=url or DEFAULT_URL, config=config, summarizer=summarizer) as mem:
        if not interactive:  # the script starts afresh; a person on a terminal continues
            mem.clear_session(SESSION)
        chat(mem, model, _lines(interactive))
        stats = mem.get_stats(SESSION)
        print(
            f"memory: {stats.total_entries} entries, {stats.compressed_entries} compressed "
            f"into {stats.summaries} summaries; {stats.context_tokens} tokens in context"
        )


if __name__ == "__main__":
    main()
