"""``TieredConversationMemory``: tiermem behind the legacy ``BaseMemory`` interface."""

from __future__ import annotations

from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, get_buffer_string
from tiermem import ConversationMemory
from tiermem.errors import InvalidArgument

__all__ = ["TieredConversationMemory"]


class TieredConversationMemory(BaseMemory):
    """A drop-in for ``ConversationSummaryBufferMemory``, persisted and lossless.

    Each ``save_context`` stores the human input and the AI output in the tiermem
    session ``session_id``; tiermem counts tokens with tiktoken and, when its
    ``MemoryConfig`` budget is passed, summarizes the oldest turns with its own
    summarizer while keeping the originals searchable. ``load_memory_variables``
    returns tiermem's context: the summary as a system message, then the recent
    turns, as a string (``"System: ...\\nHuman: ...\\nAI: ..."``) or as messages.
    Any number of instances, in any process, share a session through the database.

    Example:
        ```python
        memory = TieredConversationMemory(memory=mem, session_id="user-42")
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
        """Shape the context as the chain expects it."""
        if self.return_messages:
            return {self.memory_key: messages}
        text = get_buffer_string(messages, human_prefix=self.human_prefix, ai_prefix=self.ai_prefix)
        return {self.memory_key: text}

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
        return self._render(self.memory.get_messages(self.session_id))

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async twin of :meth:`load_memory_variables`.

        Args:
            inputs: The chain inputs (unused).

        Returns:
            The context under ``memory_key``.
        """
        return self._render(await self.memory.aget_messages(self.session_id))

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Store one human/AI exchange; tiermem compresses when over budget.

        Args:
            inputs: The chain inputs; ``input_key`` (or the only non-memory key) is stored.
            outputs: The chain outputs; ``output_key`` (or the only key) is stored.

        Raises:
            InvalidArgument: (a ``ValueError``) the input or output to store is missing
                or ambiguous; nothing is stored.
        """
        self.memory.add_messages(self.session_id, self._turn(inputs, outputs))

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Async twin of :meth:`save_context`.

        Args:
            inputs: The chain inputs.
            outputs: The chain outputs.

        Raises:
            InvalidArgument: (a ``ValueError``) the input or output to store is missing
                or ambiguous; nothing is stored.
        """
        await self.memory.aadd_messages(self.session_id, self._turn(inputs, outputs))

    def clear(self) -> None:
        """Delete the session's entries and summaries."""
        self.memory.clear_session(self.session_id)

    async def aclear(self) -> None:
        """Async twin of :meth:`clear`."""
        await self.memory.aclear_session(self.session_id)
