"""Retrieval evaluation datasets: typed loading and validation.

A dataset is one JSON object (documented in ``benchmarks/recall/README.md``)::

    {"conversations": [{"id", "sessions": [{"id", "date", "turns": [{"id", "role",
     "content"}]}]}],
     "questions": [{"id", "conversation", "question", "category", "evidence": [turn ids],
     "answer"?}]}

Every problem is a :class:`~tiermem.errors.DatasetInvalid` whose ``path`` names the
offending field, raised before anything is stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from .._core.files import read_at_most
from .._core.messages import validate_session_id
from ..errors import DatasetInvalid, InvalidSessionId

__all__ = [
    "Conversation",
    "Dataset",
    "Question",
    "Session",
    "MAX_DATASET_BYTES",
    "Turn",
    "load_dataset",
    "parse_dataset",
]

Role = Literal["user", "assistant"]
#: The largest dataset file :func:`load_dataset` reads (the shipped ones are under 1 MB).
MAX_DATASET_BYTES = 64 * 1024 * 1024
_Item = TypeVar("_Item", "Conversation", "Session", "Question")


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a session; ``id`` is unique in the dataset."""

    id: str
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class Session:
    """A dated run of turns (sessions of a conversation are in date order)."""

    id: str
    date: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    """The sessions of one user, stored as one tiermem session of id ``id``."""

    id: str
    sessions: tuple[Session, ...]

    @property
    def last_date(self) -> datetime:
        """When its last session took place."""
        return self.sessions[-1].date


@dataclass(frozen=True, slots=True)
class Question:
    """A question about one conversation and the turns that answer it."""

    id: str
    conversation: str
    question: str
    category: str
    evidence: tuple[str, ...]
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class Dataset:
    """Conversations and the questions asked about them."""

    conversations: tuple[Conversation, ...]
    questions: tuple[Question, ...]
    name: str = "dataset"

    def categories(self) -> list[str]:
        """The question categories, sorted."""
        return sorted({question.category for question in self.questions})


def load_dataset(path: str | Path) -> Dataset:
    """Read and validate a dataset file.

    Raises:
        DatasetInvalid: the file cannot be read, is larger than ``MAX_DATASET_BYTES``,
            is not UTF-8 JSON or breaks the schema.
    """
    path = Path(path)
    try:
        raw = read_at_most(path, MAX_DATASET_BYTES)
        if raw is None:
            raise DatasetInvalid(f"{path} is larger than {MAX_DATASET_BYTES} bytes")
        data = json.loads(raw)
    except OSError as error:
        raise DatasetInvalid(f"cannot read {path}: {error.strerror or error}") from error
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetInvalid(f"{path} is not UTF-8 JSON: {error}") from error
    return parse_dataset(data, name=path.stem)


def parse_dataset(data: object, *, name: str = "dataset") -> Dataset:
    """Validate decoded JSON into a :class:`Dataset`.

    Raises:
        DatasetInvalid: for the first field that breaks the schema.
    """
    root = _object(data, "$", ("conversations", "questions"))
    turn_ids: dict[str, str] = {}  # turn id -> its conversation
    conversations = _unique(
        [
            _conversation(raw, f"$.conversations[{i}]", turn_ids)
            for i, raw in enumerate(_list(root["conversations"], "$.conversations"))
        ],
        "$.conversations",
    )
    known = {conversation.id for conversation in conversations}
    questions = _unique(
        [
            _question(raw, f"$.questions[{i}]", known, turn_ids)
            for i, raw in enumerate(_list(root["questions"], "$.questions"))
        ],
        "$.questions",
    )
    label = root.get("name", name)
    return Dataset(tuple(conversations), tuple(questions), _text(label, "$.name"))


