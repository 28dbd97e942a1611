"""What providers require of a message list, checked without calling them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from typing import Literal, cast

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .messages import tool_call_ids
from .tool_pairs import pair_messages

__all__ = ["Provider", "provider_shape_problems"]

#: The providers whose message rules :func:`provider_shape_problems` knows.
Provider = Literal["openai", "anthropic"]


def provider_shape_problems(
    messages: Sequence[BaseMessage],
    provider: Provider = "openai",
    *,
    pending: Collection[str] = (),
    allow_pending_tail: bool = True,
    unique_ids: bool = True,
) -> list[str]:
    """Problems a chat provider would reject in ``messages`` (empty when valid).

    Both rules: every assistant message with tool calls is immediately followed
    by exactly one result per call (any order) and by nothing else first; every
    tool result belongs to the assistant message just before its run of
    results; call ids are unique. Anthropic additionally needs every call id
    to be non-empty.

    Args:
        pending: ids of calls known to be still running (their results have not
            been added yet); a missing result of theirs is no problem wherever
            they are, since no store can place a result it does not have (a
            stand-in result right after the call is fine too).
        allow_pending_tail: also exempt unanswered calls of the last assistant
            message (a conversation in progress).
        unique_ids: call ids are unique in the whole conversation; with ``False``
            only within one assistant message (an id may return once answered).
    """
    problems: list[str] = []
    exempt = set(pending)
    seen: Counter[str] = Counter()
    pairs = pair_messages(messages)
    caller = -1  # the last message that is not a tool result: its results may follow

    def late(index: int) -> set[str]:
        """The calls of ``caller`` not answered before ``index``, none exempt."""
        calls = pairs.calls.get(caller)
        if not calls:  # most messages make none
            return set()
        answered = {
            cast("ToolMessage", messages[i]).tool_call_id
            for i in pairs.answers.get(caller, [])
            if i < index
        }
        return set(calls) - answered - exempt

    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if pairs.owner.get(index) != caller:
                problems.append(
                    f"message {index}: tool result {message.tool_call_id!r} "
                    "does not follow its call"
                )
            continue
        missing = late(index)
        if missing:
            problems.append(f"message {index}: calls {sorted(missing)} are not answered in time")
        caller = index
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = tool_call_ids(message)
            if unique_ids:
                seen.update(ids)
            else:
                problems += [
                    f"message {index}: tool call id {cid!r} appears {n} times"
                    for cid, n in Counter(ids).items()
                    if n > 1
                ]
            if provider == "anthropic":
                problems += [f"message {index}: a tool call without an id" for c in ids if not c]
    missing = late(len(messages))
    if missing and not allow_pending_tail:
        problems.append(f"the conversation ends with unanswered calls {sorted(missing)}")
    problems += [f"tool call id {cid!r} appears {n} times" for cid, n in seen.items() if n > 1]
    return problems
