"""Document-store operations: a batch of gets, puts, searches and namespace
listings in one transaction, the time-to-live sweep and a document's access state.

A batch asks for the embeddings it needs first (its documents', then its queries'),
then does all of its database work in one transaction: reads see the store as it
was before the batch's writes, of several writes to one document the last wins,
and the events of what it wrote commit with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from .._core.context import MemoryContext
from .._core.embedder import Embedder
from .._core.runner import Embed, Op
from .._storage import documents as docs
from .._storage import failpoints as _failpoints
from .._storage import fts
from .._storage.database import Connection, commit_without_waiting
from ..document_types import (
    DEFAULT_VECTOR_CANDIDATES,
    Document,
    DocumentOp,
    DocumentResult,
    DocumentState,
    GetDocument,
    ListNamespaces,
    PutDocument,
    SearchDocuments,
)
from ..errors import InvalidArgument
from ..events import DocumentDeleted, DocumentPut, Event
from ..tiers import MemoryTier, calculate_tier
from . import feed

__all__ = ["TextsAt", "batch", "leaf_text", "state", "sweep"]

#: The operations a batch runs.
_KINDS = (GetDocument, SearchDocuments, PutDocument, ListNamespaces)

#: Reads the texts at a field path of a value (``"$"``: the whole value).
TextsAt = Callable[[Mapping[str, Any], str], list[str]]


def leaf_text(value: Any) -> list[str]:
    """Every string and number in a JSON value, in document order."""
    if isinstance(value, Mapping):
        return [text for inner in value.values() for text in leaf_text(inner)]
    if isinstance(value, list | tuple):
        return [text for inner in value for text in leaf_text(inner)]
    if isinstance(value, bool) or value is None:
        return []
    return [str(value)]


def _namespace_text(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def _namespace_tuple(text: str) -> tuple[str, ...]:
    return tuple(text.split("."))


def _document(stored: docs.StoredDocument) -> Document:
    return Document(
        namespace=_namespace_tuple(stored.namespace),
        key=stored.key,
        value=stored.value,
        created_at=stored.created_at,
        updated_at=stored.updated_at,
        score=stored.score,
    )


def _expiry_clock(ctx: MemoryContext, now: datetime) -> Any:
    """What times to live are measured by: PostgreSQL's ``now()`` when the memory
    has no injected clock (so hosts whose clocks differ agree on what expired),
    else ``now``, the memory's clock (SQLite has no server clock)."""
    return ctx.database.server_now() if ctx.database.server_time else now


def _new_document(op: PutDocument, texts_at: TextsAt) -> docs.NewDocument:
    assert op.value is not None
    value = dict(op.value)
    text: str | None = None
    if op.fields is not None:
        pieces: list[str] = []
        for path in op.fields:
            pieces.extend(leaf_text(value) if path == "$" else texts_at(value, path))
        text = "\n".join(pieces)
    return docs.NewDocument(
        namespace=_namespace_text(op.namespace),
        key=op.key,
        value=value,
        indexed_text=text,
        vectors=None,
        ttl_minutes=op.ttl,
    )


def _embed_documents(
    ctx: MemoryContext,
    embedder: Embedder,
    dims: int,
    texts_at: TextsAt,
    puts: Sequence[PutDocument],
    new_docs: list[docs.NewDocument],
) -> Op[None]:
    """Fill the ``vectors`` of ``new_docs`` (in place) with one embedding call."""
    wanted: list[tuple[int, str]] = []
    for position, (op, document) in enumerate(zip(puts, new_docs, strict=True)):
        for path in op.fields or ():
            for text in texts_at(document.value, path):
                wanted.append((position, text))
    if not wanted:
        return
    timeout = ctx.config.embedding_timeout
    vectors = yield Embed(embedder, [text for _, text in wanted], timeout=timeout)
    if len(vectors) != len(wanted):
        raise InvalidArgument(
            f"the embedder returned {len(vectors)} vectors for {len(wanted)} texts"
        )
    import numpy as np  # the embeddings extra: only where vectors are used

    packed: dict[int, list[list[float]]] = {}
    for (position, _), vector in zip(wanted, vectors, strict=True):
        if len(vector) != dims:
            raise InvalidArgument(f"an embedding has {len(vector)} dimensions, not {dims}")
        packed.setdefault(position, []).append(vector)
    for position, found in packed.items():
        blob = np.asarray(found, dtype=np.float32).tobytes()
        new_docs[position] = replace(new_docs[position], vectors=blob)


def _search(
    conn: Connection,
    project: str,
    op: SearchDocuments,
    query_vector: list[float] | None,
    now: Any,
) -> list[docs.StoredDocument]:
    prefix = _namespace_text(op.namespace_prefix) or None
    words = fts.query_words(op.query) if op.query else []
    common: dict[str, Any] = {"project": project, "prefix": prefix, "spec": op.filter, "now": now}
    if query_vector is None:
        return docs.search_documents(conn, words=words, limit=op.limit, offset=op.offset, **common)
    # Exact cosine scoring over a bounded candidate set: the newest documents
    # that pass the namespace and filter, and the best word matches.
    import numpy as np

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
    ranked = [replace(document, score=score) for score, document in scored] + unscored
    return ranked[op.offset : op.offset + op.limit]


