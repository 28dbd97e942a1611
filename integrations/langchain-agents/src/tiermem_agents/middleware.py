"""``TieredMemoryMiddleware``: a lossless drop-in for ``SummarizationMiddleware``."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from langchain.agents.middleware.summarization import ContextSize
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from tiermem import ConversationMemory, MemoryEntry, is_summary_message
from tiermem.errors import (
    CompressionConflict,
    CompressionInProgress,
    InvalidArgument,
    InvalidSessionId,
    SummarizationError,
)

from ._cache_marks import mark_summary
from ._context import model_context
from ._policy import (
    Trigger,
    copy_trigger,
    keep_count,
    normalize_trigger,
    should_compress,
    validate_context_size,
)
from ._recorded import RecordedMessages

__all__ = ["TieredMemoryMiddleware", "session_id_from_config"]

logger = logging.getLogger(__name__)

#: Compression failures after which the turn goes on with the state unchanged.
_RECOVERABLE = (SummarizationError, CompressionInProgress, CompressionConflict)

TokenCounter = Callable[[Sequence[BaseMessage]], int]


def session_id_from_config(config: RunnableConfig, session_key: str) -> str:
    """Read the tiermem session id from a runnable config.

    Args:
        config: The config the agent (or tool) was invoked with.
        session_key: The ``configurable`` key that holds the session id.

    Returns:
        The session id, as a string.

    Raises:
        InvalidSessionId: When the key is missing.
    """
    value = config.get("configurable", {}).get(session_key)
    if value is None or value == "":
        msg = (
            f"no tiermem session id: invoke the agent with "
            f"config={{'configurable': {{{session_key!r}: '<conversation id>'}}}}"
        )
        raise InvalidSessionId(msg)
    return str(value)


def _profile_limit(model: BaseChatModel | None) -> int | None:
    """The model profile's ``max_input_tokens``, if known."""
    profile = getattr(model, "profile", None) if model is not None else None
    limit = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return limit if isinstance(limit, int) else None


def _identity(message: BaseMessage) -> object:
    """What makes two renderings of a message the same: its id and content (a message
    shown truncated differs); the summary's content."""
    return (
        ("summary", message.content)
        if is_summary_message(message)
        else (
            message.id,
            message.content,
        )
    )


def _same_content(recorded: object, content: object) -> bool:
    """Whether a message's content is the one recorded (the same object, mostly)."""
    return recorded is content or recorded == content


def _unstored(revised: list[BaseMessage], entries: Sequence[MemoryEntry]) -> list[BaseMessage]:
    """The revisions no entry of the session holds yet (``TieredSaver`` stores each
    revision itself, when it stores the checkpoint that holds it)."""
    stored = {(e.message.id, repr(e.message.content)) for e in entries}
    return [m for m in revised if (m.id, repr(m.content)) not in stored]


class TieredMemoryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Records every agent message in tiermem and compresses losslessly.

    Takes the ``trigger`` and ``keep`` forms of ``SummarizationMiddleware``. Before
    each model call, the agent state is recorded in the session named by
    ``config["configurable"][session_key]`` (messages already stored are skipped, so
    resuming from a checkpointer never duplicates). When the trigger is met, tiermem
    compresses the older entries, and the state becomes tiermem's summary message
    (in ``summary_role``) followed by the kept messages. A tool call is never split
    from its results, the originals stay searchable (see
    :func:`tiermem_agents.recall_tool`), and when the summarizer fails the turn goes
    on with tiermem's context, which still fits the memory's ``max_tokens``: the
    oldest messages that do not fit are left out of it (stored, compressed later)
    and its first message says how many (tiermem sends
    ``compression_failed``). The messages ``keep`` asks for and the turn in
    progress (the newest human message and the tool exchange after it) are never
    hidden: where tiermem's context would leave them out, the model gets them
    fitted to ``max_tokens``, an oversized one truncated with a marker
    (:mod:`tiermem_agents._context`).

    The agent needs a checkpointer (the state it compresses is the thread's), and
    ``tiermem_langgraph.TieredSaver`` is the one with which each message is stored
    once. One store: with ``TieredMemoryMiddleware(saver.memory)`` and the default
    ``session_key="thread_id"``, the middleware's session is the thread's session,
    whose entries the saver stores (every namespace of the thread included). The
    saver appends each message when it stores the checkpoint that holds it, so the
    middleware's record finds it there by id and writes nothing (what it does
    record first, as with ``durability="exit"``, the saver reuses: same id and
    JSON); compression summarizes those entries, and the summary and kept messages
    put in the state are what the next checkpoint holds: the summary in the list
    row (never an entry), the kept messages as references to their entries. An edit
    through ``update_state`` (same id, new content) is a new entry, a revision,
    which the saver stores with its checkpoint; on another checkpointer the
    middleware stores it, from its own record of the contents it stored. (A message
    removed from the state stays an active entry: tiermem has no removal yet.)

    Example:
        ```python
        saver = TieredSaver(mem)
        agent = create_agent(
            model,
            tools=[search, recall_tool(mem)],
            middleware=[TieredMemoryMiddleware(mem, trigger=("tokens", 4000))],
            checkpointer=saver,
        )
        agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "t1"}})
        ```
    """

    def __init__(
        self,
        memory: ConversationMemory,
        *,
        trigger: Trigger | None = None,
        keep: ContextSize | None = None,
        session_key: str = "thread_id",
        token_counter: TokenCounter | None = None,
        model: BaseChatModel | None = None,
        summary_role: Literal["human", "system"] = "human",
        cache_control: Mapping[str, Any] | None = None,
    ) -> None:
        """Create the middleware.

        Args:
            memory: Where messages are recorded and compressed.
            trigger: When to compress, as in ``SummarizationMiddleware``:
                ``("tokens", n)``, ``("messages", n)``, ``("fraction", f)``, a
                ``{"tokens": n, "messages": m}`` AND clause, or a list (OR). ``None``
                uses the memory's ``MemoryConfig``: ``("tokens", max_tokens)`` or
                ``("messages", max_entries)``.
            keep: How much recent history stays verbatim: ``("messages", n)``,
                ``("tokens", n)`` or ``("fraction", f)``. ``None`` keeps the memory's
                ``recent_window`` messages.
            session_key: The ``configurable`` key holding the session id.
            token_counter: Counts the state's tokens for the trigger; defaults to
                the memory's tiktoken counter.
            model: The agent's chat model; only its profile's ``max_input_tokens``
                is read, for ``fraction`` thresholds.
            summary_role: How the summary reaches the agent state and the model:
                ``"human"``, a ``HumanMessage`` as ``SummarizationMiddleware`` sends
                (several providers refuse a system message after the first turn), or
                ``"system"``, tiermem's own ``SystemMessage``. Either way
                ``is_summary_message`` recognizes it and it is never stored back.
            cache_control: For providers that take explicit prompt-cache
                breakpoints, e.g. ``{"type": "ephemeral"}`` for Anthropic's: each
                model request gets it on the summary message's last content block,
                the end of the prefix that stays the same between compressions
                (the agent state is not changed). ``None``: no mark.

        Raises:
            ValueError: On a malformed trigger or keep, or when a ``fraction`` is
                used and the model's context size is unknown.
            InvalidArgument: On an unknown ``summary_role``.
        """
        super().__init__()
        self.memory = memory
        # Validated in SummarizationMiddleware's order, with its messages, so code
        # written against one catches the same errors from the other.
        self.trigger = (
            copy_trigger(trigger) if trigger is not None else self._default_trigger(memory)
        )
        self._clauses = normalize_trigger(self.trigger)
        self.keep: ContextSize = validate_context_size(
            keep if keep is not None else ("messages", memory.config.recent_window), "keep"
        )
        if summary_role not in ("human", "system"):
            msg = f"summary_role must be 'human' or 'system', got {summary_role!r}"
            raise InvalidArgument(msg)
        self.summary_role = summary_role
        self.cache_control = dict(cache_control) if cache_control is not None else None
        self.session_key = session_key
        self.token_counter: TokenCounter = token_counter or memory.counter.count_messages
        self.max_input_tokens = _profile_limit(model)
        self._recorded = RecordedMessages()
        uses_fraction = any("fraction" in c for c in self._clauses) or self.keep[0] == "fraction"
        if uses_fraction and self.max_input_tokens is None:
            msg = (
                "Model profile information is required to use fractional token limits, "
                "and is unavailable for the specified model. Please use absolute token "
                "counts instead, or pass "
                '`\n\nChatModel(..., profile={"max_input_tokens": ...})`.\n\n'
                "with a desired integer value of the model's maximum input tokens."
            )
            raise ValueError(msg)

    @staticmethod
    def _default_trigger(memory: ConversationMemory) -> Trigger:
        """The trigger the memory's own config implies."""
        most = memory.config.max_entries
        if most is None:  # only tokens trigger compression
            return [("tokens", memory.config.max_tokens)]
        return [("tokens", memory.config.max_tokens), ("messages", most)]

    def _session_id(self) -> str:
        """The session of the running agent invocation."""
        return session_id_from_config(get_config(), self.session_key)

    def _pending(
        self, session_id: str, messages: Sequence[AnyMessage]
    ) -> tuple[list[BaseMessage], list[BaseMessage]]:
        """The state's messages not known to be stored, minus tiermem's summary; and
        the known ones whose content changed since (edits: revisions).

        Every message gets an id (as ``SummarizationMiddleware`` does), which is what
        makes recording idempotent.
        """
        known = self._recorded.known(session_id)
        pending: list[BaseMessage] = []
        revised: list[BaseMessage] = []
        for message in messages:
            if is_summary_message(message):
                continue
            if message.id is None:
                message.id = str(uuid.uuid4())
            if message.id not in known:
                pending.append(message)
            elif not _same_content(known[message.id], message.content):
                revised.append(message)
        return pending, revised

    def _remember(self, session_id: str, messages: Sequence[BaseMessage]) -> None:
        """Note that every message of the state is now stored."""
        self._recorded.remember(session_id, messages)

    def _record(self, session_id: str, messages: Sequence[AnyMessage]) -> None:
        """Store the state's new messages and revisions (idempotent)."""
        pending, revised = self._pending(session_id, messages)
        if pending:
            self.memory.add_messages(session_id, pending, skip_existing=True)
        if revised:
            entries = self.memory.get_entries(session_id)
            revised = _unstored(revised, entries)
        if revised:
            self.memory.add_messages(session_id, revised)
        self._remember(session_id, messages)

    async def _arecord(self, session_id: str, messages: Sequence[AnyMessage]) -> None:
        """Async twin of :meth:`_record`."""
        pending, revised = self._pending(session_id, messages)
        if pending:
            await self.memory.aadd_messages(session_id, pending, skip_existing=True)
        if revised:
            entries = await self.memory.aget_entries(session_id)
            revised = _unstored(revised, entries)
        if revised:
            await self.memory.aadd_messages(session_id, revised)
        self._remember(session_id, messages)

    def _triggered(self, messages: Sequence[AnyMessage]) -> bool:
        """Whether the state's size meets the trigger."""
        if not self._clauses:
            return False
        return should_compress(
            self._clauses,
            messages=len(messages),
            tokens=self.token_counter(messages),
            max_input_tokens=self.max_input_tokens,
        )

    def _keep_last(self, active: Sequence[BaseMessage]) -> int:
        """How many of the session's active messages stay verbatim."""
        return keep_count(self.keep, active, self.token_counter, self.max_input_tokens)

    def _context(
        self, rendered: list[BaseMessage], entries: Sequence[MemoryEntry]
    ) -> list[BaseMessage]:
        """What the model gets: tiermem's context, unless it hides kept messages or the
        turn in progress (see :mod:`tiermem_agents._context`)."""
        active = [entry.message for entry in entries]
        keep_from = len(active) - self._keep_last(active)
        budget = self.memory.config.max_tokens
        return model_context(rendered, active, keep_from, budget, self.memory.counter)

    def _in_role(self, message: BaseMessage) -> BaseMessage:
        """tiermem's summary in ``summary_role``; any other message unchanged."""
        if self.summary_role == "system" or not is_summary_message(message):
            return message
        kwargs = {**message.additional_kwargs, "lc_source": "summarization"}
        return HumanMessage(content=message.content, id=message.id, additional_kwargs=kwargs)

    def _replacement(
        self, session_id: str, state: Sequence[AnyMessage], rendered: list[BaseMessage]
    ) -> dict[str, Any] | None:
        """The state update that swaps the state for tiermem's context, if it differs.
        Its messages are noted as recorded: one shown truncated is no revision."""
        if [_identity(m) for m in state] == [_identity(m) for m in rendered]:
            return None
        replaced = list(map(self._in_role, rendered))
        self._remember(session_id, replaced)
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *replaced]}

    def _marked(self, request: ModelRequest) -> ModelRequest:
        """``request`` with the cache breakpoint on tiermem's summary, if asked for."""
        if self.cache_control is None:
            return request
        marked = mark_summary(request.messages, self.cache_control)
        return request if marked is None else request.override(messages=marked)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        """The model call, its request marked for the provider's prompt cache."""
        return handler(self._marked(request))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """Async :meth:`wrap_model_call`."""
        return await handler(self._marked(request))

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record the state; compress and replace it when the trigger is met.

        Args:
            state: The agent state.
            runtime: The graph runtime (unused; the session comes from the config).

        Returns:
            ``None``, or an update replacing the messages with summary + kept ones.
        """
        session_id = self._session_id()
        messages = state["messages"]
        self._record(session_id, messages)
        if not self._triggered(messages):
            return None
        # ``keep`` counts the session's active messages, not the part of them that
        # tiermem's context (cut to max_tokens) shows.
        active = [entry.message for entry in self.memory.get_active_entries(session_id)]
        try:
            self.memory.compress(session_id, force=True, keep=self._keep_last(active))
        except _RECOVERABLE as exc:
            # The context tiermem renders still fits max_tokens: it leaves out the
            # oldest messages (stored, compressed later) instead of summarizing them.
            logger.log(
                exc.log_level, "tiermem compression failed; the turn goes on within budget: %s", exc
            )
        rendered = self.memory.get_messages(session_id, query="")
        context = self._context(rendered, self.memory.get_active_entries(session_id))
        return self._replacement(session_id, messages, context)

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of :meth:`before_model`.

        Args:
            state: The agent state.
            runtime: The graph runtime (unused; the session comes from the config).

        Returns:
            ``None``, or an update replacing the messages with summary + kept ones.
        """
        session_id = self._session_id()
        messages = state["messages"]
        await self._arecord(session_id, messages)
        if not self._triggered(messages):
            return None
        entries = await self.memory.aget_active_entries(session_id)
        active = [entry.message for entry in entries]
        try:
            await self.memory.acompress(session_id, force=True, keep=self._keep_last(active))
        except _RECOVERABLE as exc:
            logger.log(
                exc.log_level, "tiermem compression failed; the turn goes on within budget: %s", exc
            )
        rendered = await self.memory.aget_messages(session_id, query="")
        context = self._context(rendered, await self.memory.aget_active_entries(session_id))
        return self._replacement(session_id, messages, context)

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record the model's answer as soon as it exists.

        Args:
            state: The agent state.
            runtime: The graph runtime (unused).

        Returns:
            ``None``: the state is not changed.
        """
        self._record(self._session_id(), state["messages"])
        return None

    async def aafter_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of :meth:`after_model`.

        Args:
            state: The agent state.
            runtime: The graph runtime (unused).

        Returns:
            ``None``: the state is not changed.
        """
        await self._arecord(self._session_id(), state["messages"])
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record what the run ended with (e.g. results of ``return_direct`` tools).

        Args:
            state: The agent state.
            runtime: The graph runtime (unused).

        Returns:
            ``None``: the state is not changed.
        """
        return self.after_model(state, runtime)

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of :meth:`after_agent`.

        Args:
            state: The agent state.
            runtime: The graph runtime (unused).

        Returns:
            ``None``: the state is not changed.
        """
        return await self.aafter_model(state, runtime)
