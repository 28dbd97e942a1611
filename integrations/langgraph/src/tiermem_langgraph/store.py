"""``TieredStore``: a LangGraph ``BaseStore`` kept in tiermem's database.

Each ``batch``/``abatch`` call is one operation, written once as a generator:
it asks for embeddings (the only step whose sync and async forms differ) and
then does all of its database work in one transaction through
``memory.database.run``, so a batch is all or nothing and fails with
tiermem's typed errors. The sync driver calls the embedder directly; the async
one awaits it and runs the database steps on a worker thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from sqlalchemy.engine import Connection
from tiermem import ConversationMemory, MemoryTier
from tiermem._storage import documents as docs
from tiermem._storage import failpoints as _failpoints
from tiermem._storage import fts
from tiermem._storage.database import commit_without_waiting
from tiermem._storage.document_values import check_text, check_value
from tiermem.errors import InvalidArgument
from tiermem.events import DocumentDeleted, DocumentPut, Event
from tiermem.tiers import calculate_tier

from ._sweeper import Sweeper

__all__ = ["DEFAULT_VECTOR_CANDIDATES", "ItemState", "TieredStore"]

T = TypeVar("T")

#: With embeddings, a query scores at most this many of the most recently updated
#: documents that pass the namespace and filter, plus every word match among the same
#: number of best word matches.
DEFAULT_VECTOR_CANDIDATES = 1_000


@dataclass(frozen=True, slots=True)
class ItemState:
    """tiermem's access state of a stored item (:meth:`TieredStore.item_state`).

    Attributes:
        tier: ACTIVE, RECENT or ARCHIVED by the last access (the memory's tier
            policy), EXPIRED once its time to live has passed.
        access_count: the writes and reads that returned it.
        last_accessed: the last of them.
        expires_at: when its time to live ends (``None``: never).
        ttl_minutes: its time to live in minutes (``None``: none).
    """

    tier: MemoryTier
    access_count: int
    last_accessed: datetime
    expires_at: datetime | None
    ttl_minutes: float | None


@dataclass(frozen=True, slots=True)
class _Embed:
    """Embed these texts (documents, or queries) and send the vectors back."""

    texts: list[str]
    queries: bool


_Operation = Generator[_Embed, list[list[float]], T]


def _namespace_text(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def _namespace_tuple(text: str) -> tuple[str, ...]:
    return tuple(text.split("."))


def _leaf_text(value: Any) -> list[str]:
    """Every string and number in a JSON value, in document order."""
    if isinstance(value, Mapping):
        return [text for inner in value.values() for text in _leaf_text(inner)]
    if isinstance(value, list | tuple):
        return [text for inner in value for text in _leaf_text(inner)]
    if isinstance(value, bool) or value is None:
        return []
    return [str(value)]


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidArgument(f"unsupported namespace match type {condition.match_type!r}")
    return all(label == wanted or wanted == "*" for label, wanted in pairs)


#: The largest limit or offset: what a 64-bit SQL integer holds.
_MAX_COUNT = 2**63 - 1

#: The longest time to live, in minutes (a thousand years): every expiry is then a
#: date both backends and Python hold.
MAX_TTL_MINUTES = 1000 * 366 * 24 * 60

#: The longest sweep interval, in minutes: the longest wait a thread can make.
_MAX_WAIT = threading.TIMEOUT_MAX / 60


def _check_count(name: str, value: object, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_COUNT:
        raise InvalidArgument(f"{name} must be an int from 0 to 2**63 - 1, got {value!r}")


def _check_minutes(name: str, value: object, maximum: float) -> float | None:
    """``value`` as a number of minutes > 0 and <= ``maximum``, or ``None``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= maximum:
        raise InvalidArgument(
            f"{name} must be a number of minutes > 0 and <= {maximum:g}, or None; got {value!r}"
        )
    return float(value)


def _check_ttl(ttl: object) -> float | None:
    return _check_minutes("ttl", ttl, MAX_TTL_MINUTES)


