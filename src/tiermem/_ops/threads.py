"""Graph checkpoints kept with the thread's session (:mod:`tiermem.threads`).

A checkpoint's message lists are not serialized: each message is an entry of the
thread's session (appended once, in the checkpoint's own transaction, so it is
counted, searchable, in the change feed and exported), and the list is a row of
entry ids. A list that extends the one this process last wrote or read for the
channel is stored as the ids appended since (a *delta* on that *base* version);
every :data:`FULL_EVERY` links, and whenever the list changed otherwise (a message
revised or removed), it is stored whole. A revised message (same id, new content)
is a new entry, so every checkpoint reads back the revision it held; the entry it
supersedes, and those of messages removed, are retired (:mod:`tiermem._ops.revisions`).
tiermem's summary message (``is_summary_message``, the head a middleware puts in
the state) is no turn: the list row keeps its JSON, and it is never an entry.
Writes and inputs of messages become references (:mod:`tiermem._ops.thread_writes`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from .._core.context import MemoryContext
from .._core.messages import (
    StoredMessage,
    deserialize,
    load_text,
    parse_entry,
    validate_session_id,
)
from .._core.runner import Op
from .._storage import checkpoints as sql
from .._storage import sessions, store
from .._storage.database import Connection
from ..checkpoints import (
    CheckpointQuery,
    NewCheckpoint,
    NewWrite,
    StoredCheckpoint,
    StoredWrite,
    Typed,
    Version,
)
from ..errors import InvalidArgument, StaleContext
from ..types import MemoryEntry
from . import revisions, thread_writes
from .known_lists import Known, KnownLists
from .list_plans import FULL_EVERY, ListPlan, Ref, StaleList, plan_list, witness
from .revisions import REFS, decode_list, revised_entries
from .thread_writes import KnownWrites
from .write import Attached, append_attached, clear, prepare_messages

__all__ = [
    "FULL_EVERY",
    "REFS",
    "Ref",
    "copy_thread",
    "delete_runs",
    "delete_thread",
    "prune",
    "put",
    "put_writes",
    "read",
]


# --------------------------------------------------------------------------- put


def put(ctx: MemoryContext, known: KnownLists, writes: KnownWrites, new: NewCheckpoint) -> Op[None]:
    """Store a checkpoint, its new channel values and its new messages in one
    transaction; the parent's message writes it holds become references."""
    thread_id = validate_session_id(new.thread_id, "thread id")
    parent = None if new.parent_id is None else (thread_id, new.checkpoint_ns, new.parent_id)
    applied = [] if parent is None else writes.take(parent)
    inputs = [] if parent is None else writes.take_values(parent)
    try:
        yield from _put(ctx, known, writes, new, parent, applied, inputs)
    except StaleList:
        known.forget([thread_id])
        yield from _put(ctx, known, writes, new, parent, applied, inputs)


