"""Export and import of one session: a versioned, validated, deterministic snapshot.

``SessionState.to_json()`` is canonical (sorted keys, no spaces), so
``export(import(export(s))) == export(s)`` byte for byte. Import parses
strictly (no NaN or Infinity, no duplicate keys, bounded depth and size),
validates every entry and value against what the store can hold (the entry
size limit, message ids, the range of its INTEGER columns and of dates), then
the structure by the rules the doctor applies (:mod:`tiermem._structure`), and
writes everything in one transaction, or nothing. Token counts are recomputed
with the importing memory's encoding; stored counts are never trusted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from langchain_core.messages import BaseMessage, ToolMessage, messages_from_dict
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy.engine import Connection

from .._core import failpoints as _failpoints
from .._core.messages import (
    check_entry_size,
    check_message_id,
    classify,
    dumps,
    render_text,
    store_text,
    tool_call_ids,
    tool_call_names,
    validate_session_id,
)
from .._core.structure import (
    EntryFacts,
    SummaryFacts,
    covered_counts,
    session_problems,
    unanswered_calls,
)
from .._storage import fts, store
from .._storage.schema import entry_table, session_table, summary_table
from ..errors import ImportValidationError, InvalidArgument, SessionNotFound, StorageBusy
from ..tiers import MemoryTier
from ..tokens import TokenCounter
from ..types import EntryType, MemoryEntry, MemorySummary

__all__ = ["SCHEMA_VERSION", "ExportedEntry", "ExportedSummary", "SessionState"]

SCHEMA_VERSION: Literal[1] = 1
MAX_IMPORT_BYTES = 512 * 1024 * 1024
MAX_DEPTH = 200
#: The largest value of an INTEGER column (seqs, levels, access counts) on PostgreSQL;
#: SQLite's integers are wider, but both backends accept the same exports.
MAX_INTEGER = 2**31 - 1
#: An int that fits an INTEGER column.
Integer = Annotated[int, Field(le=MAX_INTEGER)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


#: The UTC times an export may hold: a day inside Python's years 1-9999, because
#: PostgreSQL hands a stored time back in the connection's time zone, which must not
#: push it out of those years.
_EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
_LATEST = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)


def _aware(value: datetime) -> datetime:
    """Every datetime of an export carries its UTC offset and is kept in UTC: a naive
    one could be any zone, and would not round-trip byte for byte."""
    if value.tzinfo is None:
        raise ValueError("datetimes must carry a UTC offset")
    try:
        utc = value.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59:59-05:00 is in the year 10000
        utc = None
    if utc is None or not _EARLIEST <= utc <= _LATEST:
        raise ValueError(
            f"datetime out of range: its UTC time must lie between {_EARLIEST.isoformat()} "
            f"and {_LATEST.isoformat()}"
        )
    return utc


class ExportedSummary(_Strict):
    """A summary in an export; ``parent`` is the index of its merged summary."""

    content: str = Field(min_length=1)
    level: Integer = Field(ge=1)
    first_seq: Integer = Field(ge=1)
    last_seq: Integer = Field(ge=1)
    created_at: datetime
    start_time: datetime
    end_time: datetime
    parent: int | None = None

    _aware_times = field_validator("created_at", "start_time", "end_time")(_aware)


class ExportedEntry(_Strict):
    """An entry in an export; ``summary`` is the index of the summary covering it."""

    seq: Integer = Field(ge=1)
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
    access_count: Integer = Field(ge=0)
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
    result = dict(pairs)
    if len(result) != len(pairs):
        counts = Counter(key for key, _ in pairs)
        raise ValueError(f"duplicate key {next(k for k, n in counts.items() if n > 1)!r}")
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_CONTAINERS = (dict, list)


def _check_depth(value: Any) -> None:
    # Only containers go on the stack: scalars (most values) cannot nest.
    stack: list[tuple[Any, int]] = [(value, 0)] if type(value) in _CONTAINERS else []
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ImportValidationError(f"JSON nested deeper than {MAX_DEPTH}")
        children = item.values() if type(item) is dict else item
        stack.extend((child, depth + 1) for child in children if type(child) in _CONTAINERS)


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
    message_texts: list[str]
    metadata_texts: list[str]
    entry_tokens: list[int]
    summary_tokens: list[int]
    original_tokens: list[int]
    entry_counts: list[int]
    pending_calls: dict[str, str]
    encoding: str

    def write(self, conn: Connection, project: str, *, overwrite: bool, now: datetime) -> None:
        """Insert the session in the open transaction (replacing it if ``overwrite``).

        Raises:
            ImportValidationError: if the session exists and ``overwrite`` is false.
        """
        pk = self._session_row(conn, project, overwrite=overwrite, now=now)
        state = self.state
        if conn.dialect.name == "postgresql":
            # The INSERTs below run once per row: one generic plan serves every row (the
            # transaction's forced custom plans would plan each row afresh).
            conn.exec_driver_sql("SET LOCAL plan_cache_mode = auto")
        # Every summary in one statement, then every parent link in one more.
        summary_rows = [
            {
                "session_pk": pk,
                "content": store_text(summary.content),
                "level": summary.level,
                "first_seq": summary.first_seq,
                "last_seq": summary.last_seq,
                "entry_count": self.entry_counts[position],
                "token_count": self.summary_tokens[position],
                "original_token_count": self.original_tokens[position],
                "created_at": summary.created_at,
                "start_time": summary.start_time,
                "end_time": summary.end_time,
            }
            for position, summary in enumerate(state.summaries)
        ]
        ids: list[int] = []
        if summary_rows:
            inserted = conn.execute(
                sa.insert(summary_table).returning(
                    summary_table.c.id, sort_by_parameter_order=True
                ),
                summary_rows,
            )
            ids = list(inserted.scalars())
        links = [
            {"child": ids[position], "parent": ids[summary.parent]}
            for position, summary in enumerate(state.summaries)
            if summary.parent is not None
        ]
        if links:
            conn.execute(
                sa.update(summary_table)
                .where(summary_table.c.id == sa.bindparam("child"))
                .values(parent_id=sa.bindparam("parent")),
                links,
            )
        rows = [
            {
                "session_pk": pk,
                "seq": entry.seq,
                "type": entry.type.value,
                "role": entry.role,
                "content": store_text(render_text(message)),
                "message": message_text,
                "message_id": None if message.id is None else store_text(message.id),
                "timestamp": entry.timestamp,
                "token_count": tokens,
                "pinned": entry.pinned,
                "meta": metadata_text,
                "summary_id": ids[entry.summary] if entry.summary is not None else None,
            }
            for entry, message, message_text, metadata_text, tokens in zip(
                state.entries,
                self.messages,
                self.message_texts,
                self.metadata_texts,
                self.entry_tokens,
                strict=True,
            )
        ]
        for start in range(0, len(rows), 500):
            conn.execute(sa.insert(entry_table), rows[start : start + 500])
            _failpoints.hit("import.mid_batch")
        fts.flush(conn)  # an import indexes its own entries, however many

    def _session_row(
        self, conn: Connection, project: str, *, overwrite: bool, now: datetime
    ) -> int:
        """Insert the session row (deleting the one it replaces); its pk.

        The existing row is locked before it is deleted, so an import replacing it
        waits for a concurrent import or append of the session to commit. A row
        created by another transaction after the lookup (the insert finds it when
        that transaction commits) is looked up again and replaced in turn.
        """
        state = self.state
        compressed = sum(1 for entry in state.entries if entry.summary is not None)
        active_tokens = sum(
            tokens
            for entry, tokens in zip(state.entries, self.entry_tokens, strict=True)
            if entry.summary is None
        )
        top = [i for i, summary in enumerate(state.summaries) if summary.parent is None]
        # A last_accessed in the future (another host's clock) is clamped to now.
        last_accessed = min(state.last_accessed, now)
        for _ in range(_SESSION_ROUNDS):
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
            pk = conn.execute(
                store._insert_ignore(conn)
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
                    active_count=len(state.entries) - compressed,
                    active_tokens=active_tokens,
                    summary_count=len(top),
                    summary_tokens=sum(self.summary_tokens[i] for i in top),
                    encoding=self.encoding,
                    pending_calls=json.dumps(self.pending_calls),  # in call order, as appends
                )
                .on_conflict_do_nothing()
                .returning(session_table.c.pk)
            ).scalar_one_or_none()
            if pk is not None:
                return int(pk)
        raise StorageBusy(
            f"session {self.session_id!r} was created again by other writers while importing; "
            "retry later"
        )


#: Lookups of the session row an import makes before giving up: a second one finds a
#: row another transaction created meanwhile; more only under a stream of such races.
_SESSION_ROUNDS = 5


def _tier(last_accessed: datetime, now: datetime) -> str:
    from ..tiers import calculate_tier

    return calculate_tier(last_accessed, now).value


def import_state(
    state: SessionState | str | bytes,
    counter: TokenCounter,
    *,
    session_id: str | None = None,
    max_entry_chars: int,
) -> ImportPlan:
    """Validate an export fully (before any write) and count its tokens.

    The structure is checked by the rules the doctor applies to a store
    (:mod:`tiermem._structure`), so an import never writes what
    ``check_invariants`` reports broken.

    Args:
        max_entry_chars: the size limit of an entry (message and metadata JSON), as
            ``MemoryConfig.max_entry_chars`` sets it for ``add_*``.

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
    messages, message_texts, metadata_texts = _validate_entries(state, max_entry_chars)
    for position, summary in enumerate(state.summaries):
        _check_text(summary.content, f"$.summaries[{position}].content")
    entry_tokens = [counter.count_message(m) for m in messages]
    summary_tokens = [counter.count_text(s.content) for s in state.summaries]
    original_tokens = _covered_tokens(state, entry_tokens, summary_tokens)
    entries = [
        EntryFacts(
            seq=entry.seq,
            pinned=entry.pinned,
            summary=entry.summary,
            timestamp=entry.timestamp,
            calls=tuple(zip(tool_call_ids(message), tool_call_names(message), strict=True)),
            answers=message.tool_call_id if isinstance(message, ToolMessage) else None,
        )
        for entry, message in zip(state.entries, messages, strict=True)
    ]
    summaries = [
        SummaryFacts(
            level=summary.level,
            first_seq=summary.first_seq,
            last_seq=summary.last_seq,
            parent=summary.parent,
            created_at=summary.created_at,
            content=summary.content,
            tokens=tokens,
            original_tokens=original,
        )
        for summary, tokens, original in zip(
            state.summaries, summary_tokens, original_tokens, strict=True
        )
    ]
    problem = next(session_problems(entries, summaries), None)
    if problem is not None:
        raise ImportValidationError(problem.message, path=problem.path)
    return ImportPlan(
        state=state,
        session_id=target,
        messages=messages,
        message_texts=message_texts,
        metadata_texts=metadata_texts,
        entry_tokens=entry_tokens,
        summary_tokens=summary_tokens,
        original_tokens=original_tokens,
        entry_counts=covered_counts(entries, summaries),
        pending_calls=unanswered_calls(entries),
        encoding=counter.encoding_name,
    )


