"""Which entries a graph checkpoint supersedes (:mod:`tiermem._ops.threads`).

A graph's state is what its user sees: a message edited or removed there
(``update_state``, ``RemoveMessage``, a regenerated answer) must stop being part of
what the thread's memory summarizes, searches and recalls. Its entry is never
deleted (the checkpoints that held it read it back exactly): it is *retired*
(``EntryRow.retired_at``, :mod:`tiermem._storage.retired`). A put retires:

* **a revision's predecessors**: a message of the new checkpoint whose id names
  current entries of the session with another content (its new content becomes
  a new entry) retires them. Decided from the entries the put looks up by
  message id anyway, whatever process wrote them. A retired entry is never
  reused: a message that comes back to an earlier content gets a new entry.
* **removed messages**: an entry of the previous list of the channel (that of the
  namespace's newest checkpoint so far: the parent's, unless the graph forks from
  an older checkpoint) whose message id the new list no longer holds, except after
  a *compaction*: when the messages removed are the oldest of the previous list
  and the new list starts with a message that list did not hold (the summary that
  LangChain's ``SummarizationMiddleware`` puts in place of the messages it removes
  with ``REMOVE_ALL_MESSAGES``, or tiermem's own summary head), those messages
  were summarized, not taken back: they stay current, and recall can bring them
  back. A removal of the oldest messages with no new first message (a trim) is a
  removal.

The previous list is the thread's newest rather than the parent's so that the
memory follows what the thread shows (``get_state``): a fork from an older
checkpoint (a chat UI's "edit" or "regenerate", which re-run from the checkpoint
before the message) retires what the branch it leaves held and it does not. A
message of that branch that comes back (a fork back to it) is a new entry.

The previous list is only looked at when the new list does not extend the list
this process knows for the channel (an append, most puts, costs nothing more); it
is then the known list if that is the newest checkpoint's version, else it is read
(the newest checkpoint's row, and its list's chain). Removals a middleware makes
on another checkpointer never reach here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .._core.context import MemoryContext
from .._core.render import is_summary_message
from .._storage import checkpoints as sql
from .._storage import retired, sessions, store
from .._storage.database import Connection
from ..checkpoints import NewCheckpoint
from ..errors import SessionNotFound
from .known_lists import KnownLists
from .list_plans import ListPlan, Ref

__all__ = ["REFS", "Found", "decode_list", "removed_entries", "retire", "revised_entries", "walk"]

#: The type of a channel value that is a message list held as entry ids.
REFS = "tiermem:refs"

#: An entry found by message id: (entry id, message id, message JSON, retired).
Found = tuple[int, str, str, bool]


def revised_entries(todo: Sequence[store.NewEntry], found: Sequence[Found]) -> list[int]:
    """The current entries that the new messages ``todo`` revise: same message id,
    another content."""
    new: dict[str, set[str]] = {}
    for entry in todo:
        if entry.message.id:
            new.setdefault(entry.message.id, set()).add(entry.message_json)
    return [
        entry_id
        for entry_id, message_id, text, gone in found
        if not gone and message_id in new and text not in new[message_id]
    ]


def removed_entries(
    old: Sequence[tuple[str | None, Ref]],
    new_ids: Sequence[str | None],
    *,
    summary_first: bool = False,
) -> list[int]:
    """The entries of the list ``old`` ((message id, ref) in order) that the list of
    message ids ``new_ids`` removes, a compaction's aside (see the module docstring);
    ``summary_first``: the new list starts with tiermem's summary message."""
    present = set(new_ids)
    entries = [(mid, ref) for mid, ref in old if isinstance(ref, int) and mid is not None]
    gone = [n for n, (mid, _) in enumerate(entries) if mid not in present]
    if not gone:
        return []
    held = {mid for mid, _ in old}
    compacted = gone == list(range(len(gone))) and bool(new_ids)
    if compacted and (summary_first or new_ids[0] not in held):
        return []
    return [int(entries[n][1]) for n in gone]