def _put(
    ctx: MemoryContext,
    known: KnownLists,
    writes: KnownWrites,
    new: NewCheckpoint,
    parent: tuple[str, str, str] | None,
    applied: list[thread_writes.Pending],
    inputs: list[thread_writes.PendingValue],
) -> Op[None]:
    thread_id = new.thread_id
    plans = [plan_list(ctx, known, new, key, msgs) for key, msgs in new.messages.items()]
    # The newest reused entry of each known list is looked up with the new messages:
    # found in this session, the list's entries are this session's.
    witnesses = {
        plan.channel: newest
        for plan in plans
        if plan.source is not None and (newest := witness(plan.source)) is not None
    }
    if any(plan.source is not None and plan.channel not in witnesses for plan in plans):
        raise StaleList  # nothing to look it up by: no entry id is reused unchecked
    unresolved: dict[tuple[str, int], BaseMessage] = {}
    for plan in plans:
        for position, ref in enumerate(plan.refs):
            if ref is None:
                unresolved[(plan.channel, position)] = plan.messages[position]
    prepared = yield from prepare_messages(ctx, list(unresolved.values()))
    json_of = {id(entry.message): entry.message_json for entry in prepared}
    stored: dict[tuple[str | None, str], int] = {}  # (message id, JSON) -> entry id
    chosen: list[store.NewEntry] = []

    def choose(conn: Connection, todo: list[store.NewEntry]) -> list[store.NewEntry]:
        ids = [e.message.id for e in todo if e.message.id]
        ids += [message_id for message_id, _ in witnesses.values()]
        found = [
            (entry_id, load_text(message_id), text, gone)
            for entry_id, message_id, text, gone in sql.entries_by_message_id(
                conn, ctx.project, thread_id, ids
            )
        ]
        for entry_id, message_id, text, gone in found:
            if not gone:  # a retired entry is never reused: a message back is new
                stored[(message_id, text)] = entry_id
        held = {entry_id for entry_id, *_ in found}
        if any(entry_id not in held for _, entry_id in witnesses.values()):
            raise StaleList
        fresh: dict[tuple[str | None, str], store.NewEntry] = {}
        for entry in todo:
            key = (entry.message.id, entry.message_json)
            if key not in stored:
                fresh.setdefault(key, entry)
        chosen[:] = fresh.values()
        revisions.retire(ctx, conn, known, new, plans, revised_entries(todo, found))
        return list(chosen)

    lists: dict[str, Known] = {}
    session: list[int] = []

    def after(conn: Connection, session_pk: int, entries: list[MemoryEntry]) -> None:
        for entry, appended in zip(chosen, entries, strict=True):
            stored[(entry.message.id, entry.message_json)] = appended.id
        for (channel, position), message in unresolved.items():
            entry_id = stored[(message.id, json_of[id(message)])]
            next(p for p in plans if p.channel == channel).refs[position] = entry_id
        _store_values(conn, session_pk, new, plans)
        sql.put_checkpoint(conn, _checkpoint_row(session_pk, new))
        for plan in plans:
            depth = 0 if plan.base is None else plan.base.depth + 1
            refs = tuple(ref for ref in plan.refs if ref is not None)
            lists[plan.channel] = Known.of(plan.version, plan.messages, refs, depth)
        if parent is not None:
            thread_writes.rewrite(ctx, conn, session_pk, parent, applied, lists)
            thread_writes.rewrite_values(ctx, conn, session_pk, parent[1], inputs, lists)
        session[:] = [session_pk]

    yield from append_attached(ctx, thread_id, prepared, Attached(choose, after))
    for channel, listed in lists.items():
        known.set((thread_id, new.checkpoint_ns, channel), listed)
    held = [thread_writes.PendingValue(*key, v) for key, v in new.value_messages.items()]
    writes.hold_values((thread_id, new.checkpoint_ns, new.checkpoint_id), held)
    if parent is not None and lists:
        late = writes.settle(parent, lists)  # writes stored while this checkpoint was
        if late:
            pk, rewrite = session[0], thread_writes.rewrite
            yield from ctx.transact(lambda conn: rewrite(ctx, conn, pk, parent, late, lists))


def _store_values(
    conn: Connection, session_pk: int, new: NewCheckpoint, plans: list[ListPlan]
) -> None:
    """Insert the checkpoint's new values (a channel written empty has no row: a
    missing value reads as none): each message list as a delta on its base when that
    base is still stored (checked by the insert itself), else whole."""
    key: dict[str, Any] = {"session_pk": session_pk, "checkpoint_ns": new.checkpoint_ns}
    rows: list[dict[str, Any]] = []
    for (channel, version), value in new.values.items():
        if value is not None:
            row: dict[str, Any] = {"channel": channel, "version": version, "type": value[0]}
            rows.append({**key, **row, "value": value[1], "root": None})
    for plan in plans:
        refs = [ref for ref in plan.refs if ref is not None]
        row = {**key, "channel": plan.channel, "version": plan.version, "type": REFS}
        if plan.base is not None:
            link = {"base": plan.base.version, "add": refs[len(plan.base.refs) :]}
            if sql.insert_delta(conn, {**row, "value": _encode(link)}, plan.base.version):
                continue
            plan.base = None  # its base is gone (pruned): store the list whole
        rows.append({**row, "value": _encode({"refs": refs}), "root": plan.version})
    sql.insert_blobs(conn, rows)


def _encode(link: dict[str, Any]) -> bytes:
    return json.dumps(link, separators=(",", ":")).encode()


