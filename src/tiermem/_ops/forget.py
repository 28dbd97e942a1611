"""Erasing a person: ``forget`` removes everything tiermem keeps about them.

A person is what the application names, inside the memory's project, since
tiermem records no subject of its own at write time and the ids are the
application's:

* ``sessions``: session ids, matched exactly: the sessions with their entries,
  summaries, entry vectors and every other table of the session cascade
  (:mod:`tiermem._storage.cascade`);
* ``scopes``: layer scopes (``mem.layers(scope)``), matched exactly: their
  episodic, semantic and procedural items, the items' vectors and the scope
  rows themselves (the process's working memory of them is emptied by the facade);
* ``namespaces``: namespace prefixes of the stored JSON documents
  (``tiermem-langgraph``'s store), as tuples of labels: every document whose
  namespace is the prefix or lies below it, label by label, so ``("users",
  "ada")`` takes ``("users", "ada", "memories")`` and never ``("users", "adam")``.

Ids are never matched as string prefixes: ``user-1`` would take ``user-10``.
Events of the change feed that name an erased session, or whose payload names
an erased scope or a namespace under an erased prefix, are deleted with them
(those with ``event_content`` carry the messages' text).

Everything is deleted in one transaction (all or nothing; a dry run only counts,
in a read transaction), which records one ``forgotten`` event holding counts
only, never a name or a text. After the commit the database files are scrubbed
(:func:`tiermem._storage.erasure.scrub`), this process's caches of stored text are
emptied (other processes' caches drop a text only when they evict it), then the
``forgotten`` signal is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from .._core.context import MemoryContext
from .._core.messages import clear_cache, validate_session_id
from .._core.runner import Op, compute
from .._storage import erasure
from .._storage.database import Connection
from ..errors import InvalidArgument
from ..events import Forgotten
from ..types import ForgetResult
from . import feed
from .layer_base import validate_scope
from .recall import clear_word_cache

__all__ = ["forget"]

Namespace = tuple[str, ...]


def _names(what: str, values: Iterable[str], check: Callable[[object], str]) -> list[str]:
    if isinstance(values, str | bytes):
        raise InvalidArgument(f"{what} must be a list of names, not one string")
    return list(dict.fromkeys(check(value) for value in values))


def _namespace(value: object) -> Namespace:
    if isinstance(value, str | bytes) or not isinstance(value, tuple | list) or not value:
        raise InvalidArgument(f"a namespace is a non-empty tuple of labels, got {value!r}")
    for label in value:
        if not isinstance(label, str) or not label or "." in label:
            raise InvalidArgument(
                f"namespace labels are non-empty strings without '.', got {label!r}"
            )
    return tuple(value)


def _result(
    found: erasure.Found, rows: dict[str, int], *, dry_run: bool, scrubbed: bool
) -> ForgetResult:
    return ForgetResult(
        sessions=found.session_ids,
        scopes=found.scopes,
        namespaces=tuple(tuple(prefix.split(".")) for prefix in found.prefixes),
        entries=rows.get("tiermem_entry", 0),
        summaries=rows.get("tiermem_summary", 0),
        entry_vectors=rows.get("tiermem_entry_vector", 0),
        layer_items=rows.get("tiermem_layer_item", 0),
        item_vectors=rows.get("tiermem_layer_item_vector", 0),
        documents=rows.get("tiermem_document", 0),
        events=rows.get("tiermem_event", 0),
        rows=tuple(sorted(rows.items())),
        dry_run=dry_run,
        scrubbed=scrubbed,
    )


def forget(
    ctx: MemoryContext,
    sessions: Iterable[str],
    scopes: Iterable[str],
    namespaces: Iterable[Namespace],
    dry_run: bool,
    vacuum: bool,
) -> Op[ForgetResult]:
    """Erase the named sessions, scopes and namespaces (see the module's docstring);
    what was erased, or with ``dry_run`` what would be."""
    session_ids = _names("sessions", sessions, validate_session_id)
    scope_names = _names("scopes", scopes, validate_scope)
    if isinstance(namespaces, str | bytes):
        raise InvalidArgument("namespaces must be a list of tuples of labels")
    prefixes = list(dict.fromkeys(".".join(_namespace(value)) for value in namespaces))
    if not (session_ids or scope_names or prefixes):
        raise InvalidArgument("name at least one session, scope or namespace to forget")
    for name, flag in (("dry_run", dry_run), ("vacuum", vacuum)):
        if not isinstance(flag, bool):
            raise InvalidArgument(f"{name} must be a bool, got {flag!r}")
    project = ctx.project
    named = erasure.Named(tuple(session_ids), tuple(scope_names), tuple(prefixes))

    def work(conn: Connection) -> tuple[erasure.Found, dict[str, int]]:
        found = erasure.find(conn, project, named, lock=not dry_run)
        rows = erasure.erase(conn, project, found, dry_run=dry_run)
        if not dry_run:
            counted = _result(found, rows, dry_run=False, scrubbed=False)
            feed.record(ctx, conn, [Forgotten(project, counted)])
        return found, rows

    found, rows = yield from ctx.transact(work, write=not dry_run)
    if dry_run:
        return _result(found, rows, dry_run=True, scrubbed=False)
    touched = [table for table, count in rows.items() if count]
    scrub = partial(erasure.scrub, ctx.database.engine, touched, vacuum=vacuum)
    scrubbed = yield from compute(scrub)  # on a worker thread from the async API
    # This process's caches of stored text (parsed messages, the words recall compares)
    # are shared by every memory and keyed by the text itself: emptied whole, so no
    # erased text stays in them until evicted.
    clear_cache()
    clear_word_cache()
    result = _result(found, rows, dry_run=False, scrubbed=scrubbed)
    yield from ctx.emit([Forgotten(project, result)])
    return result