def retire(
    ctx: MemoryContext,
    conn: Connection,
    known: KnownLists,
    new: NewCheckpoint,
    plans: Sequence[ListPlan],
    revised: Sequence[int],
) -> None:
    """In the put's transaction: retire the entries ``revised`` and those the new
    lists remove from the previous ones (see the module docstring)."""
    changed = [plan for plan in plans if not plan.extends]
    moved = _moved(known, new, {plan.channel for plan in plans})
    if not revised and (new.parent_id is None or not (changed or moved)):
        return
    try:
        # Locked first (PostgreSQL), as every writer of the session locks it before
        # its entries: retiring entries then never waits on a compression that
        # holds the session and waits on them.
        session_pk = sessions.get_session(conn, ctx.project, new.thread_id).pk
    except SessionNotFound:
        return  # its first checkpoint: nothing to retire
    doomed = list(revised)
    if new.parent_id is not None and (changed or moved):
        newest = sql.latest_checkpoint(conn, session_pk, new.checkpoint_ns)
        versions: dict[str, Any] = {} if newest is None else json.loads(newest[1])
        for plan in changed:
            if (version := versions.get(plan.channel)) is not None:
                old = _list(conn, known, new, session_pk, plan.channel, str(version))
                first = bool(plan.messages) and is_summary_message(plan.messages[0])
                ids = [message.id for message in plan.messages]
                doomed += removed_entries(old, ids, summary_first=first)
        for channel in moved:
            version = versions.get(channel)
            if version is not None and str(version) != str(new.versions[channel]):
                old = _list(conn, known, new, session_pk, channel, str(version))
                now = _list(conn, known, new, session_pk, channel, str(new.versions[channel]))
                first = bool(now) and isinstance(now[0][1], str)
                doomed += removed_entries(old, [mid for mid, _ in now], summary_first=first)
    if doomed:
        retired.retire(conn, session_pk, doomed, ctx.now())


def _moved(known: KnownLists, new: NewCheckpoint, planned: set[str]) -> list[str]:
    """The message-list channels that the checkpoint does not write but holds at
    another version than the list this process knows: a fork's first checkpoint,
    which holds an older checkpoint's lists."""
    moved = []
    for channel, version in new.versions.items():
        if channel not in planned:
            cached = known.get((new.thread_id, new.checkpoint_ns, channel))
            if cached is not None and cached.version != str(version):
                moved.append(channel)
    return moved


def _list(
    conn: Connection,
    known: KnownLists,
    new: NewCheckpoint,
    session_pk: int,
    channel: str,
    version: str,
) -> list[tuple[str | None, Ref]]:
    """(message id, ref) of each message of the channel's list at ``version``: the
    known list when it is that version, else read (empty when that version is no
    stored message list)."""
    cached = known.get((new.thread_id, new.checkpoint_ns, channel))
    if cached is not None and cached.version == version:
        return [(m.id, ref) for m, ref in zip(cached.messages, cached.refs, strict=True)]
    refs = load_refs(conn, session_pk, new.checkpoint_ns, channel, version)
    ids = retired.entry_message_ids(conn, [ref for ref in refs if isinstance(ref, int)])
    return [(ids.get(ref) if isinstance(ref, int) else _inline_id(ref), ref) for ref in refs]


def _inline_id(ref: str) -> str | None:
    """The id of a message kept inline in its list (its JSON)."""
    found = json.loads(ref).get("data", {}).get("id")
    return None if found is None else str(found)


def load_refs(
    conn: Connection, session_pk: int, namespace: str, channel: str, version: str
) -> list[Ref]:
    """The refs of a stored message list (empty when it is not stored as one)."""
    rows = sql.blob_rows(conn, session_pk, namespace, [(channel, version)])
    if not rows or rows[0][2] != REFS:
        return []
    return decode_list(conn, session_pk, namespace, channel, version, rows[0][3], rows[0][4])[0]


def decode_list(
    conn: Connection,
    session_pk: int,
    namespace: str,
    channel: str,
    version: str,
    value: bytes,
    root: str | None,
) -> tuple[list[Ref], int]:
    """The refs of a stored message list from its row (``value``, and the ``root`` of
    its chain of deltas), and the number of links followed to its full list."""
    decoded = json.loads(bytes(value))
    if "refs" in decoded:
        return list(decoded["refs"]), 0
    links = {
        str(v): json.loads(bytes(link))
        for v, link in sql.chain_rows(conn, session_pk, namespace, channel, str(root))
    }
    return walk(links, version)


def walk(links: dict[str, Any], version: str) -> tuple[list[Ref], int]:
    """The refs of ``version``'s list, following its chain of deltas back to the
    full list it starts from, and the number of links followed."""
    tails: list[list[Ref]] = []
    link = links[version]
    while "refs" not in link:
        tails.append(link["add"])
        link = links[link["base"]]
    refs = list(link["refs"])
    for tail in reversed(tails):
        refs.extend(tail)
    return refs, len(tails)