def _checkpoint_row(session_pk: int, new: NewCheckpoint) -> dict[str, Any]:
    return {
        "session_pk": session_pk,
        "checkpoint_ns": new.checkpoint_ns,
        "checkpoint_id": new.checkpoint_id,
        "parent_id": new.parent_id,
        "run_id": new.run_id,
        "delta_channels": json.dumps(sorted(new.delta_channels)) if new.delta_channels else None,
        "versions": json.dumps(dict(new.versions), separators=(",", ":")),
        "checkpoint_type": new.checkpoint[0],
        "checkpoint": new.checkpoint[1],
        "metadata_type": new.metadata[0],
        "meta": new.metadata[1],
    }


# --------------------------------------------------------------------------- read


def read(
    ctx: MemoryContext, known: KnownLists, query: CheckpointQuery
) -> Op[list[StoredCheckpoint]]:
    """One page of checkpoints (see :class:`CheckpointQuery`), with their values,
    messages and pending writes, read in one transaction."""
    if query.thread_id is not None:
        validate_session_id(query.thread_id, "thread id")
    if query.limit is not None and query.limit <= 0:
        return []

    def work(conn: Connection) -> tuple[list[Any], dict[int, StoredMessage]]:
        rows = sql.checkpoint_rows(
            conn,
            ctx.project,
            thread_id=query.thread_id,
            checkpoint_ns=query.checkpoint_ns,
            checkpoint_id=query.checkpoint_id,
            before=query.before,
            after_key=query.after,
            limit=query.limit,
        )
        loaded = [_load(conn, row) for row in rows]
        _attach_writes(conn, loaded)
        wanted = {
            ref
            for item in loaded
            for refs in [
                *item["lists"].values(),
                *thread_writes.refs_of(item["writes"]),
                *map(thread_writes.value_refs, item["inputs"].values()),
            ]
            for ref in refs
            if isinstance(ref, int)
        }
        return loaded, sql.entry_messages(conn, wanted)

    loaded, texts = yield from ctx.transact(work, write=False)
    result = []
    for item in loaded:
        messages = {
            channel: [parse_entry(texts[ref] if isinstance(ref, int) else ref) for ref in refs]
            for channel, refs in item["lists"].items()
        }
        writes = [thread_writes.loaded(write, texts, parse_entry) for write in item["writes"]]
        result.append(
            StoredCheckpoint(
                thread_id=item["thread_id"],
                checkpoint_ns=item["checkpoint_ns"],
                checkpoint_id=item["checkpoint_id"],
                parent_id=item["parent_id"],
                versions=item["versions"],
                checkpoint=item["checkpoint"],
                metadata=item["metadata"],
                values=item["values"],
                messages=messages,
                writes=writes,
                value_messages={
                    channel: thread_writes.decode_value(value, texts, parse_entry)
                    for channel, value in item["inputs"].items()
                },
            )
        )
    if query.checkpoint_id is None and query.before is None and query.limit == 1 and result:
        _remember(known, result[0], loaded[0])
    return result


def _remember(known: KnownLists, checkpoint: StoredCheckpoint, item: dict[str, Any]) -> None:
    """The newest checkpoint's lists are what the next put most likely extends."""
    for channel, refs in item["lists"].items():
        version = str(checkpoint.versions[channel])
        messages = checkpoint.messages[channel]
        key = (checkpoint.thread_id, checkpoint.checkpoint_ns, channel)
        known.set(key, Known.of(version, messages, refs, item["depths"][channel]))


def _load(conn: Connection, row: Any) -> dict[str, Any]:
    """A checkpoint row with its channel values and message lists (entry ids)."""
    sid, session_pk, namespace, checkpoint_id, parent_id, versions_json = row[:6]
    versions: dict[str, Version] = json.loads(versions_json)
    keys = [(channel, str(version)) for channel, version in versions.items()]
    values: dict[str, Typed] = {}
    lists: dict[str, list[Ref]] = {}
    depths: dict[str, int] = {}
    inputs: dict[str, bytes] = {}
    for channel, version, kind, value, root in sql.blob_rows(conn, session_pk, namespace, keys):
        if kind == thread_writes.VALUE_REFS:
            inputs[channel] = bytes(value)
        elif kind != REFS:
            values[channel] = (kind, bytes(value))
        else:
            lists[channel], depths[channel] = decode_list(
                conn, session_pk, namespace, channel, version, value, root
            )
    return {
        "thread_id": str(sid),
        "session_pk": int(session_pk),
        "checkpoint_ns": str(namespace),
        "checkpoint_id": str(checkpoint_id),
        "parent_id": None if parent_id is None else str(parent_id),
        "versions": versions,
        "checkpoint": (str(row[6]), bytes(row[7])),
        "metadata": (str(row[8]), bytes(row[9])),
        "values": values,
        "lists": lists,
        "inputs": inputs,
        "depths": depths,
        "writes": [],
    }


