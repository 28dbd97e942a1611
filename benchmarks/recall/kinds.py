"""The shape of a content bank of the recall dataset generator (``make_dataset.py``).

A bank is the vocabulary of one dataset file: the kinds of facts planted in its
conversations, the questions asked about them and the small talk around them. The
dev and held-out files use different banks, so tuning on one does not learn the
other's words.

Templates are ``str.format`` strings over a kind's slots. Question templates come
as (question, answer) pairs; a question list holds phrasings that share few words
with the statement and phrasings that share more, and one is drawn at random.
"""

from __future__ import annotations

from dataclasses import dataclass, field

QA = tuple[str, str]


@dataclass(frozen=True)
class Kind:
    """One kind of fact about the user.

    Attributes:
        name: its key.
        slots: the values each slot is drawn from (independently).
        says: the user stating a value.
        acks: the assistant's replies to a statement.
        noise: distractor user turns, filled with *other* values (shared words).
        asks: single-hop questions about the (first) value.
        event: a phrase naming the statement as an event, for temporal questions.
        when: temporal questions about when the statement happened.
        label: a short rendering of a value (answers listing several).
        key: the slot that must differ between values (changes, instances).
        changes: for a fact that changes: the user stating a new value (``{old_*}``
            slots name the previous one); as many changes as ``updates``.
        updates: how many times the value changes (0: never).
        asks_now: update questions: the latest value.
        asks_before: single-hop questions about the first value, once it changed.
        asks_history: multi-hop questions about every value in order.
        change_event: a phrase naming a change as an event.
        instances: for a fact that repeats (trips, books): how many times.
        asks_each: single-hop questions about one instance.
        asks_all: multi-hop questions about every instance.
    """

    name: str
    slots: dict[str, tuple[str, ...]]
    says: tuple[str, ...]
    acks: tuple[str, ...]
    noise: tuple[str, ...]
    asks: tuple[QA, ...] = ()
    event: str = ""
    when: tuple[QA, ...] = ()
    label: str = ""
    key: str = ""
    changes: tuple[str, ...] = ()
    updates: int = 0
    asks_now: tuple[QA, ...] = ()
    asks_before: tuple[QA, ...] = ()
    asks_history: tuple[QA, ...] = ()
    change_event: str = ""
    instances: int = 0
    asks_each: tuple[QA, ...] = ()
    asks_all: tuple[QA, ...] = ()


@dataclass(frozen=True)
class Bank:
    """Everything one dataset file is written from.

    Attributes:
        kinds: the facts planted in every conversation.
        fillers: (user, assistant) exchanges of task talk and small talk, with slots
            drawn from ``filler_slots``.
        greetings: (user, assistant) exchanges that open a session.
        wrappers: ``{text}`` framings of a user statement ("Oh, by the way, {text}").
        noise_replies: the assistant's replies to a distractor turn.
        first_names: names of the users (one per conversation).
    """

    kinds: tuple[Kind, ...]
    fillers: tuple[tuple[str, str], ...]
    filler_slots: dict[str, tuple[str, ...]]
    greetings: tuple[tuple[str, str], ...]
    wrappers: tuple[str, ...]
    noise_replies: tuple[str, ...]
    first_names: tuple[str, ...] = field(default=())
