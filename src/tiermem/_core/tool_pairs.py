"""Which tool results answer which tool calls: the one pairing walk, pure.

A call is open from the message making it until a result of its id arrives; a
result answers the latest earlier open call of its id, wherever it comes (other
messages may be stored between a call and its result). So an id may be reused once
it was answered, and a call made while an earlier call of its id is still open
takes the id over. A result that finds no open call of its id is an orphan.

Every tool rule reads this one pairing: the order a context is rendered in
(:func:`tiermem._core.render.provider_order`), the units the budget keeps or
leaves out whole (:func:`group_units`), the entries compression may take
(:mod:`tiermem._compression.policy`), the provider-shape rules
(:mod:`tiermem._core.shape`) and the structural rules an import enforces and the
doctor reports (:mod:`tiermem._core.structure`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .messages import tool_call_ids

__all__ = ["Step", "ToolPairs", "group_units", "message_step", "pair_messages", "pair_steps"]

#: What the walk needs of a message: the ids of the calls it makes, and the call id
#: it answers (``None`` unless it is a tool result).
Step = tuple[Sequence[str], str | None]
_NO_CALLS: tuple[str, ...] = ()
_NO_STEP: Step = (_NO_CALLS, None)


@dataclass(frozen=True, slots=True)
class ToolPairs:
    """The pairing of a sequence's tool calls and results, by position.

    Attributes:
        calls: the position of each message making calls -> the ids of its calls.
        answers: the position of a message making calls -> the positions of the
            results answering its calls, in the order they come.
        owner: the position of each result that answers a call -> the position of
            the message making that call.
        open: the id of each call still waiting for its result at the end -> the
            position of the message making it, in the order the calls were made (an
            id taken over keeps its place).
        orphans: the positions of results that answer no open call.
        reused: ``(position, id)`` of each call made while a call of its id was
            still open (it takes the id over), in order.
    """

    calls: dict[int, Sequence[str]]
    answers: dict[int, list[int]]
    owner: dict[int, int]
    open: dict[str, int]
    orphans: list[int]
    reused: list[tuple[int, str]]

    def complete(self, position: int) -> bool:
        """Whether every call the message at ``position`` makes has its result (true
        for a message making none). A call whose id a later call took over, or an id
        repeated within the message, never gets one."""
        return len(self.answers.get(position, ())) == len(self.calls.get(position, ()))

    def unanswered(self) -> dict[int, list[str]]:
        """The calls still open at the end: position of the message -> their ids."""
        waiting: dict[int, list[str]] = {}
        for call_id, position in self.open.items():
            waiting.setdefault(position, []).append(call_id)
        return waiting


def pair_steps(steps: Iterable[Step]) -> ToolPairs:
    """Walk ``steps`` (one per message, in order) and pair results with calls (see
    the module docstring)."""
    pairs = ToolPairs({}, {}, {}, {}, [], [])
    open_calls = pairs.open
    for position, (call_ids, answered) in enumerate(steps):
        if answered is not None:
            caller = open_calls.pop(answered, None)
            if caller is None:
                pairs.orphans.append(position)
            else:
                pairs.owner[position] = caller
                pairs.answers.setdefault(caller, []).append(position)
        if call_ids:
            pairs.calls[position] = call_ids
            for call_id in call_ids:
                if call_id in open_calls:
                    pairs.reused.append((position, call_id))
                open_calls[call_id] = position
    return pairs


def message_step(message: BaseMessage) -> Step:
    """The :data:`Step` of a message: its calls with an id (a call without one can
    never be answered, see :func:`~tiermem._core.messages.tool_call_ids`), and the
    call id it answers if it is a tool result."""
    if isinstance(message, ToolMessage):
        return _NO_CALLS, message.tool_call_id
    if isinstance(message, AIMessage) and message.tool_calls:  # most messages make none
        return tool_call_ids(message), None
    return _NO_STEP


def pair_messages(messages: Sequence[BaseMessage]) -> ToolPairs:
    """The pairing of ``messages`` (see :func:`pair_steps`)."""
    return pair_steps(map(message_step, messages))


def group_units(messages: Sequence[BaseMessage]) -> list[list[int]]:
    """Indices of ``messages`` (in provider order) grouped into units that are kept
    or left out whole: an assistant tool call with the results that directly follow
    it and answer it, or any other single message (a result coming later, after
    other messages or after an orphan, is a unit of its own)."""
    pairs = pair_messages(messages)
    units: list[list[int]] = []
    for index in range(len(messages)):
        if units and pairs.owner.get(index) == units[-1][0]:
            units[-1].append(index)
        else:
            units.append([index])
    return units
