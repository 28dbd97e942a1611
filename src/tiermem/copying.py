"""Copying whole projects from one database to another (SQLite to PostgreSQL and back).

:func:`copy_project` copies a project's sessions (entries, summaries, counters and
tiers, through the validated path of ``import_session``), its layer scopes with
their items, its stored documents (the LangGraph store) and its change-feed events.
What a user sees stays the same: session ids, seqs, message ids, timestamps,
token counts (recounted with each session's own encoding, which gives the stored
counts), scope names, semantic keys, document keys and values, and the events in
their delivery order with their kinds, sessions, payloads and times. Row ids are
the target's own (its tables may hold other projects), so ids inside event
payloads (``entry_id``, ``summary_id``, ``item_id``) name the source's rows.

The vectors of entries and layer items are copied with the id of the model that
made them, in the transaction of their session or scope (documents keep theirs, a
part of the document): a target memory with the same embeddings searches with them
at once; one with another model ignores them, as it would in the source, and
``tiermem embed`` makes its own. Consumers' acknowledged positions are not copied:
positions are those of one database, so a consumer of the target starts from its
beginning.

The copy is resumable. Each session, each scope and each page of documents or
events is written in a transaction of its own; a second run skips what the target
holds already and is the same, and copies the rest. Before writing anything it
compares what both databases hold under the same names, and a difference is a
:class:`~tiermem.errors.CopyConflict`, raised before the first write. Copy a quiet
project for an exact copy: a source that changes during the copy is copied as each
part is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TypeVar

from ._core.clock import utc_now
from ._ops.transfer import import_state, read_state
from ._storage import copying as sql
from ._storage import failpoints as _failpoints
from ._storage.database import Connection, Database, parse_url
from .errors import CopyConflict, ImportValidationError, InvalidArgument
from .state import MAX_IMPORT_BYTES, SessionState
from .tokens import TokenCounter

__all__ = ["CopyProgress", "CopyResult", "copy_project"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CopyProgress:
    """Where a copy is: ``done`` of the ``total`` items of one ``kind`` (``sessions``,
    ``scopes``, ``documents``, ``events``) of ``project`` that it copies."""

    project: str
    kind: str
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class CopyResult:
    """What a copy wrote, and what it found in the target already (``*_present``:
    the same in both, so skipped).

    Attributes:
        projects: the projects copied.
        sessions: sessions written, with their ``entries`` and ``summaries``.
        scopes: layer scopes written, with their ``layer_items``.
        vectors: embeddings of the entries and layer items written.
        documents: stored documents written.
        events: change-feed events written.
    """

    projects: tuple[str, ...] = ()
    sessions: int = 0
    entries: int = 0
    summaries: int = 0
    scopes: int = 0
    layer_items: int = 0
    vectors: int = 0
    documents: int = 0
    events: int = 0
    sessions_present: int = 0
    scopes_present: int = 0
    documents_present: int = 0
    events_present: int = 0

    def __add__(self, other: CopyResult) -> CopyResult:
        return CopyResult(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(CopyResult))
        )

    def summary(self) -> str:
        """One line: what was copied and what was there already."""
        names = ", ".join(repr(name) for name in self.projects) or "no project"
        label = "project" if len(self.projects) == 1 else "projects"
        copied = (
            f"{self.sessions} sessions ({self.entries} entries, {self.summaries} summaries), "
            f"{self.scopes} scopes ({self.layer_items} layer items), "
            f"{self.vectors} vectors, {self.documents} documents, {self.events} events"
        )
        present = (
            f"{self.sessions_present} sessions, {self.scopes_present} scopes, "
            f"{self.documents_present} documents, {self.events_present} events"
        )
        return f"copied {label} {names}: {copied}; already in the target: {present}"


Progress = Callable[[CopyProgress], None]


def copy_project(
    source: str,
    target: str,
    *,
    project: str | None = "default",
    progress: Progress | None = None,
) -> CopyResult:
    """Copy a project (``project=None``: every project of ``source``) into ``target``.

    ``source`` and ``target`` are database URLs (SQLite or PostgreSQL). The source is
    only read (a missing SQLite file, or a database without tiermem's tables, is an
    error); the target's tables are created when missing. See the module's text for
    what is copied, what is not, and how a second run resumes.

    Args:
        progress: called as each item is copied.

    Returns:
        The counts of what was copied and of what the target held already.

    Raises:
        CopyConflict: the target holds a session, scope or document under the same
            name that differs from the source's, or events of the project that are
            not the source's; nothing was written.
        InvalidArgument: a bad URL or project name, or no tiermem data at ``source``.
        StorageError: a database failed; what committed before stays (run again).
    """
    if project is not None and (
        not isinstance(project, str) or not 0 < len(project) <= 255 or "\0" in project
    ):
        raise InvalidArgument(f"project must be 1-255 characters without NUL, got {project!r}")
    _check_urls(source, target)
    origin, destination = Database(source), Database(target)
    try:
        if not origin.has_tables():
            raise InvalidArgument(f"no tiermem tables in {_shown(origin)}: nothing to copy")
        names = [project] if project is not None else origin.run(sql.projects, write=False)
        copies = [_ProjectCopy(origin, destination, name, progress) for name in names]
        # Every project is compared before any is written: a conflict in the last
        # one leaves the target as it was.
        plans = [copy.plan() for copy in copies]
        result = CopyResult()
        for copy, plan in zip(copies, plans, strict=True):
            result += copy.run(plan)
        return result
    finally:
        origin.dispose()
        destination.dispose()


def _check_urls(source: str, target: str) -> None:
    """Refuse a URL that is not a string, and a SQLite source file that does not
    exist (opening it would create it)."""
    for url in (source, target):
        if not isinstance(url, str):
            raise InvalidArgument(f"a database URL must be a string, got {url!r}")
    parsed = parse_url(source)
    path = parsed.database
    if parsed.get_backend_name() == "sqlite" and path not in (None, "", ":memory:"):
        if not path.startswith("file:") and not Path(path).is_file():
            raise InvalidArgument(f"no database at {path}")


def _shown(database: Database) -> str:
    return database.engine.url.render_as_string(hide_password=True)


@dataclass
class _Plan:
    """What the comparison found: what to copy and what the target holds already."""

    sessions: list[str]
    sessions_present: int
    scopes: list[str]
    scopes_present: int
    documents: int
    documents_present: int
    events_after: tuple[int, int]
    events: int
    events_present: int


class _ProjectCopy:
    """The copy of one project: compare first (:meth:`plan`), then write."""

    def __init__(
        self, origin: Database, destination: Database, project: str, progress: Progress | None
    ) -> None:
        self.origin, self.destination, self.project = origin, destination, project
        self.progress = progress
        self.counters: dict[str, TokenCounter] = {}

    def run(self, plan: _Plan) -> CopyResult:
        """Write what :meth:`plan` found missing in the target."""
        entries = summaries = items = vectors = 0
        for done, session_id in enumerate(plan.sessions, 1):
            state, stored = self.copy_session(session_id)
            entries, summaries = entries + len(state.entries), summaries + len(state.summaries)
            vectors += stored
            self.report("sessions", done, len(plan.sessions))
        for done, scope in enumerate(plan.scopes, 1):
            written, stored = self.copy_scope(scope)
            items, vectors = items + written, vectors + stored
            self.report("scopes", done, len(plan.scopes))
        documents = self.copy_documents(plan.documents)
        events = self.copy_events(plan)
        return CopyResult(
            projects=(self.project,),
            sessions=len(plan.sessions),
            entries=entries,
            summaries=summaries,
            scopes=len(plan.scopes),
            layer_items=items,
            vectors=vectors,
            documents=documents,
            events=events,
            sessions_present=plan.sessions_present,
            scopes_present=plan.scopes_present,
            documents_present=plan.documents_present,
            events_present=plan.events_present,
        )

    def report(self, kind: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(CopyProgress(self.project, kind, done, total))

    def conflict(
        self, what: str, remedy: str = "remove it from the target or copy into another database"
    ) -> CopyConflict:
        return CopyConflict(
            f"{what} of project {self.project!r} differs between the source and the target "
            f"({_shown(self.destination)}); {remedy}"
        )

    def read(self, work: Callable[[Connection], T]) -> T:
        return self.origin.run(work, write=False, snapshot=True)

    # ----------------------------------------------------------------- comparing

    def plan(self) -> _Plan:
        """Compare what both databases hold under the same names, before any write.

        Raises:
            CopyConflict: at the first difference.
        """
        project = self.project
        sources = self.origin.run(_on(sql.session_ids, project), write=False)
        held = set(self.destination.run(_on(sql.session_ids, project), write=False))
        for session_id in sources:
            if session_id in held and _content(self.source_state(session_id)) != _content(
                self.target_state(session_id)
            ):
                raise self.conflict(f"session {session_id!r}")
        scopes = self.origin.run(_on(sql.scope_names, project), write=False)
        present = set(self.destination.run(_on(sql.scope_names, project), write=False))
        for scope in scopes:
            if scope in present:
                theirs = self.destination.run(_on(sql.read_scope, project, scope), write=False)
                ours = self.read(_on(sql.read_scope, project, scope))
                if ours is None or theirs is None:
                    continue  # deleted meanwhile: the write finds out
                if ours.content() != theirs.content():
                    raise self.conflict(f"layer scope {scope!r}")
        documents = documents_present = 0
        for page in self.document_pages():
            matched = self.matching_documents(page, write=False)
            documents += len(page) - matched
            documents_present += matched
        after, matched = self.events_in_target()
        total = self.count_events(after)
        return _Plan(
            sessions=[sid for sid in sources if sid not in held],
            sessions_present=len([sid for sid in sources if sid in held]),
            scopes=[scope for scope in scopes if scope not in present],
            scopes_present=len([scope for scope in scopes if scope in present]),
            documents=documents,
            documents_present=documents_present,
            events_after=after,
            events=total,
            events_present=matched,
        )

    def source_state(self, session_id: str) -> SessionState:
        project = self.project
        return self.origin.run(
            lambda conn: read_state(conn, project, session_id), write=False, snapshot=True
        )

    def target_state(self, session_id: str) -> SessionState:
        project = self.project
        return self.destination.run(
            lambda conn: read_state(conn, project, session_id), write=False, snapshot=True
        )

    def document_pages(self) -> Iterator[list[dict[str, object]]]:
        """The source's documents, a page at a time, in key order."""
        after: tuple[str, str] | None = None
        project = self.project
        while True:
            page = self.origin.run(
                _on(sql.document_page, project, after, sql.DOCUMENT_PAGE), write=False
            )
            if not page:
                return
            yield page
            last = page[-1]
            after = (str(last["namespace"]), str(last["key"]))

    def matching_documents(self, page: list[dict[str, object]], *, write: bool) -> int:
        """How many documents of ``page`` the target holds already; with ``write``
        the others are inserted in the same transaction.

        Raises:
            CopyConflict: the target holds one of them with other content.
        """
        project = self.project
        first = (str(page[0]["namespace"]), str(page[0]["key"]))
        last = (str(page[-1]["namespace"]), str(page[-1]["key"]))

        def work(conn: Connection) -> int:
            held = {
                (row["namespace"], row["key"]): row
                for row in sql.document_page(conn, project, None, None, since=first, through=last)
            }
            missing = []
            for row in page:
                theirs = held.get((row["namespace"], row["key"]))
                if theirs is None:
                    missing.append(row)
                elif not sql.same_documents(row, theirs):
                    raise self.conflict(f"document {row['key']!r} in {row['namespace']!r}")
            if write and sql.insert_documents(conn, project, missing) != len(missing):
                raise self.conflict("a document written meanwhile")
            return len(page) - len(missing)

        return self.destination.run(work, write=write)

    def events_in_target(self) -> tuple[tuple[int, int], int]:
        """How far the target's events of the project repeat the source's, from the
        first: the source position after the last repeated one, and their number.

        Raises:
            CopyConflict: the target holds an event that is not the source's next.
        """
        project = self.project
        ours: tuple[int, int] = (0, 0)
        theirs: tuple[int, int] = (0, 0)
        matched = 0
        while True:
            held = self.destination.run(
                _on(sql.event_page, project, theirs, sql.EVENT_PAGE), write=False
            )
            if not held:
                return ours, matched
            copied = self.origin.run(_on(sql.event_page, project, ours, len(held)), write=False)
            for position, row in enumerate(held):
                if position >= len(copied) or sql.event_content(row) != sql.event_content(
                    copied[position]
                ):
                    raise self.conflict(
                        "the change feed",
                        "the target holds events that are not the source's: copy into another "
                        "database",
                    )
            ours = (int(copied[-1][0]), int(copied[-1][1]))
            theirs = (int(held[-1][0]), int(held[-1][1]))
            matched += len(held)

    def count_events(self, after: tuple[int, int]) -> int:
        project, total = self.project, 0
        while True:
            page = self.origin.run(_on(sql.event_page, project, after, sql.EVENT_PAGE), write=False)
            if not page:
                return total
            total += len(page)
            after = (int(page[-1][0]), int(page[-1][1]))

    # ------------------------------------------------------------------- writing

    def copy_session(self, session_id: str) -> tuple[SessionState, int]:
        """Write one session with its vectors (one transaction), validated as an
        import is; the session and the number of vectors."""
        project = self.project

        def read(conn: Connection) -> tuple[SessionState, list[sql.Vector]]:
            return read_state(conn, project, session_id), sql.entry_vectors(
                conn, project, session_id
            )

        state, vectors = self.read(read)
        counter = self.counters.get(state.encoding)
        if counter is None:
            counter = self.counters[state.encoding] = TokenCounter(encoding=state.encoding)
        try:
            # An export of the source can be no larger than MAX_IMPORT_BYTES: the
            # source accepted each entry under its own limit, which the copy keeps.
            plan = import_state(state, counter, max_entry_chars=MAX_IMPORT_BYTES)
        except ImportValidationError as error:
            raise ImportValidationError(
                f"session {session_id!r} of the source cannot be copied: {error}", path=error.path
            ) from error
        now = utc_now()

        def work(conn: Connection) -> int:
            try:
                plan.write(conn, project, overwrite=False, now=now)
            except ImportValidationError as error:  # created in the target meanwhile
                raise self.conflict(f"session {session_id!r}") from error
            return sql.insert_entry_vectors(conn, project, session_id, vectors)

        stored = self.destination.run(work)
        _failpoints.hit("copy.after_session")
        return state, stored

    def copy_scope(self, scope: str) -> tuple[int, int]:
        """Write one layer scope with its items and their vectors (one transaction);
        the numbers of items and vectors."""
        project = self.project
        stored = self.read(_on(sql.read_scope, project, scope))
        if stored is None:
            return 0, 0  # deleted from the source since the comparison

        def work(conn: Connection) -> None:
            if not sql.insert_scope(conn, project, stored):
                raise self.conflict(f"layer scope {scope!r}")

        self.destination.run(work)
        return len(stored.items), len(stored.vectors)

    def copy_documents(self, total: int) -> int:
        written = 0
        for page in self.document_pages():
            written += len(page) - self.matching_documents(page, write=True)
            if total:
                self.report("documents", written, total)
        return written

    def copy_events(self, plan: _Plan) -> int:
        """Append the source's events the target lacks, a page per transaction."""
        project, after, written = self.project, plan.events_after, 0
        while True:
            page = self.origin.run(_on(sql.event_page, project, after, sql.EVENT_PAGE), write=False)
            if not page:
                return written
            contents = [sql.event_content(row) for row in page]
            self.destination.run(_on(sql.insert_events, project, contents))
            _failpoints.hit("copy.after_events")
            after = (int(page[-1][0]), int(page[-1][1]))
            written += len(page)
            self.report("events", written, plan.events)


def _content(state: SessionState) -> dict[str, object]:
    """A session's snapshot without its access bookkeeping (which reads change)."""
    return state.model_dump(mode="json", exclude={"last_accessed", "access_count"})


def _on(work: Callable[..., T], *args: object) -> Callable[[Connection], T]:
    """``work(conn, *args)`` as a transaction's body (the arguments bound now)."""
    return lambda conn: work(conn, *args)