def _list_namespaces(
    conn: Connection, project: str, op: ListNamespaces, now: Any
) -> list[tuple[str, ...]]:
    prefix: list[str] = []
    for condition in op.match:
        if condition.match_type == "prefix":
            for label in condition.path:
                if label == "*":
                    break
                prefix.append(label)
            break
    texts = docs.list_namespace_texts(
        conn, project=project, prefix=".".join(prefix) or None, now=now
    )
    namespaces = [_namespace_tuple(text) for text in texts]
    kept = [ns for ns in namespaces if all(c.matches(ns) for c in op.match)]
    if op.max_depth is not None:
        kept = list({ns[: op.max_depth] for ns in kept})
    return sorted(kept)[op.offset : op.offset + op.limit]


def batch(
    ctx: MemoryContext,
    ops: Sequence[DocumentOp],
    *,
    texts_at: TextsAt,
    embedder: Embedder | None = None,
    dims: int | None = None,
) -> Op[list[DocumentResult]]:
    """Run ``ops`` in one transaction; their results in the order of ``ops``."""
    for op in ops:
        if not isinstance(op, _KINDS):
            raise InvalidArgument(f"unknown operation {type(op).__name__}")
        if isinstance(op, SearchDocuments):
            docs.filter_clause(ctx.database.dialect, op.filter)  # checks it
    puts: dict[tuple[tuple[str, ...], str], PutDocument] = {}
    for op in ops:
        if isinstance(op, PutDocument):
            puts[(op.namespace, op.key)] = op
    stored = [op for op in puts.values() if op.value is not None]
    new_docs = [_new_document(op, texts_at) for op in stored]
    query_vectors: dict[str, list[float]] = {}
    if embedder is not None:
        assert dims is not None  # the facade sets both
        yield from _embed_documents(ctx, embedder, dims, texts_at, stored, new_docs)
        queries = list(
            dict.fromkeys(op.query for op in ops if isinstance(op, SearchDocuments) and op.query)
        )
        for query in queries:
            vector = yield Embed(embedder, [query], True, ctx.config.embedding_timeout)
            query_vectors[query] = vector[0]
    now = ctx.now()
    live_at = _expiry_clock(ctx, now)
    project = ctx.project
    deletes = [(_namespace_text(ns), key) for (ns, key), op in puts.items() if op.value is None]
    reading = any(isinstance(op, GetDocument | SearchDocuments) for op in ops)

    def work(conn: Connection) -> list[DocumentResult]:
        results: list[DocumentResult] = []
        touched: dict[bool, list[docs.StoredDocument]] = {True: [], False: []}
        for op in ops:
            if isinstance(op, GetDocument):
                address = (_namespace_text(op.namespace), op.key)
                found = docs.get_documents(conn, project=project, wanted=[address], now=live_at)
                document = found.get(address)
                if document is not None:
                    touched[bool(op.refresh_ttl)].append(document)
                results.append(None if document is None else _document(document))
            elif isinstance(op, SearchDocuments):
                hits = _search(conn, project, op, query_vectors.get(op.query or ""), live_at)
                touched[bool(op.refresh_ttl)].extend(hits)
                results.append([_document(document) for document in hits])
            elif isinstance(op, ListNamespaces):
                results.append(_list_namespaces(conn, project, op, live_at))
            else:
                results.append(None)
        expires_from = now
        ttls = [d.ttl_minutes for d in touched[True]] + [d.ttl_minutes for d in new_docs]
        if ctx.database.server_time and any(ttl is not None for ttl in ttls):
            # A time to live runs from the server's now(), read once.
            expires_from = docs.transaction_time(conn)
        docs.lock_documents(
            conn,
            project=project,
            ids=[document.id for documents in touched.values() for document in documents],
            addresses=deletes + [(document.namespace, document.key) for document in new_docs],
        )
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
        feed.record(ctx, conn, changes)
        return results

    result: list[DocumentResult] = yield from ctx.transact(work, write=bool(puts) or reading)
    return result


def sweep(ctx: MemoryContext) -> Op[int]:
    """Delete the project's documents whose time to live has passed; how many."""
    now, project = _expiry_clock(ctx, ctx.now()), ctx.project

    def work(conn: Connection) -> tuple[int, ...]:
        _failpoints.hit("ttl_sweep.before_delete")
        return docs.prune_document_batch(conn, project=project, now=now, want=None)

    return len((yield from ctx.transact(work)))


def state(ctx: MemoryContext, namespace: tuple[str, ...], key: str) -> Op[DocumentState | None]:
    """The access state of the live document at ``namespace``/``key``; not an access."""
    GetDocument(namespace, key)  # checks the labels
    address = (_namespace_text(namespace), key)
    project, now = ctx.project, ctx.now()
    live_at = _expiry_clock(ctx, now)

    def read(conn: Connection) -> docs.StoredDocument | None:
        found = docs.get_documents(conn, project=project, wanted=[address], now=live_at)
        return found.get(address)

    document = yield from ctx.transact(read, write=False)
    if document is None:
        return None
    tier = calculate_tier(document.last_accessed, now, ctx.config.tier_policy)
    if tier is MemoryTier.EXPIRED:  # only a time to live expires a document
        tier = MemoryTier.ARCHIVED
    return DocumentState(
        tier=tier,
        access_count=document.access_count,
        last_accessed=document.last_accessed,
        expires_at=document.expires_at,
        ttl_minutes=document.ttl_minutes,
    )
