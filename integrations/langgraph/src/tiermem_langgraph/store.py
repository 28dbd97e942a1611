"""``TieredStore``: a LangGraph ``BaseStore`` kept in tiermem's database.

An adapter: each ``batch``/``abatch`` call becomes one batch of tiermem's document
store (``memory.documents``, :mod:`tiermem.documents`), run in one transaction with
tiermem's typed errors; LangGraph's operations, field paths and settings are
translated here, and everything else is tiermem's.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, cast

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
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
from tiermem import ConversationMemory
from tiermem.document_types import (
    DEFAULT_VECTOR_CANDIDATES,
    Document,
    DocumentOp,
    DocumentResult,
    DocumentState,
    GetDocument,
    ListNamespaces,
    NamespaceMatch,
    PutDocument,
    SearchDocuments,
    TimeToLive,
)
from tiermem.documents import DocumentStore
from tiermem.errors import InvalidArgument

from ._sweeper import Sweeper

__all__ = ["DEFAULT_VECTOR_CANDIDATES", "ItemState", "TieredStore"]

#: tiermem's access state of a stored item (:meth:`TieredStore.item_state`): its
#: tier, access count, last access, expiry and time to live.
ItemState = DocumentState


#: The LangGraph operations a batch runs.
_KINDS = (GetOp, SearchOp, PutOp, ListNamespacesOp)


@lru_cache(maxsize=1024)
def _path_tokens(path: str) -> list[str] | str:
    return path if path == "$" else tokenize_path(path)


def _texts_at(value: Mapping[str, Any], path: str) -> list[str]:
    """The texts at a LangGraph field path (``"$"``, ``a.b``, ``a[*].b``, ...)."""
    return get_text_at_path(value, _path_tokens(path))


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
        self.documents: DocumentStore = memory.documents.indexed(texts_at=_texts_at)
        fields: list[str] = ["$"]
        if self.index_config is not None:
            fields = list(self.index_config.get("fields") or ["$"])
            embed = self.index_config.get("embed")
            if embed is not None:
                dims = self.index_config.get("dims")
                if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
                    raise InvalidArgument("index with embed needs dims, an int >= 1")
                self.documents = memory.documents.indexed(
                    texts_at=_texts_at, embeddings=ensure_embeddings(embed), dims=dims
                )
        self.embeddings: Embeddings | None = self.documents.embeddings
        self.dims: int | None = self.documents.dims
        self._fields = tuple(fields)
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
        TimeToLive(
            default_minutes=ttl.get("default_ttl"),
            sweep_interval_minutes=ttl.get("sweep_interval_minutes"),
        )
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
        self.documents.setup()

    async def asetup(self) -> None:
        """Async :meth:`setup`."""
        await self.documents.asetup()

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
        wanted = [self._document_op(op) for op in ops]
        results = self.documents.batch(wanted)
        return [_result(op, result) for op, result in zip(wanted, results, strict=True)]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`."""
        wanted = [self._document_op(op) for op in ops]
        results = await self.documents.abatch(wanted)
        return [_result(op, result) for op, result in zip(wanted, results, strict=True)]

    def _document_op(self, op: Op) -> DocumentOp:
        """The document-store operation of a LangGraph one, checked."""
        if not isinstance(op, _KINDS):
            raise InvalidArgument(f"unknown operation {type(op).__name__}")
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            return GetDocument(tuple(op.namespace), op.key, bool(op.refresh_ttl))
        if isinstance(op, SearchOp):
            return SearchDocuments(
                tuple(op.namespace_prefix),
                op.query,
                op.filter,
                op.limit,
                op.offset,
                bool(op.refresh_ttl),
            )
        if isinstance(op, ListNamespacesOp):
            return ListNamespaces(
                tuple(
                    NamespaceMatch(c.match_type, tuple(c.path)) for c in op.match_conditions or ()
                ),
                op.max_depth,
                op.limit,
                op.offset,
            )
        if op.value is not None:
            # An empty namespace has no text form that reads back. The reserved
            # "langgraph" root is refused by put/aput only: LangGraph writes there
            # with raw batches.
            if not op.namespace:
                raise InvalidNamespaceError("Namespace cannot be empty.")
            if op.index is not None and op.index is not False:
                if not isinstance(op.index, list) or not all(isinstance(p, str) for p in op.index):
                    raise InvalidArgument("index must be False, None or a list of field paths")
        fields = None if op.index is False else self._fields if op.index is None else op.index
        return PutDocument(
            tuple(op.namespace),
            op.key,
            op.value,
            None if fields is None else tuple(fields),
            op.ttl,
        )

    # ------------------------------------------------------------------ TTL and tiers

    def sweep_ttl(self) -> int:
        """Delete this project's items whose time to live has passed; how many."""
        return self.documents.sweep_expired()

    async def asweep_ttl(self) -> int:
        """Async :meth:`sweep_ttl`."""
        return await self.documents.asweep_expired()

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
        interval = TimeToLive(sweep_interval_minutes=sweep_interval_minutes).sweep_interval_minutes
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

    def item_state(self, namespace: tuple[str, ...], key: str) -> ItemState | None:
        """tiermem's access state of the live item at ``namespace``/``key`` (``None``
        when there is none or its time to live has passed). Not an access.

        Raises:
            InvalidNamespaceError: for a bad namespace.
        """
        validate_op_namespace(GetOp(tuple(namespace), key))
        return self.documents.state(tuple(namespace), key)

    async def aitem_state(self, namespace: tuple[str, ...], key: str) -> ItemState | None:
        """Async :meth:`item_state`."""
        validate_op_namespace(GetOp(tuple(namespace), key))
        return await self.documents.astate(tuple(namespace), key)


def _result(op: DocumentOp, result: DocumentResult) -> Result:
    """LangGraph's form of the result of ``op``."""
    if isinstance(result, Document):
        return _item(result)
    if isinstance(op, SearchDocuments):
        return [_search_item(hit) for hit in cast("list[Document]", result)]
    return cast("list[tuple[str, ...]] | None", result)


def _item(document: Document) -> Item:
    return Item(
        value=document.value,
        key=document.key,
        namespace=document.namespace,
        created_at=document.created_at,
        updated_at=document.updated_at,
    )


def _search_item(document: Document) -> SearchItem:
    return SearchItem(
        namespace=document.namespace,
        key=document.key,
        value=document.value,
        created_at=document.created_at,
        updated_at=document.updated_at,
        score=document.score,
    )