def _attach_writes(conn: Connection, loaded: list[dict[str, Any]]) -> None:
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for item in loaded:
        groups.setdefault((item["session_pk"], item["checkpoint_ns"]), []).append(item)
    for (session_pk, namespace), items in groups.items():
        by_id = {item["checkpoint_id"]: item for item in items}
        for checkpoint_id, task_id, channel, kind, value, path in sql.write_rows(
            conn, session_pk, namespace, list(by_id)
        ):
            by_id[str(checkpoint_id)]["writes"].append(
                StoredWrite(str(task_id), str(channel), (str(kind), bytes(value or b"")), str(path))
            )


# --------------------------------------------------------------------------- writes


def put_writes(
    ctx: MemoryContext,
    known: KnownWrites,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes: Sequence[NewWrite],
) -> Op[None]:
    """Store a task's pending writes to a checkpoint (see ``sql.insert_writes``);
    those of messages become references once the next checkpoint holds them."""
    validate_session_id(thread_id, "thread id")
    now = ctx.now()
    owner: list[int] = []  # the session's pk

    def work(conn: Connection) -> None:
        session = sessions.get_session(
            conn,
            ctx.project,
            thread_id,
            lock=False,
            create=True,
            now=now,
            encoding=ctx.counter.encoding_name,
        )
        rows = [
            {
                "session_pk": session.pk,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
                "task_id": task_id,
                "idx": write.idx,
                "channel": write.channel,
                "type": write.value[0],
                "value": write.value[1],
                "task_path": task_path,
            }
            for write in writes
        ]
        sql.insert_writes(conn, rows)
        owner[:] = [session.pk]

    if not writes:
        return
    yield from ctx.transact(work)
    pending = [
        thread_writes.Pending(task_id, write.idx, write.channel, write.messages)
        for write in writes
        if write.messages is not None
    ]
    key = (thread_id, checkpoint_ns, checkpoint_id)
    lists = known.arrive(key, pending) if pending else {}
    if lists:  # the next checkpoint was stored first
        rewrite = thread_writes.rewrite
        yield from ctx.transact(lambda conn: rewrite(ctx, conn, owner[0], key, pending, lists))


# --------------------------------------------------------------------------- removal


def delete_thread(ctx: MemoryContext, known: KnownLists, thread_id: str) -> Op[int]:
    """Delete the thread's session: its conversation and every checkpoint; the
    entries removed."""
    known.forget([thread_id])
    return (yield from clear(ctx, thread_id))


def delete_runs(ctx: MemoryContext, known: KnownLists, run_ids: Sequence[str]) -> Op[int]:
    """Delete the checkpoints (and their writes) made by these runs; the
    conversation stays. Returns the checkpoints deleted."""
    if not run_ids:
        return 0
    known.forget_all()
    return (yield from ctx.transact(lambda conn: sql.delete_runs(conn, ctx.project, list(run_ids))))


def prune(
    ctx: MemoryContext, known: KnownLists, thread_ids: Sequence[str], keep_latest: bool
) -> Op[int]:
    """Delete the threads' checkpoints but the newest of each namespace
    (``keep_latest``) or all of them, with their writes and the values no kept
    checkpoint holds; every message stays in the session. Returns the checkpoints
    deleted."""
    threads = [validate_session_id(thread_id, "thread id") for thread_id in thread_ids]
    if not threads:
        return 0
    known.forget(threads)

    def work(conn: Connection) -> int:
        removed = 0
        for session_pk in sql.thread_sessions(conn, ctx.project, threads).values():
            for namespace in sql.namespaces(conn, session_pk):
                removed += _prune_namespace(conn, session_pk, namespace, keep_latest)
        return removed

    return (yield from ctx.transact(work))


