"""Export and import of one session: a versioned, validated, deterministic snapshot.

``SessionState.to_json()`` is canonical (sorted keys, no spaces), so
``export(import(export(s))) == export(s)`` byte for byte. Import parses
strictly (no NaN or Infinity, no duplicate keys, bounded depth and size),
validates every entry and value against what the store can hold (the entry
size limit, message ids, the range of its INTEGER columns and of dates), then
the structure by the rules the doctor applies (:mod:`tiermem._core.structure`), and
writes everything in one transaction, or nothing. Token counts are recomputed
with the importing memory's encoding; stored counts are never trusted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage, messages_from_dict

from .._core.clock import as_utc
from .._core.context import MemoryContext
from .._core.messages import (
    check_entry_size,
    check_message_id,
    classify,
    dumps,
    tool_call_ids,
    tool_call_names,
    validate_session_id,
)
from .._core.runner import Op, compute
from .._core.structure import (
    EntryFacts,
    SummaryFacts,
    covered_counts,
    session_problems,
    unanswered_calls,
)
from .._storage import sessions, store, summaries
from .._storage.database import Connection
from .._storage.imports import ImportPlan
from .._storage.rows import SessionRecord
from ..errors import ImportValidationError, InvalidArgument
from ..events import SessionImported
from ..state import ExportedEntry, ExportedSummary, SessionState
from ..tokens import TokenCounter
from ..types import EntryType, MemoryEntry, MemorySummary
from . import feed

__all__ = ["export_session", "export_state", "import_session", "import_state", "read_state"]


def export_state(
    session: SessionRecord, entries: Sequence[MemoryEntry], summaries: Sequence[MemorySummary]
) -> SessionState:
    """Build the snapshot of a session from its rows."""
    index = {summary.id: position for position, summary in enumerate(summaries)}
    return SessionState(
        session_id=session.session_id,
        encoding=session.encoding,
        created_at=as_utc(session.created_at),
        last_accessed=as_utc(session.last_accessed),
        access_count=session.access_count,
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
                retired_at=e.retired_at,
            )
            for e in entries
        ],
    )


def _message_dict(message: BaseMessage) -> dict[str, Any]:
    from langchain_core.messages import message_to_dict

    return message_to_dict(message)


# --------------------------------------------------------------------------- import


def import_state(
    state: SessionState | str | bytes,
    counter: TokenCounter,
    *,
    session_id: str | None = None,
    max_entry_chars: int,
) -> ImportPlan:
    """Validate an export fully (before any write) and count its tokens.

    The structure is checked by the rules the doctor applies to a store
    (:mod:`tiermem._core.structure`), so an import never writes what
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
            retired=entry.retired_at is not None,
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


def export_session(ctx: MemoryContext, session_id: str) -> Op[SessionState]:
    """A snapshot of a session (see ``ConversationMemory.export_session``)."""
    validate_session_id(session_id)
    # Several statements: one snapshot, or a compression committing between them
    # would give summaries and entries of two different states.
    return (
        yield from ctx.transact(
            lambda conn: read_state(conn, ctx.project, session_id), write=False, snapshot=True
        )
    )


def read_state(conn: Connection, project: str, session_id: str) -> SessionState:
    """The snapshot of a stored session, read in the caller's (snapshot) transaction.

    Raises:
        SessionNotFound: no such session in ``project``.
    """
    session = sessions.get_session(conn, project, session_id, lock=False)
    return export_state(
        session,
        store.read_entries(conn, session, active_only=False),
        summaries.read_summaries(conn, session, top_only=False),
    )


def import_session(
    ctx: MemoryContext, state: SessionState | str | bytes, overwrite: bool, session_id: str | None
) -> Op[str]:
    """Validate and store an export (see ``ConversationMemory.import_session``)."""
    # Parsing, validating and counting an export can take seconds: off the event loop.
    plan = yield from compute(
        lambda: import_state(
            state, ctx.counter, session_id=session_id, max_entry_chars=ctx.config.max_entry_chars
        )
    )
    now = ctx.now()
    imported = SessionImported(
        plan.session_id, len(plan.messages), len(plan.summary_tokens), overwrite
    )

    def work(conn: Connection) -> None:
        plan.write(conn, ctx.project, overwrite=overwrite, now=now)
        # An import sends no signal, but a consumer of the feed (an indexer) must
        # learn that the session's entries were replaced.
        feed.record(ctx, conn, [imported])

    yield from ctx.transact(work)
    return plan.session_id
