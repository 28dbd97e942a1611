"""``TieredConversationMemory``: tiermem behind the legacy ``BaseMemory`` interface."""

from __future__ import annotations

from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    get_buffer_string,
)
from langchain_core.prompts import BasePromptTemplate
from pydantic import PrivateAttr
from tiermem import ConversationMemory, is_summary_message
from tiermem.errors import InvalidArgument

from ._keywords import budget_changes, check_keywords, summary_prompt

__all__ = ["TieredConversationMemory"]

#: The fields that shape the store a conversation is read and written through.
_STORE_FIELDS = frozenset({"memory", "max_token_limit", "llm", "prompt"})


class TieredConversationMemory(BaseMemory):
    """A drop-in for ``ConversationSummaryBufferMemory``, persisted and lossless.

    Each ``save_context`` stores the human input and the AI output in the tiermem
    session ``session_id``; tiermem counts tokens with tiktoken and, when the budget
    is passed, summarizes the oldest turns while keeping the originals searchable.
    ``load_memory_variables`` returns tiermem's context: the summary as a system
    message, then the recent turns, as a string (``"System: ...\\nHuman: ...\\nAI:
    ..."``) or as messages. Any number of instances, in any process, share a session
    through the database.

    It takes every keyword of ``ConversationSummaryBufferMemory``: ``max_token_limit``
    makes the context budget this conversation's (as many recent messages verbatim as
    fit, the summary included), ``llm`` its summarizer and ``prompt`` its summary
    prompt, all on a copy of ``memory`` (``ConversationMemory.with_config``), so the
    memory's other sessions keep its own settings. ``chat_memory``,
    ``moving_summary_buffer`` and unknown keywords raise ``InvalidArgument`` saying
    what to use instead.

    Example:
        ```python
        memory = TieredConversationMemory(
            memory=mem, session_id="user-42", llm=llm, max_token_limit=2000
        )
        chain = ConversationChain(llm=llm, memory=memory)
        chain.invoke({"input": "Hi, I'm Ada."})
        ```
    """

    memory: ConversationMemory
    """The tiermem store holding the conversation."""
    session_id: str
    """The conversation's session in ``memory``."""
    memory_key: str = "history"
    """The chain input variable the history is loaded into."""
    return_messages: bool = False
    """Return a list of messages instead of one string."""
    input_key: str | None = None
    """The chain input to store; by default the only input that is not a memory key."""
    output_key: str | None = None
    """The chain output to store; by default the only output (or ``"output"``)."""
    human_prefix: str = "Human"
    """Speaker label of human turns in the string form."""
    ai_prefix: str = "AI"
    """Speaker label of AI turns in the string form."""
    max_token_limit: int | None = None
    """The context budget in tokens, the summary included; ``None``: the memory's
    ``MemoryConfig`` applies as it is."""
    llm: Any = None
    """The model that summarizes this conversation (any summarizer tiermem takes);
    ``None``: the memory's summarizer."""
    prompt: BasePromptTemplate | None = None  # type: ignore[type-arg]  # pydantic: no generic
    """A summary prompt with ``{summary}`` and ``{new_lines}``; ``None``: the memory's."""
    summary_message_cls: type[BaseMessage] = SystemMessage
    """The message class the summary is loaded as."""

    _store: ConversationMemory = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        """Validate the keywords, then build the session's store.

        Raises:
            InvalidArgument: a keyword this class does not take (``chat_memory``,
                ``moving_summary_buffer``, a misspelling), a ``max_token_limit``
                below 1, a ``prompt`` without exactly ``summary`` and
                ``new_lines``, a ``summary_message_cls`` that cannot hold a summary,
                or an ``llm`` that cannot summarize.
        """
        # Checked before pydantic, which would wrap an InvalidArgument in its own error.
        check_keywords(type(self).model_fields, data)
        super().__init__(**data)
        self._store = self._conversation_store()

    def __setattr__(self, name: str, value: Any) -> None:
        """Set a field as the constructor would: checked, and the store rebuilt when
        the field shapes it (``memory.max_token_limit = 500`` takes effect).

        Raises:
            InvalidArgument: as the constructor does for the same keyword.
        """
        if not name.startswith("_"):
            check_keywords(type(self).model_fields, {name: value})
        before = getattr(self, name, None)
        super().__setattr__(name, value)
        if name in _STORE_FIELDS:
            try:
                self._store = self._conversation_store()
            except InvalidArgument:
                super().__setattr__(name, before)  # a refused value leaves nothing changed
                raise

    def _conversation_store(self) -> ConversationMemory:
        """``memory``, or a copy of it with this conversation's budget, summarizer
        and prompt."""
        changes: dict[str, Any] = {}
        if self.max_token_limit is not None:
            changes.update(budget_changes(self.max_token_limit))
        if self.prompt is not None:
            changes["summary_prompt"] = summary_prompt(self.prompt)
        if not changes and self.llm is None:
            return self.memory
        store = self.memory.with_config(**changes)
        if self.llm is not None:
            try:
                store.set_summarizer(self.llm)
            except InvalidArgument as exc:
                raise InvalidArgument(f"llm cannot summarize: {exc}") from exc
        return store

    @property
    def moving_summary_buffer(self) -> str:
        """The session's summaries, oldest first, as one text ("" before the first)."""
        return "\n\n".join(s.content for s in self._store.get_summaries(self.session_id))

    @property
    def memory_variables(self) -> list[str]:
        """The single variable this memory provides: ``[memory_key]``."""
        return [self.memory_key]

    @property
    def buffer(self) -> str | list[BaseMessage]:
        """The session's context, as ``load_memory_variables({})[memory_key]`` gives it."""
        return self.load_memory_variables({})[self.memory_key]  # type: ignore[no-any-return]

    async def abuffer(self) -> str | list[BaseMessage]:
        """Async twin of :attr:`buffer`.

        Returns:
            The session's context: a string, or messages with ``return_messages=True``.
        """
        return (await self.aload_memory_variables({}))[self.memory_key]  # type: ignore[no-any-return]

    def _render(self, messages: list[BaseMessage]) -> dict[str, Any]:
        """Shape the context as the chain expects it, the summary as
        ``summary_message_cls``."""
        if self.summary_message_cls is not SystemMessage:
            messages = [self._summary_as_class(m) for m in messages]
        if self.return_messages:
            return {self.memory_key: messages}
        text = get_buffer_string(messages, human_prefix=self.human_prefix, ai_prefix=self.ai_prefix)
        return {self.memory_key: text}

    def _summary_as_class(self, message: BaseMessage) -> BaseMessage:
        """tiermem's summary message as a ``summary_message_cls``; others unchanged."""
        if not (isinstance(message, SystemMessage) and is_summary_message(message)):
            return message
        return self.summary_message_cls(
            content=message.content, id=message.id, additional_kwargs=message.additional_kwargs
        )

    def _turn(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> list[BaseMessage]:
        """The human and AI messages of one chain run.

        Raises:
            InvalidArgument: the input or the output to store is missing or ambiguous;
                the message says which keys there are and how to choose.
        """
        input_key = self._input_key(inputs)
        output_key = self._output_key(outputs)
        return [
            HumanMessage(content=str(inputs[input_key])),
            AIMessage(content=str(outputs[output_key])),
        ]

    def _input_key(self, inputs: dict[str, Any]) -> str:
        """The key of the human input in ``inputs``: ``input_key``, or the only key
        that is neither this memory's variable nor ``stop``."""
        if self.input_key is not None:
            if self.input_key not in inputs:
                raise InvalidArgument(
                    f"save_context: input_key {self.input_key!r} is not among the "
                    f"inputs {sorted(inputs)}"
                )
            return self.input_key
        candidates = sorted(set(inputs) - {*self.memory_variables, "stop"})
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            raise InvalidArgument(
                f"save_context: no human input to store: inputs {sorted(inputs)} hold only "
                f"the memory's {self.memory_key!r} (and 'stop'); pass the chain's "
                "inputs, e.g. {'input': 'Hi'}"
            )
        raise InvalidArgument(
            f"save_context: several inputs {candidates}; pass "
            "TieredConversationMemory(input_key=...) to say which to store"
        )

    def _output_key(self, outputs: dict[str, Any]) -> str:
        """The key of the AI output in ``outputs``: ``output_key``, the only key, or
        ``"output"`` among several."""
        if self.output_key is not None:
            if self.output_key not in outputs:
                raise InvalidArgument(
                    f"save_context: output_key {self.output_key!r} is not among the "
                    f"outputs {sorted(outputs)}"
                )
            return self.output_key
        if len(outputs) == 1:
            return next(iter(outputs))
        if "output" in outputs:
            return "output"
        if not outputs:
            raise InvalidArgument(
                "save_context: no output to store: outputs is empty; pass the chain's "
                "outputs, e.g. {'response': 'Hello'}"
            )
        raise InvalidArgument(
            f"save_context: several outputs {sorted(outputs)}; pass "
            "TieredConversationMemory(output_key=...) to say which to store"
        )

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Return the session's context under ``memory_key``.

        Args:
            inputs: The chain inputs (unused: the whole context is returned).

        Returns:
            ``{memory_key: str}``, or ``{memory_key: list[BaseMessage]}`` with
            ``return_messages=True``.
        """
        return self._render(self._store.get_messages(self.session_id))

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async twin of :meth:`load_memory_variables`.

        Args:
            inputs: The chain inputs (unused).

        Returns:
            The context under ``memory_key``.
        """
        return self._render(await self._store.aget_messages(self.session_id))

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Store one human/AI exchange; tiermem compresses when over budget.

        Args:
            inputs: The chain inputs; ``input_key`` (or the only non-memory key) is stored.
            outputs: The chain outputs; ``output_key`` (or the only key) is stored.

        Raises:
            InvalidArgument: (a ``ValueError``) the input or output to store is missing
                or ambiguous; nothing is stored.
        """
        self._store.add_messages(self.session_id, self._turn(inputs, outputs))

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Async twin of :meth:`save_context`.

        Args:
            inputs: The chain inputs.
            outputs: The chain outputs.

        Raises:
            InvalidArgument: (a ``ValueError``) the input or output to store is missing
                or ambiguous; nothing is stored.
        """
        await self._store.aadd_messages(self.session_id, self._turn(inputs, outputs))

    def clear(self) -> None:
        """Delete the session's entries and summaries."""
        self._store.clear_session(self.session_id)

    async def aclear(self) -> None:
        """Async twin of :meth:`clear`."""
        await self._store.aclear_session(self.session_id)