def _check_text(text: str, path: str) -> None:
    """Text every backend stores: valid Unicode (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ImportValidationError(f"invalid text: {exc}", path=path) from exc


def _covered_tokens(
    state: SessionState, entry_tokens: list[int], summary_tokens: list[int]
) -> list[int]:
    """original_token_count of each summary: its entries' tokens (level 1) or its
    children's (a merge summarizes its children's texts). In a valid export only
    entries link to a level-1 summary and only summaries to a merged one; links that
    point nowhere count nothing (the validation refuses them)."""
    count = len(state.summaries)
    result = [0] * count
    for entry, tokens in zip(state.entries, entry_tokens, strict=True):
        if entry.summary is not None and 0 <= entry.summary < count:
            result[entry.summary] += tokens
    for position, summary in enumerate(state.summaries):
        if summary.parent is not None and 0 <= summary.parent < count:
            result[summary.parent] += summary_tokens[position]
    return result


def _validate_entries(
    state: SessionState, max_entry_chars: int
) -> tuple[list[BaseMessage], list[str], list[str]]:
    """Each entry on its own: dense seqs, a LangChain message matching its type and
    role, a storable id and size. The messages and the JSON texts to store."""
    messages: list[BaseMessage] = []
    message_texts: list[str] = []
    metadata_texts: list[str] = []
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
        try:
            message_text, metadata_text = dumps(entry.message), dumps(entry.metadata)
        except ValueError as exc:  # NaN or infinity in a SessionState built in Python
            raise ImportValidationError(f"not valid JSON: {exc}", path=path) from exc
        _check_text(message_text, f"{path}.message")
        _check_text(metadata_text, f"{path}.metadata")
        try:
            check_message_id(message)
        except InvalidArgument as exc:
            raise ImportValidationError(str(exc), path=f"{path}.message") from exc
        try:
            check_entry_size(message_text, metadata_text, max_entry_chars)
        except InvalidArgument as exc:
            raise ImportValidationError(str(exc), path=path) from exc
        messages.append(message)
        message_texts.append(message_text)
        metadata_texts.append(metadata_text)
    return messages, message_texts, metadata_texts
