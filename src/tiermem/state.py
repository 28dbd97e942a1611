"""Export and import of one session: a versioned, validated, deterministic snapshot.

``SessionState.to_json()`` is canonical (sorted keys, no spaces), so
``export(import(export(s))) == export(s)`` byte for byte. Import parses
strictly (no NaN or Infinity, no duplicate keys, bounded depth and size),
validates structure (dense seqs, summary ranges, tool pairing) and writes
everything in one transaction, or nothing. Token counts are recomputed with
the importing memory's encoding; stored counts are never trusted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa
from langchain_core.messages import BaseMessage, ToolMessage, messages_from_dict
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy.engine import Connection

from . import _failpoints, fts, store
from ._messages import (
    classify,
    dumps,
    render_text,
    store_text,
    tool_call_ids,
    validate_session_id,
)
from .errors import ImportValidationError, InvalidArgument, SessionNotFound
from .models import EntryType, MemoryEntry, MemorySummary
from .tables import entry_table, session_table, summary_table
from .tiers import MemoryTier
from .tokens import TokenCounter

__all__ = ["SCHEMA_VERSION", "ExportedEntry", "ExportedSummary", "SessionState"]

SCHEMA_VERSION: Literal[1] = 1
MAX_IMPORT_BYTES = 512 * 1024 * 1024
MAX_DEPTH = 200


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _aware(value: datetime) -> datetime:
    """Every datetime of an export carries its UTC offset and is kept in UTC: a naive
    one could be any zone, and would not round-trip byte for byte."""
    if value.tzinfo is None:
        raise ValueError("datetimes must carry a UTC offset")
    return value.astimezone(UTC)


class ExportedSummary(_Strict):
    """A summary in an export; ``parent`` is the index of its merged summary."""

    content: str = Field(min_length=1)
    level: int = Field(ge=1)
    first_seq: int = Field(ge=1)
    last_seq: int = Field(ge=1)
    created_at: datetime
    start_time: datetime
    end_time: datetime
    parent: int | None = None

    _aware_times = field_validator("created_at", "start_time", "end_time")(_aware)


class ExportedEntry(_Strict):
    """An entry in an export; ``summary`` is the index of the summary covering it."""

    seq: int = Field(ge=1)
    type: EntryType
    role: str
    message: dict[str, Any]
    timestamp: datetime
    pinned: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    summary: int | None = None

    _aware_times = field_validator("timestamp")(_aware)


class SessionState(_Strict):
    """A whole session: entries in seq order, summaries oldest first."""

    schema_version: Literal[1] = SCHEMA_VERSION
    session_id: str
    encoding: str
    created_at: datetime
    last_accessed: datetime
    access_count: int = Field(ge=0)
    entries: list[ExportedEntry]
    summaries: list[ExportedSummary]

    _aware_times = field_validator("created_at", "last_accessed")(_aware)

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, no whitespace, UTF-8 text."""
        return json.dumps(
            self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )

    @classmethod
    def from_json(cls, data: str | bytes) -> SessionState:
        """Parse and validate an export strictly.

        Raises:
            ImportValidationError: with the JSON path of the first problem.
        """
        if len(data) > MAX_IMPORT_BYTES:
            raise ImportValidationError(f"export larger than {MAX_IMPORT_BYTES} bytes")
        if isinstance(data, bytes):
            try:
                data = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ImportValidationError("export is not UTF-8") from exc
        try:
            parsed = json.loads(data, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        except RecursionError as exc:
            raise ImportValidationError("JSON nested too deeply") from exc
        except ValueError as exc:  # JSONDecodeError, duplicates, NaN
            raise ImportValidationError(f"invalid JSON: {exc}") from exc
        _check_depth(parsed)
        if not isinstance(parsed, dict):
            raise ImportValidationError("export must be a JSON object")
        if parsed.get("schema_version") != SCHEMA_VERSION:
            raise ImportValidationError(
                f"unsupported schema_version {parsed.get('schema_version')!r} "
                f"(this tiermem reads {SCHEMA_VERSION})",
                path="$.schema_version",
            )
        try:
            return cls.model_validate_json(data, strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
            raise ImportValidationError(first["msg"], path=path) from exc


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check_depth(value: Any) -> None:
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ImportValidationError(f"JSON nested deeper than {MAX_DEPTH}")
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)


# --------------------------------------------------------------------------- export


def export_state(
    session: store.SessionRow, entries: Sequence[MemoryEntry], summaries: Sequence[MemorySummary]
) -> SessionState:
    """Build the snapshot of a session from its rows."""
    index = {summary.id: position for position, summary in enumerate(summaries)}
    return SessionState(
        session_id=session["session_id"],
        encoding=session["encoding"],
        created_at=store.as_utc(session["created_at"]),
        last_accessed=store.as_utc(session["last_accessed"]),
        access_count=session["access_count"],
        summaries=[
            ExportedSummary(
                content=s.content,
                level=s.level,
                first_seq=s.first_seq,
                last_seq=s.last_seq,
                created_at=s.created_at,
                start_time=s.time_range[0],
                end_time=s.time_range[1],
                parent=index[s.parent_id] if s.parent_id is not None else None,
            )
            for s in summaries
        ],
        entries=[
            ExportedEntry(
                seq=e.seq,
                type=e.type,
                role=e.role,
                message=json.loads(dumps(_message_dict(e.message))),
                timestamp=e.timestamp,
                pinned=e.pinned,
                metadata=dict(e.metadata),
                summary=index[e.summary_id] if e.summary_id is not None else None,
            )
            for e in entries
        ],
    )


def _message_dict(message: BaseMessage) -> dict[str, Any]:
    from langchain_core.messages import message_to_dict

    return message_to_dict(message)


# --------------------------------------------------------------------------- import


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """A validated export, counted and ready to write."""

    state: SessionState
    session_id: str
    messages: list[BaseMessage]
    entry_tokens: list[int]
    summary_tokens: list[int]
    encoding: str

    def write(self, conn: Connection, project: str, *, overwrite: bool, now: datetime) -> None:
        """Insert the session in the open transaction (replacing it if ``overwrite``).

        Raises:
            ImportValidationError: if the session exists and ``overwrite`` is false.
        """
        try:
            existing = store.get_session(conn, project, self.session_id)
        except SessionNotFound:
            existing = None
        if existing is not None:
            if not overwrite:
                raise ImportValidationError(
                    f"session {self.session_id!r} exists; pass overwrite=True to replace it",
                    path="$.session_id",
                )
            store.delete_sessions(conn, [existing["pk"]])
        state = self.state
        top = [i for i, s in enumerate(state.summaries) if s.parent is None]
        compressed = {e.seq for e in state.entries if e.summary is not None}
        active_tokens = sum(
            t
            for e, t in zip(state.entries, self.entry_tokens, strict=True)
            if e.seq not in compressed
        )
        pending = _pending_calls(self.messages)
        # A last_accessed in the future (another host's clock) is clamped to now.
        last_accessed = min(state.last_accessed, now)
        pk = conn.execute(
            sa.insert(session_table)
            .values(
                project=project,
                session_id=self.session_id,
                created_at=min(state.created_at, last_accessed),
                last_accessed=last_accessed,
                access_count=state.access_count,
                memory_tier=MemoryTier.ACTIVE.value
                if existing is not None
                else _tier(last_accessed, now),
                last_seq=len(state.entries),
                entry_count=len(state.entries),
                entry_tokens=sum(self.entry_tokens),
                active_count=len(state.entries) - len(compressed),
                active_tokens=active_tokens,
                summary_count=len(top),
                summary_tokens=sum(self.summary_tokens[i] for i in top),
                encoding=self.encoding,
                pending_calls=json.dumps(pending),  # in call order, as appends keep it
            )
            .returning(session_table.c.pk)
        ).scalar_one()
        ids: list[int] = []
        covered = _covered_tokens(state, self.entry_tokens, self.summary_tokens)
        for position, summary in enumerate(state.summaries):
            ids.append(
                conn.execute(
                    sa.insert(summary_table)
                    .values(
                        session_pk=pk,
                        content=store_text(summary.content),
                        level=summary.level,
                        first_seq=summary.first_seq,
                        last_seq=summary.last_seq,
                        entry_count=sum(
                            1
                            for e in state.entries
                            if e.summary is not None
                            and summary.first_seq <= e.seq <= summary.last_seq
                        ),
                        token_count=self.summary_tokens[position],
                        original_token_count=covered[position],
                        created_at=summary.created_at,
                        start_time=summary.start_time,
                        end_time=summary.end_time,
                    )
                    .returning(summary_table.c.id)
                ).scalar_one()
            )
        for position, summary in enumerate(state.summaries):
            if summary.parent is not None:
                conn.execute(
                    sa.update(summary_table)
                    .where(summary_table.c.id == ids[position])
                    .values(parent_id=ids[summary.parent])
                )
        rows = [
            {
                "session_pk": pk,
                "seq": entry.seq,
                "type": entry.type.value,
                "role": entry.role,
                "content": store_text(render_text(message)),
                "message": dumps(entry.message),
                "message_id": None if message.id is None else store_text(message.id),
                "timestamp": entry.timestamp,
                "token_count": tokens,
                "pinned": entry.pinned,
                "meta": dumps(entry.metadata),
                "summary_id": ids[entry.summary] if entry.summary is not None else None,
            }
            for entry, message, tokens in zip(
                state.entries, self.messages, self.entry_tokens, strict=True
            )
        ]
        for start in range(0, len(rows), 500):
            conn.execute(sa.insert(entry_table), rows[start : start + 500])
            _failpoints.hit("import.mid_batch")
        fts.flush(conn)  # an import indexes its own entries, however many


def _tier(last_accessed: datetime, now: datetime) -> str:
    from .tiers import calculate_tier

    return calculate_tier(last_accessed, now).value


def _pending_calls(messages: Sequence[BaseMessage]) -> dict[str, str]:
    pending: dict[str, str] = {}
    for message in messages:
        if isinstance(message, ToolMessage):
            pending.pop(message.tool_call_id, None)
        for call in getattr(message, "tool_calls", None) or []:
            pending[call["id"]] = call["name"]
    return pending


def _covered_tokens(
    state: SessionState, entry_tokens: list[int], summary_tokens: list[int]
) -> list[int]:
    """original_token_count of each summary: its entries (level 1) or children."""
    result: list[int] = []
    for position, summary in enumerate(state.summaries):
        if summary.level == 1:
            result.append(
                sum(
                    t
                    for e, t in zip(state.entries, entry_tokens, strict=True)
                    if e.summary == position
                )
            )
        else:
            result.append(
                sum(
                    summary_tokens[i]
                    for i, child in enumerate(state.summaries)
                    if child.parent == position
                )
            )
    return result


def import_state(
    state: SessionState | str | bytes, counter: TokenCounter, *, session_id: str | None = None
) -> ImportPlan:
    """Validate an export fully (before any write) and count its tokens.

    Raises:
        ImportValidationError: with the path of the first problem.
    """
    if isinstance(state, str | bytes):
        state = SessionState.from_json(state)
    elif not isinstance(state, SessionState):
        raise ImportValidationError("expected a SessionState or its JSON")
    target = session_id if session_id is not None else state.session_id
    try:
        validate_session_id(target)
    except InvalidArgument as exc:
        raise ImportValidationError(str(exc), path="$.session_id") from exc
    messages = _validate_entries(state)
    _validate_summaries(state)
    try:
        dumps(state.model_dump(mode="json"))
        state.to_json().encode("utf-8")
    except (ValueError, UnicodeEncodeError) as exc:
        raise ImportValidationError(f"export holds invalid text: {exc}") from exc
    return ImportPlan(
        state=state,
        session_id=target,
        messages=messages,
        entry_tokens=[counter.count_message(m) for m in messages],
        summary_tokens=[counter.count_text(s.content) for s in state.summaries],
        encoding=counter.encoding_name,
    )


def _validate_entries(state: SessionState) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    calls: dict[str, int | None] = {}
    for position, entry in enumerate(state.entries):
        path = f"$.entries[{position}]"
        if entry.seq != position + 1:
            raise ImportValidationError(
                f"seq must be {position + 1} (dense, in order)", path=f"{path}.seq"
            )
        try:
            message = messages_from_dict([entry.message])[0]
        except Exception as exc:  # langchain raises ValueError/KeyError/ValidationError
            raise ImportValidationError(
                f"not a LangChain message: {exc}", path=f"{path}.message"
            ) from exc
        kind, role = classify(message)
        if role != entry.role or (entry.type is not EntryType.CONTEXT and kind is not entry.type):
            raise ImportValidationError("type/role do not match the message", path=f"{path}.type")
        if entry.summary is not None and not 0 <= entry.summary < len(state.summaries):
            raise ImportValidationError("summary index out of range", path=f"{path}.summary")
        if entry.pinned and entry.summary is not None:
            raise ImportValidationError(
                "pinned entries are never compressed", path=f"{path}.pinned"
            )
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in calls:
                raise ImportValidationError("tool result without its call", path=f"{path}.message")
            if calls.pop(message.tool_call_id) != entry.summary:
                raise ImportValidationError(
                    "tool call and result on different sides of a summary", path=f"{path}.summary"
                )
        for call_id in tool_call_ids(message):
            if not call_id or call_id in calls:
                raise ImportValidationError(
                    "missing or duplicated tool call id", path=f"{path}.message"
                )
            calls[call_id] = entry.summary
        messages.append(message)
    if any(summary is not None for summary in calls.values()):
        raise ImportValidationError("an unanswered tool call is compressed", path="$.entries")
    return messages


def _validate_summaries(state: SessionState) -> None:
    count = len(state.summaries)
    for position, summary in enumerate(state.summaries):
        path = f"$.summaries[{position}]"
        if summary.first_seq > summary.last_seq or summary.last_seq > len(state.entries):
            raise ImportValidationError("bad seq range", path=path)
        if summary.parent is not None:
            if not 0 <= summary.parent < count or summary.parent == position:
                raise ImportValidationError("parent index out of range", path=f"{path}.parent")
            parent = state.summaries[summary.parent]
            if parent.level <= summary.level or not (
                parent.first_seq <= summary.first_seq and summary.last_seq <= parent.last_seq
            ):
                raise ImportValidationError(
                    "parent must be higher and cover the child", path=f"{path}.parent"
                )
        covered = [e.seq for e in state.entries if e.summary == position]
        if summary.level == 1:
            if not covered:
                raise ImportValidationError("summary covers no entry", path=path)
            inner = [
                e
                for e in state.entries
                if summary.first_seq <= e.seq <= summary.last_seq and not e.pinned
            ]
            if [e.seq for e in inner] != covered:
                raise ImportValidationError("summary range does not match its entries", path=path)
        elif not any(child.parent == position for child in state.summaries):
            raise ImportValidationError("merged summary has no children", path=path)
    top = sorted((s.first_seq, s.last_seq) for s in state.summaries if s.parent is None)
    for (_, last), (first, _) in zip(top, top[1:], strict=False):
        if first <= last:
            raise ImportValidationError("summary ranges overlap", path="$.summaries")
    if top:
        boundary = top[-1][1]
        if any(e.summary is None and not e.pinned and e.seq <= boundary for e in state.entries):
            raise ImportValidationError(
                "active entry inside the compressed prefix", path="$.entries"
            )
