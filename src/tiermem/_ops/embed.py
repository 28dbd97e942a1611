"""Embedding entries: in the background after each append, and as a backfill.

An append commits first; then its entries are queued for the memory's embedding
worker (one thread), which embeds whatever is waiting in batches, outside any
write transaction, and stores the vectors in a transaction of their own. So an
append never waits for the model, and a model that fails or hangs costs only
the vectors: the entries are stored and found by words, and
:func:`embed_missing` (``tiermem embed``) embeds them later. Entries appended
before the memory had embeddings, by another process, or by a process killed
before its worker ran, are embedded the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .._core.context import MemoryContext
from .._core.embedder import Embedder
from .._core.runner import Embed, Op, run
from .._storage import vectors
from ..errors import EmbeddingFailed, InvalidArgument

__all__ = ["BATCH", "MAX_EMBEDDED_CHARS", "embed_missing", "query_vector", "queue_entries"]

logger = logging.getLogger(__name__)

#: Texts per call of the model.
BATCH = 64
#: Characters of an entry that are embedded (models read a few hundred tokens).
MAX_EMBEDDED_CHARS = 4000


def _embedder(ctx: MemoryContext) -> Embedder:
    if ctx.embedder is None:
        raise InvalidArgument("this memory has no embeddings: pass embeddings= to it")
    return ctx.embedder


def _vectors(embedder: Embedder, texts: list[str], *, query: bool = False) -> Op[list[bytes]]:
    """The stored forms of the model's vectors of ``texts`` (see
    :func:`tiermem._core.dense.encode_all`)."""
    from .._core import dense

    try:
        found = yield Embed(embedder.embeddings, texts, query)
    except Exception as exc:  # any model error: one typed error, nothing stored
        raise EmbeddingFailed(f"the embedding model raised {exc!r:.200}") from exc
    try:
        return dense.encode_all(found, len(texts))
    except ValueError as exc:
        raise EmbeddingFailed(f"the embedding model returned {exc}") from exc


def _embed(ctx: MemoryContext, ids: Sequence[int] | None, limit: int) -> Op[tuple[int, int]]:
    """Embed up to ``limit`` entries without a vector of the model (of ``ids``, or
    the oldest); returns (entries read, vectors stored)."""
    embedder = _embedder(ctx)
    rows = yield from ctx.transact(
        lambda conn: vectors.to_embed(conn, ctx.project, embedder.model, ids=ids, limit=limit),
        write=False,
    )
    if not rows:
        return 0, 0
    texts = [content[:MAX_EMBEDDED_CHARS] for _, _, content in rows]
    # A blank entry (a tool call's empty text) gets the zero vector: it is stored,
    # so no backfill asks for it again, and it is similar to nothing.
    wanted = [i for i, text in enumerate(texts) if text.strip()]
    found = yield from _vectors(embedder, [texts[i] for i in wanted] or ["."])
    blobs = [bytes(len(found[0]))] * len(rows)
    for i, blob in zip(wanted, found, strict=False):
        blobs[i] = blob
    stored_rows = [(row[0], row[1], blob) for row, blob in zip(rows, blobs, strict=True)]
    stored = yield from ctx.transact(
        lambda conn: vectors.store_vectors(conn, embedder.model, stored_rows)
    )
    return len(rows), stored


def queue_entries(ctx: MemoryContext, ids: Sequence[int]) -> None:
    """After an append committed: have the background worker embed these entries."""
    embedder = ctx.embedder
    if embedder is None or not ids:
        return
    embedder.add(list(ids))

    def work() -> None:
        while batch := embedder.take(BATCH):
            try:
                run(_embed(ctx, batch, len(batch)))
            except Exception:  # the entries stay findable by words; a backfill embeds them
                logger.exception("embedding %d entries failed", len(batch))

    embedder.queue.submit("embed", work)


def embed_missing(ctx: MemoryContext, batch: int = 256) -> Op[int]:
    """Embed every entry of the project without a vector of the memory's model (new
    ones, or all after a model change); returns how many vectors were stored.

    Raises:
        EmbeddingFailed: the model failed; the batches before were stored.
    """
    total = 0
    while True:
        read, stored = yield from _embed(ctx, None, batch)
        total += stored
        if read < batch:
            break
    return total


def query_vector(ctx: MemoryContext, query: str) -> Op[bytes | None]:
    """The stored form of the query's vector, or ``None`` when the memory has no
    embeddings, the query is blank, or the model failed (logged: the search then
    ranks by words alone)."""
    embedder = ctx.embedder
    if embedder is None or not query.strip():
        return None
    try:
        (vector,) = yield from _vectors(embedder, [query[:MAX_EMBEDDED_CHARS]], query=True)
    except EmbeddingFailed:
        logger.warning("embedding a query failed; searching by words only", exc_info=True)
        return None
    return vector