def _prune_namespace(conn: Connection, session_pk: int, namespace: str, keep_latest: bool) -> int:
    kept = _kept(conn, session_pk, namespace) if keep_latest else []
    if not kept:
        removed = sql.delete_checkpoints(conn, session_pk, namespace, None)
        sql.delete_blobs(conn, session_pk, namespace, [])
        return removed
    keys = sorted({(channel, str(v)) for _, versions in kept for channel, v in versions.items()})
    for channel, version, kind, value, root in sql.blob_rows(conn, session_pk, namespace, keys):
        if kind == REFS and root != version:  # its chain's other links go: store it whole
            refs, _ = decode_list(conn, session_pk, namespace, channel, version, value, root)
            full = _encode({"refs": refs})
            row = {"session_pk": session_pk, "checkpoint_ns": namespace, "channel": channel}
            sql.replace_blob(conn, {**row, "version": version, "value": full, "root": version})
    removed = sql.delete_checkpoints(conn, session_pk, namespace, [cid for cid, _ in kept])
    sql.delete_blobs(conn, session_pk, namespace, keys)
    return removed


def _kept(conn: Connection, session_pk: int, namespace: str) -> list[tuple[str, dict[str, Any]]]:
    """(id, versions) of the checkpoints a ``keep_latest`` prune keeps: the newest,
    and, when it has delta channels (values rebuilt from the writes of its
    ancestors), every ancestor back to one that holds a stored value of each."""
    row = sql.latest_checkpoint(conn, session_pk, namespace)
    kept: list[tuple[str, dict[str, Any]]] = []
    waiting: set[str] | None = None
    while row is not None:
        checkpoint_id, versions_json, parent_id, delta_json = row
        versions: dict[str, Any] = json.loads(versions_json)
        kept.append((str(checkpoint_id), versions))
        if waiting is None:
            waiting = set(json.loads(delta_json or "[]"))
        keys = [(channel, str(versions[channel])) for channel in waiting if channel in versions]
        found = sql.blob_rows(conn, session_pk, namespace, keys)
        waiting -= {str(channel) for channel, *_ in found}
        if not waiting or parent_id is None:
            break
        row = sql.checkpoint_by_id(conn, session_pk, namespace, str(parent_id))
    return kept


# --------------------------------------------------------------------------- copy


def copy_thread(ctx: MemoryContext, known: KnownLists, source: str, target: str) -> Op[int]:
    """Copy a thread: its conversation (every entry, appended to the target's
    session) and every checkpoint, value and write, the message lists pointing at
    the copies. Returns the checkpoints copied (0 when the source has none).

    Raises:
        InvalidArgument: the target thread has checkpoints already.
        StaleContext: the source changed while it was copied; nothing was copied.
    """
    validate_session_id(source, "thread id")
    validate_session_id(target, "thread id")
    if source == target:
        raise InvalidArgument("copy_thread needs two different threads")

    def snapshot(conn: Connection) -> tuple[int | None, list[tuple[int, StoredMessage]]]:
        pk = sql.thread_sessions(conn, ctx.project, [source]).get(source)
        return pk, ([] if pk is None else sql.session_entries(conn, pk))

    source_pk, entries = yield from ctx.transact(snapshot, write=False)
    if source_pk is None:
        return 0
    prepared = yield from prepare_messages(ctx, [deserialize(text) for _, text in entries])
    copied: list[int] = []

    def choose(conn: Connection, todo: list[store.NewEntry]) -> list[store.NewEntry]:
        if sql.count_checkpoints(conn, ctx.project, target):
            raise InvalidArgument(f"thread {target!r} has checkpoints already")
        return todo

    def after(conn: Connection, target_pk: int, appended: list[MemoryEntry]) -> None:
        if [pk for pk, _ in sql.session_entries(conn, source_pk)] != [pk for pk, _ in entries]:
            raise StaleContext(f"thread {source!r} changed while it was copied; nothing was copied")
        mapping = {old: new.id for (old, _), new in zip(entries, appended, strict=True)}
        copied.append(sql.copy_thread_rows(conn, source_pk, target_pk, mapping))

    yield from append_attached(ctx, target, prepared, Attached(choose, after))
    known.forget([target])
    return copied[0]