def _check_labels(op: Op) -> None:
    """The namespace labels and key of ``op`` are text both backends store."""
    labels: list[str] = []
    if isinstance(op, GetOp | PutOp):
        labels = [*op.namespace, op.key]
    elif isinstance(op, SearchOp):
        labels = list(op.namespace_prefix)
    elif isinstance(op, ListNamespacesOp):
        labels = [label for c in op.match_conditions or () for label in c.path]
    for label in labels:
        if isinstance(label, str):  # other types are LangGraph's namespace errors
            check_text(label, "a namespace label or key")


def _check_put(op: PutOp) -> None:
    if op.value is None:
        return
    # An empty namespace has no text form that reads back. The reserved "langgraph"
    # root is refused by put/aput only: LangGraph writes there with raw batches.
    if not op.namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if not isinstance(op.value, Mapping):
        raise InvalidArgument(f"a stored value must be a mapping, got {type(op.value).__name__}")
    if op.index is not None and op.index is not False:
        if not isinstance(op.index, list) or not all(isinstance(p, str) for p in op.index):
            raise InvalidArgument("index must be False, None or a list of field paths")
    check_value(op.value, "a stored value")
    try:
        json.dumps(op.value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidArgument(f"a stored value must be JSON: {error}") from error


class TieredStore(BaseStore):
    """A LangGraph store whose items are tiermem documents of ``memory``'s project.

    Items live in tiermem's ``tiermem_document`` table on SQLite or PostgreSQL,
    in tiermem's transactions and with its typed errors. ``search(query=...)``
    uses tiermem's full-text index over each item's indexed fields (and the
    embeddings of ``index["embed"]``, when given); ``filter`` runs in SQL. Every
    item carries tiermem's access tier, access count and last access
    (:meth:`item_state`), counted by ``memory.get_tier_stats()``, refreshed by
    ``memory.recalculate_tiers()``; ``memory.prune_expired()`` deletes items whose
    time to live has passed.

    Args:
        memory: the memory whose database and project hold the items.
        index: LangGraph's ``IndexConfig``: ``fields`` (default ``["$"]``, every
            string and number of the value) decides the text full-text search
            sees; with ``embed`` and ``dims``, those fields are embedded too and a
            query is scored by cosine similarity.
        ttl: LangGraph's ``TTLConfig``: ``default_ttl`` (minutes),
            ``refresh_on_read`` (default True), ``sweep_interval_minutes`` (for
            :meth:`start_ttl_sweeper`); ``omit_expired`` is accepted, and expired
            items are never returned whatever it says.

    Raises:
        InvalidArgument: for a bad ``index`` or ``ttl``.
    """

    supports_ttl = True

    def __init__(
        self,
        memory: ConversationMemory,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        if not isinstance(memory, ConversationMemory):
            raise InvalidArgument("memory must be a ConversationMemory")
        self.memory = memory
        self.ttl_config = self._check_ttl_config(ttl)
        self.index_config: dict[str, Any] | None = dict(index) if index else None
        self.embeddings: Embeddings | None = None
        self.dims: int | None = None
        fields: list[str] = ["$"]
        if self.index_config is not None:
            fields = list(self.index_config.get("fields") or ["$"])
            embed = self.index_config.get("embed")
            if embed is not None:
                dims = self.index_config.get("dims")
                if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
                    raise InvalidArgument("index with embed needs dims, an int >= 1")
                self.dims = dims
                self.embeddings = ensure_embeddings(embed)
        self._fields = [(path, path if path == "$" else tokenize_path(path)) for path in fields]
        self._owned = False
        self._sweeper: Sweeper | None = None

    @staticmethod
    def _check_ttl_config(ttl: TTLConfig | None) -> TTLConfig | None:
        if ttl is None:
            return None
        if not isinstance(ttl, Mapping):
            raise InvalidArgument("ttl must be a TTLConfig mapping")
        known = {"default_ttl", "refresh_on_read", "omit_expired", "sweep_interval_minutes"}
        unknown = set(ttl) - known
        if unknown:
            raise InvalidArgument(f"unknown TTLConfig keys: {sorted(unknown)}")
        # Accepted as LangGraph's stores accept it; expired items are omitted either way.
        if not isinstance(ttl.get("omit_expired", False), bool):
            raise InvalidArgument("omit_expired must be a bool")
        _check_ttl(ttl.get("default_ttl"))
        _check_minutes("sweep_interval_minutes", ttl.get("sweep_interval_minutes"), _MAX_WAIT)
        return TTLConfig(**ttl)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        project: str = "default",
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        **memory_options: Any,
    ) -> TieredStore:
        """A store on its own memory at ``url``, closed with :meth:`close`.

        Args:
            url: a SQLAlchemy URL (``sqlite:///FILE`` or ``postgresql://...``).
            project: the tiermem project whose items it holds.
            index: as for the constructor.
            ttl: as for the constructor.
            **memory_options: more ``ConversationMemory`` arguments (``clock``,
                ``config``, ``lock_timeout``...).
        """
        memory = ConversationMemory(url, project=project, **memory_options)
        try:
            store = cls(memory, index=index, ttl=ttl)
        except BaseException:
            memory.close()
            raise
        store._owned = True
        return store

    def close(self) -> None:
        """Stop the sweeper; close the memory if :meth:`from_url` made it."""
        self.stop_ttl_sweeper()
        if self._owned:
            self.memory.close()

    def _op_setup(self) -> _Operation[None]:
        self.memory.database.ensure_schema()
        return
        yield  # pragma: no cover - makes this a generator

    def setup(self) -> None:
        """Create tiermem's tables in the memory's database if they are missing.

        Idempotent, and safe when several processes call it at once. Optional: the
        first operation creates them too; calling it at start-up (as with
        LangGraph's ``PostgresStore`` and ``SqliteStore``) moves that work, and its
        errors, out of the first request. Upgrading an older tiermem schema is
        ``tiermem db upgrade``.

        Raises:
            StorageError: (a subclass) when the database cannot be reached or written.
        """
        self._drive(self._op_setup())

    async def asetup(self) -> None:
        """Async :meth:`setup`."""
        await self._adrive(self._op_setup())

    def __enter__(self) -> TieredStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ batches

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in one transaction; results in the order of ``ops``.

        Reads see the store as it was before the batch's writes; of several
        writes to one item the last wins.

        Raises:
            InvalidNamespaceError: for a bad namespace (nothing runs).
            InvalidArgument: for another bad argument (nothing runs).
            StorageError: (a subclass) when the database fails; nothing was written.
        """
        return self._drive(self._op_batch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`."""
        return await self._adrive(self._op_batch(list(ops)))

    def _drive(self, op: _Operation[T]) -> T:
        vectors: list[list[float]] | None = None
        while True:
            try:
                request = op.send(vectors)  # type: ignore[arg-type]
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            embeddings = self._require_embeddings()
            if request.queries:
                vectors = [embeddings.embed_query(text) for text in request.texts]
            else:
                vectors = embeddings.embed_documents(request.texts)

    async def _adrive(self, op: _Operation[T]) -> T:
        vectors: list[list[float]] | None = None
        while True:
            done, request = await asyncio.to_thread(_step, op, vectors)
            if done:
                return request  # type: ignore[no-any-return]
            embeddings = self._require_embeddings()
            if request.queries:
                vectors = list(
                    await asyncio.gather(*(embeddings.aembed_query(t) for t in request.texts))
                )
            else:
                vectors = await embeddings.aembed_documents(request.texts)

    def _require_embeddings(self) -> Embeddings:
        if self.embeddings is None:  # only requested when configured
            raise InvalidArgument("no embeddings configured")
        return self.embeddings

    def _op_batch(self, ops: list[Op]) -> _Operation[list[Result]]:
        for op in ops:
            if not isinstance(op, GetOp | SearchOp | PutOp | ListNamespacesOp):
                raise InvalidArgument(f"unknown operation {type(op).__name__}")
            validate_op_namespace(op)
            _check_labels(op)
            if isinstance(op, PutOp):
                _check_put(op)
                _check_ttl(op.ttl)
            elif isinstance(op, SearchOp):
                _check_count("limit", op.limit)
                _check_count("offset", op.offset)
                docs.filter_clause(self.memory.database.dialect, op.filter)  # checks it
            elif isinstance(op, ListNamespacesOp):
                _check_count("limit", op.limit)
                _check_count("offset", op.offset)
                _check_count("max_depth", op.max_depth, allow_none=True)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op
        new_docs = [self._new_document(op) for op in puts.values() if op.value is not None]
        if self.embeddings is not None:
            yield from self._embed_documents(puts, new_docs)
        query_vectors: dict[str, list[float]] = {}
        if self.embeddings is not None:
            queries = list(
                dict.fromkeys(op.query for op in ops if isinstance(op, SearchOp) and op.query)
            )
            if queries:
                vectors = yield _Embed(queries, queries=True)
                query_vectors = dict(zip(queries, vectors, strict=True))
        now = self.memory.now()
        live_at = self._expiry_clock(now)
        project = self.memory.project
        deletes = [(_namespace_text(ns), key) for (ns, key), op in puts.items() if op.value is None]
        reading = any(isinstance(op, GetOp | SearchOp) for op in ops)

        def work(conn: Connection) -> list[Result]:
            results: list[Result] = []
            touched: dict[bool, list[docs.StoredDocument]] = {True: [], False: []}
            for op in ops:
                if isinstance(op, GetOp):
                    address = (_namespace_text(tuple(op.namespace)), op.key)
                    found = docs.get_documents(conn, project=project, wanted=[address], now=live_at)
                    document = found.get(address)
                    if document is not None:
                        touched[bool(op.refresh_ttl)].append(document)
                    results.append(None if document is None else _item(document))
                elif isinstance(op, SearchOp):
                    hits = self._search(conn, op, query_vectors.get(op.query or ""), live_at)
                    touched[bool(op.refresh_ttl)].extend(hits)
                    results.append([_search_item(document) for document in hits])
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(conn, op, live_at))
                else:
                    results.append(None)
            expires_from = now
            ttls = [d.ttl_minutes for d in touched[True]] + [d.ttl_minutes for d in new_docs]
            if self.memory.database.server_time and any(ttl is not None for ttl in ttls):
                # A time to live runs from the server's now(), read once.
                expires_from = docs.transaction_time(conn)
            for refresh, documents in touched.items():
                docs.touch_documents(
                    conn, documents, now=now, refresh=refresh, expires_from=expires_from
                )
            if not puts:  # reads: only access records were written
                commit_without_waiting(conn)
            deleted = docs.delete_documents(conn, project=project, addresses=deletes)
            docs.put_documents(
                conn, project=project, documents=new_docs, now=now, expires_from=expires_from
            )
            changes: list[Event] = [
                DocumentDeleted(_namespace_tuple(namespace), key) for namespace, key in deleted
            ]
            changes += [DocumentPut(_namespace_tuple(doc.namespace), doc.key) for doc in new_docs]
            for change in changes:
                self.memory.feed.record(conn, change)
            return results

        write = bool(puts) or reading
        return self.memory.database.run(work, write=write)

    def _new_document(self, op: PutOp) -> docs.NewDocument:
        assert op.value is not None
        value = dict(op.value)
        text: str | None = None
        if op.index is not False:
            paths = self._fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
            pieces: list[str] = []
            for path, tokens in paths:
                pieces.extend(_leaf_text(value) if path == "$" else get_text_at_path(value, tokens))
            text = "\n".join(pieces)
        return docs.NewDocument(
            namespace=_namespace_text(tuple(op.namespace)),
            key=op.key,
            value=value,
            indexed_text=text,
            vectors=None,
            ttl_minutes=_check_ttl(op.ttl),
        )

    def _embed_documents(
        self, puts: dict[tuple[tuple[str, ...], str], PutOp], new_docs: list[docs.NewDocument]
    ) -> Generator[_Embed, list[list[float]], None]:
        """Fill the ``vectors`` of ``new_docs`` (in place) with one embedding call."""
        wanted: list[tuple[int, str]] = []
        for position, document in enumerate(new_docs):
            op = puts[(_namespace_tuple(document.namespace), document.key)]
            if op.index is False:
                continue
            paths = self._fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
            for _, tokens in paths:
                for text in get_text_at_path(document.value, tokens):
                    wanted.append((position, text))
        if not wanted:
            return
        vectors = yield _Embed([text for _, text in wanted], queries=False)
        if len(vectors) != len(wanted):
            raise InvalidArgument(
                f"the embedder returned {len(vectors)} vectors for {len(wanted)} texts"
            )
        packed: dict[int, list[list[float]]] = {}
        for (position, _), vector in zip(wanted, vectors, strict=True):
            if len(vector) != self.dims:
                raise InvalidArgument(f"an embedding has {len(vector)} dimensions, not {self.dims}")
            packed.setdefault(position, []).append(vector)
        for position, found in packed.items():
            blob = np.asarray(found, dtype=np.float32).tobytes()
            new_docs[position] = _replace_vectors(new_docs[position], blob)

    def _search(
        self,
        conn: Connection,
        op: SearchOp,
        query_vector: list[float] | None,
        now: Any,
    ) -> list[docs.StoredDocument]:
        prefix = _namespace_text(tuple(op.namespace_prefix)) or None
        words = fts.query_words(op.query) if op.query else []
        common: dict[str, Any] = {
            "project": self.memory.project,
            "prefix": prefix,
            "spec": op.filter,
            "now": now,
        }
        if query_vector is None:
            return docs.search_documents(
                conn, words=words, limit=op.limit, offset=op.offset, **common
            )
        # Exact cosine scoring over a bounded candidate set: the newest documents
        # that pass the namespace and filter, and the best word matches.
        cap = max(DEFAULT_VECTOR_CANDIDATES, op.limit + op.offset)
        candidates = {
            document.id: document
            for document in docs.search_documents(
                conn, words=[], limit=cap, offset=0, with_vectors=True, **common
            )
        }
        if words:
            for document in docs.search_documents(
                conn, words=words, limit=cap, offset=0, with_vectors=True, **common
            ):
                candidates.setdefault(document.id, document)
        query = np.asarray(query_vector, dtype=np.float32)
        query_norm = float(np.linalg.norm(query)) or 1.0
        scored: list[tuple[float, docs.StoredDocument]] = []
        unscored: list[docs.StoredDocument] = []
        for document in candidates.values():
            if not document.vectors:
                unscored.append(document)
                continue
            matrix = np.frombuffer(document.vectors, dtype=np.float32).reshape(-1, len(query))
            norms = np.linalg.norm(matrix, axis=1)
            norms[norms == 0] = 1.0
            best = float(np.max(matrix @ query / (norms * query_norm)))
            scored.append((best, document))
        scored.sort(key=lambda pair: (-pair[0], -pair[1].id))
        ranked = [_with_score(document, score) for score, document in scored] + unscored
        return ranked[op.offset : op.offset + op.limit]

    def _list_namespaces(
        self, conn: Connection, op: ListNamespacesOp, now: Any
    ) -> list[tuple[str, ...]]:
        prefix: list[str] = []
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                for label in condition.path:
                    if label == "*":
                        break
                    prefix.append(label)
                break
        texts = docs.list_namespace_texts(
            conn, project=self.memory.project, prefix=".".join(prefix) or None, now=now
        )
        namespaces = [_namespace_tuple(text) for text in texts]
        conditions = op.match_conditions or ()
        kept = [ns for ns in namespaces if all(_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            kept = list({ns[: op.max_depth] for ns in kept})
        return sorted(kept)[op.offset : op.offset + op.limit]

    # ------------------------------------------------------------------ TTL and tiers

    def _expiry_clock(self, now: datetime) -> Any:
        """What times to live are measured by: PostgreSQL's ``now()`` when the memory
        has no injected clock (so hosts whose clocks differ agree on what expired),
        else ``now``, the memory's clock (SQLite has no server clock)."""
        database = self.memory.database
        return database.server_now() if database.server_time else now

    def _op_sweep(self) -> _Operation[int]:
        now, project = self._expiry_clock(self.memory.now()), self.memory.project

        def sweep(conn: Connection) -> tuple[int, ...]:
            _failpoints.hit("ttl_sweep.before_delete")
            return docs.prune_document_batch(conn, project=project, now=now, want=None)

        return len(self.memory.database.run(sweep))
        yield  # pragma: no cover - makes this a generator

    def sweep_ttl(self) -> int:
        """Delete this project's items whose time to live has passed; how many."""
        return self._drive(self._op_sweep())

    async def asweep_ttl(self) -> int:
        """Async :meth:`sweep_ttl`."""
        return await self._adrive(self._op_sweep())

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Run :meth:`sweep_ttl` every ``sweep_interval_minutes`` (default: the
        TTLConfig's) on a daemon thread until :meth:`stop_ttl_sweeper`. A sweep that
        fails is logged and tried again after 1 s, 2 s, 4 s... (at most the
        interval) until one succeeds: the thread never ends on an error.

        Returns:
            A future that completes when the sweeper stops (at once when there is
            no interval).
        """
        interval = _check_minutes("sweep_interval_minutes", sweep_interval_minutes, _MAX_WAIT)
        if interval is None and self.ttl_config:
            interval = self.ttl_config.get("sweep_interval_minutes")
        if self._sweeper is not None and not self._sweeper.future.done():
            return self._sweeper.future
        if not interval:
            done: concurrent.futures.Future[None] = concurrent.futures.Future()
            done.set_result(None)
            return done
        self._sweeper = Sweeper(self.sweep_ttl, float(interval) * 60)
        self._sweeper.start()
        return self._sweeper.future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; False when it did not stop within ``timeout`` seconds."""
        if self._sweeper is None:
            return True
        stopped = self._sweeper.stop(timeout)
        if stopped:
            self._sweeper = None
        return stopped

    def _op_state(self, namespace: tuple[str, ...], key: str) -> _Operation[ItemState | None]:
        validate_op_namespace(GetOp(tuple(namespace), key))
        _check_labels(GetOp(tuple(namespace), key))
        address = (_namespace_text(tuple(namespace)), key)
        project, now = self.memory.project, self.memory.now()
        live_at = self._expiry_clock(now)

        def read(conn: Connection) -> docs.StoredDocument | None:
            found = docs.get_documents(conn, project=project, wanted=[address], now=live_at)
            return found.get(address)

        document = self.memory.database.run(read, write=False)
        if document is None:
            return None
        tier = calculate_tier(document.last_accessed, now, self.memory.config.tier_policy)
        if tier is MemoryTier.EXPIRED:  # only a time to live expires a document
            tier = MemoryTier.ARCHIVED
        return ItemState(
            tier=tier,
            access_count=document.access_count,
            last_accessed=document.last_accessed,
            expires_at=document.expires_at,
            ttl_minutes=document.ttl_minutes,
        )
        yield  # pragma: no cover - makes this a generator

    def item_state(self, namespace: tuple[str, ...], key: str) -> ItemState | None:
        """tiermem's access state of the live item at ``namespace``/``key`` (``None``
        when there is none or its time to live has passed). Not an access.

        Raises:
            InvalidNamespaceError: for a bad namespace.
        """
        return self._drive(self._op_state(namespace, key))

    async def aitem_state(self, namespace: tuple[str, ...], key: str) -> ItemState | None:
        """Async :meth:`item_state`."""
        return await self._adrive(self._op_state(namespace, key))


def _step(op: _Operation[Any], value: Any) -> tuple[bool, Any]:
    """Advance ``op`` once: ``(True, result)`` when it returned, else ``(False, request)``."""
    try:
        return False, op.send(value)
    except StopIteration as stop:
        return True, stop.value


def _replace_vectors(document: docs.NewDocument, blob: bytes) -> docs.NewDocument:
    return docs.NewDocument(
        namespace=document.namespace,
        key=document.key,
        value=document.value,
        indexed_text=document.indexed_text,
        vectors=blob,
        ttl_minutes=document.ttl_minutes,
    )


def _with_score(document: docs.StoredDocument, score: float) -> docs.StoredDocument:
    return replace(document, score=score)


def _item(document: docs.StoredDocument) -> Item:
    return Item(
        value=document.value,
        key=document.key,
        namespace=_namespace_tuple(document.namespace),
        created_at=document.created_at,
        updated_at=document.updated_at,
    )


def _search_item(document: docs.StoredDocument) -> SearchItem:
    return SearchItem(
        namespace=_namespace_tuple(document.namespace),
        key=document.key,
        value=document.value,
        created_at=document.created_at,
        updated_at=document.updated_at,
        score=document.score,
    )
