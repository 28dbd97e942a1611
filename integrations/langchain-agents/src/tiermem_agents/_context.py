"""What the middleware hands the model: tiermem's context, without hiding what ``keep``
asked for or the turn in progress.

tiermem's context (``get_messages``) holds at most the memory's ``max_tokens``: when
a compression is behind (the summarizer failed) or the kept messages alone are larger,
it leaves the oldest active messages out. ``SummarizationMiddleware`` never drops a
message inside its ``keep`` window, and the model must see the question it answers, so
when tiermem's context leaves out part of the kept messages, the model gets instead
the summary and the kept messages, fitted to the budget: older kept messages are left
out first (counted in the head's note), never the newest human message nor the tool
exchange that follows it; a message of that turn larger than what is left is shown
truncated, with a marker saying so (its whole text stays stored in tiermem).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from tiermem import OMITTED_MARKER, TokenCounter, is_summary_message

__all__ = ["model_context", "safe_start", "turn_start"]


def safe_start(messages: Sequence[BaseMessage], index: int) -> int:
    """``index``, moved back to the assistant message whose tool calls the tool
    results at ``index`` answer, so a call is never split from its results."""
    start = index
    while 0 < start < len(messages) and isinstance(messages[start], ToolMessage):
        start -= 1
    call = messages[start] if start < index else None
    if isinstance(call, AIMessage) and call.tool_calls:
        return start
    return index


def turn_start(messages: Sequence[BaseMessage]) -> int:
    """Where the turn in progress begins: the newest human message (that is not
    tiermem's summary), else the last assistant tool call and its results."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and not is_summary_message(message):
            return index
    return safe_start(messages, max(len(messages) - 1, 0))


def model_context(
    rendered: list[BaseMessage],
    active: Sequence[BaseMessage],
    keep_from: int,
    budget: int,
    counter: TokenCounter,
) -> list[BaseMessage]:
    """The messages for the model.

    Args:
        rendered: tiermem's context (its head message, then active messages).
        active: every active (not summarized) message of the session, in order.
        keep_from: where the messages ``keep`` asks for begin in ``active``.
        budget: the memory's ``max_tokens``.
        counter: the memory's token counter.

    Returns:
        ``rendered`` when it shows every kept message and the turn in progress; else
        its head and those messages, fitted to ``budget`` (see the module docstring).
    """
    start = safe_start(active, min(keep_from, turn_start(active)))
    wanted = active[start:]
    shown = {_identity(m) for m in rendered}
    if all(_identity(m) in shown for m in wanted):
        return rendered
    head = next((m for m in rendered if is_summary_message(m)), None)
    turn = max(turn_start(active) - start, 0)
    room = budget - (counter.count_messages([head]) if head is not None else 0)
    kept, dropped = _fit(list(wanted), turn, room, counter.count_messages)
    kept = _truncated(kept, room, counter)
    hidden = start + dropped
    note = _note(head, hidden)
    return [note, *kept] if note is not None else kept


def _identity(message: BaseMessage) -> object:
    """What tells a message of the context from another: its id, else its content."""
    return message.id or (message.type, repr(message.content))


def _fit(
    messages: list[BaseMessage],
    turn: int,
    room: int,
    count: Callable[[Sequence[BaseMessage]], int],
) -> tuple[list[BaseMessage], int]:
    """``messages`` without their oldest ones (before index ``turn``, a tool call with
    its results at once) until they fit ``room``; and how many were left out."""
    dropped = 0
    while dropped < turn and count(messages[dropped:]) > room:
        step = dropped + 1
        while step < turn and isinstance(messages[step], ToolMessage):
            step += 1
        dropped = step
    return messages[dropped:], dropped


def _truncated(messages: list[BaseMessage], room: int, counter: TokenCounter) -> list[BaseMessage]:
    """``messages`` with their largest text contents cut, with a marker, until they fit
    ``room`` (a message whose content is not text is left whole)."""
    result = list(messages)
    for _ in range(len(result)):
        excess = counter.count_messages(result) - room
        if excess <= 0:
            break
        texts = [i for i, m in enumerate(result) if isinstance(m.content, str)]
        if not texts:
            break
        index = max(texts, key=lambda i: counter.count_message(result[i]))
        message = result[index]
        text = str(message.content)
        total = counter.count_text(text)
        marker = (
            f"\n[truncated to stay within the token budget: about {{cut}} of its {total} "
            "tokens are not shown; the whole message is stored in tiermem.]"
        )
        keep = max(total - excess - counter.count_text(marker.format(cut=total)), 0)
        cut = marker.format(cut=total - keep)
        result[index] = message.model_copy(update={"content": counter.truncate(text, keep) + cut})
    return result


def _note(head: BaseMessage | None, hidden: int) -> BaseMessage | None:
    """``head`` (tiermem's summary, with its note on the messages tiermem's context
    left out) noting ``hidden`` left-out messages instead; ``None`` when there is
    nothing to say. (tiermem's context has a head whenever it leaves a message out,
    and only then is its context replaced.)"""
    if head is None:
        return None
    content = str(head.content)
    body: str | None = content
    if OMITTED_MARKER in head.additional_kwargs:  # its note is the last paragraph
        body = content.rsplit("\n\n", 1)[0] if "\n\n" in content else None
    note = None
    if hidden:
        noun = "message is" if hidden == 1 else "messages are"
        note = (
            f"[{hidden} earlier {noun} not shown to stay within the token budget; "
            "they are stored and searchable.]"
        )
    if body is None and note is None:
        return None
    kwargs = {k: v for k, v in head.additional_kwargs.items() if k != OMITTED_MARKER}
    if hidden:
        kwargs[OMITTED_MARKER] = hidden
    content = "\n\n".join(part for part in (body, note) if part is not None)
    return head.model_copy(update={"content": content, "additional_kwargs": kwargs})