def _conversation(raw: object, path: str, turn_ids: dict[str, str]) -> Conversation:
    item = _object(raw, path, ("id", "sessions"))
    cid = _identifier(item["id"], f"{path}.id")
    sessions = _unique(
        [
            _session(value, f"{path}.sessions[{i}]", cid, turn_ids)
            for i, value in enumerate(_list(item["sessions"], f"{path}.sessions"))
        ],
        f"{path}.sessions",
    )
    for i in range(1, len(sessions)):
        if sessions[i].date < sessions[i - 1].date:
            raise DatasetInvalid(
                "sessions must be in date order", path=f"{path}.sessions[{i}].date"
            )
    return Conversation(cid, tuple(sessions))


def _session(raw: object, path: str, conversation: str, turn_ids: dict[str, str]) -> Session:
    item = _object(raw, path, ("id", "date", "turns"))
    turns = []
    for i, value in enumerate(_list(item["turns"], f"{path}.turns")):
        where = f"{path}.turns[{i}]"
        turn = _object(value, where, ("id", "role", "content"))
        tid = _identifier(turn["id"], f"{where}.id")
        if tid in turn_ids:
            raise DatasetInvalid(f"duplicate turn id {tid!r}", path=f"{where}.id")
        turn_ids[tid] = conversation
        role = turn["role"]
        if role not in ("user", "assistant"):
            raise DatasetInvalid(f"role must be 'user' or 'assistant', got {role!r}", path=where)
        turns.append(Turn(tid, role, _text(turn["content"], f"{where}.content")))
    return Session(_identifier(item["id"], f"{path}.id"), _date(item["date"], path), tuple(turns))


def _question(raw: object, path: str, known: set[str], turn_ids: Mapping[str, str]) -> Question:
    item = _object(raw, path, ("id", "conversation", "question", "category", "evidence"))
    conversation = _text(item["conversation"], f"{path}.conversation")
    if conversation not in known:
        raise DatasetInvalid(f"no conversation {conversation!r}", path=f"{path}.conversation")
    evidence = [
        _text(value, f"{path}.evidence[{i}]")
        for i, value in enumerate(_list(item["evidence"], f"{path}.evidence"))
    ]
    for i, tid in enumerate(evidence):
        if turn_ids.get(tid) != conversation:
            raise DatasetInvalid(
                f"{tid!r} is no turn of conversation {conversation!r}", path=f"{path}.evidence[{i}]"
            )
    if len(set(evidence)) != len(evidence):
        raise DatasetInvalid("evidence lists a turn twice", path=f"{path}.evidence")
    answer = item.get("answer")
    return Question(
        id=_identifier(item["id"], f"{path}.id"),
        conversation=conversation,
        question=_text(item["question"], f"{path}.question"),
        category=_text(item["category"], f"{path}.category"),
        evidence=tuple(evidence),
        answer=None if answer is None else _text(answer, f"{path}.answer"),
    )


def _object(raw: object, path: str, required: Sequence[str]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise DatasetInvalid(f"expected an object, got {type(raw).__name__}", path=path)
    for key in required:
        if key not in raw:
            raise DatasetInvalid(f"missing field {key!r}", path=path)
    return raw


def _list(raw: object, path: str) -> list[Any]:
    if not isinstance(raw, list) or not raw:
        raise DatasetInvalid("expected a non-empty list", path=path)
    return raw


def _text(raw: object, path: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise DatasetInvalid("expected a non-empty string", path=path)
    return raw


def _identifier(raw: object, path: str) -> str:
    """An id follows tiermem's session id rule (ids become session and message ids)."""
    try:
        return validate_session_id(raw, "id")
    except InvalidSessionId as error:
        raise DatasetInvalid(str(error), path=path) from error


def _date(raw: object, path: str) -> datetime:
    """An ISO 8601 date or datetime; a date is midnight UTC, a naive time is UTC."""
    text = _text(raw, f"{path}.date")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as error:
        raise DatasetInvalid(f"not an ISO 8601 date: {text!r}", path=f"{path}.date") from error
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _unique(items: list[_Item], path: str) -> list[_Item]:
    seen: set[str] = set()
    for i, item in enumerate(items):
        if item.id in seen:
            raise DatasetInvalid(f"duplicate id {item.id!r}", path=f"{path}[{i}].id")
        seen.add(item.id)
    return items
