"""Embedding entries and layer items: in the background after each write, and as
a backfill.

An append commits first; then its entries are queued for the memory's embedding
worker (one thread), which embeds whatever is waiting in batches, outside any
write transaction, and stores the vectors in a transaction of their own. So an
append never waits for the model, and a model that fails or hangs costs only
the vectors: the entries are stored and found by words, and
:func:`embed_missing` (``tiermem embed``) embeds them later. Entries appended
before the memory had embeddings, by another process, or by a process killed
before its worker ran, are embedded the same way.

Stored layer items (episodic, semantic, procedural) go the same way
(:func:`queue_items` after the write that stored or changed them). An item's
embedded text is its key or condition and its content (``key: content``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from .._core.context import MemoryContext
from .._core.embedder import Embedder
from .._core.messages import load_text
from .._core.runner import Embed, Op, run
from .._storage import item_vectors, vectors
from ..errors import EmbeddingFailed, EmbeddingTimeout, InvalidArgument

__all__ = [
    "BATCH",
    "MAX_EMBEDDED_CHARS",
    "embed_missing",
    "item_text",
    "query_vector",
    "queue_entries",
    "queue_items",
]

logger = logging.getLogger(__name__)

#: Texts per call of the model.
BATCH = 64
#: Characters of an entry that are embedded (models read a few hundred tokens).
MAX_EMBEDDED_CHARS = 4000


def _embedder(ctx: MemoryContext) -> Embedder:
    if ctx.embedder is None:
        raise InvalidArgument("this memory has no embeddings: pass embeddings= to it")
    return ctx.embedder


def _vectors(
    ctx: MemoryContext, embedder: Embedder, texts: list[str], *, query: bool = False
) -> Op[list[bytes]]:
    """The stored forms of the model's vectors of ``texts`` (see
    :func:`tiermem._core.dense.encode_all`), asked for within ``embedding_timeout``."""
    from .._core import dense

    try:
        found = yield Embed(embedder, texts, query, ctx.config.embedding_timeout)
    except EmbeddingFailed:  # timed out
        raise
    except Exception as exc:  # any model error: one typed error, nothing stored
        raise EmbeddingFailed(f"the embedding model raised {exc!r:.200}") from exc
    try:
        blobs = dense.encode_all(found, len(texts))
    except ValueError as exc:
        raise EmbeddingFailed(f"the embedding model returned {exc}") from exc
    embedder.check_size(len(blobs[0]))
    return blobs


def _documents(ctx: MemoryContext, embedder: Embedder, texts: list[str]) -> Op[list[bytes]]:
    """The stored forms of the vectors of ``texts``, embedded as documents."""
    texts = [text[:MAX_EMBEDDED_CHARS] for text in texts]
    # A blank text (a tool call's empty entry) gets the zero vector: it is stored,
    # so no backfill asks for it again, and it is similar to nothing.
    wanted = [i for i, text in enumerate(texts) if text.strip()]
    found = yield from _vectors(ctx, embedder, [texts[i] for i in wanted] or ["."])
    blobs = [bytes(len(found[0]))] * len(texts)
    for i, blob in zip(wanted, found, strict=False):
        blobs[i] = blob
    return blobs


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
    blobs = yield from _documents(ctx, embedder, [content for _, _, content in rows])
    stored_rows = [(row[0], row[1], blob) for row, blob in zip(rows, blobs, strict=True)]
    stored = yield from ctx.transact(
        lambda conn: vectors.store_vectors(conn, embedder.model, stored_rows)
    )
    return len(rows), stored


def item_text(key: str | None, content: str) -> str:
    """The text embedded for a layer item of this stored key (or condition) and
    content."""
    text = load_text(content)
    return text if key is None else f"{load_text(key)}: {text}"


def _embed_items(ctx: MemoryContext, ids: Sequence[int] | None, limit: int) -> Op[tuple[int, int]]:
    """Embed up to ``limit`` layer items without a vector of the model (of ``ids``,
    or the oldest); returns (items read, vectors stored)."""
    embedder = _embedder(ctx)
    rows = yield from ctx.transact(
        lambda conn: item_vectors.to_embed_items(
            conn, ctx.project, embedder.model, ids=ids, limit=limit
        ),
        write=False,
    )
    if not rows:
        return 0, 0
    texts = [item_text(row.key, row.content) for row in rows]
    blobs = yield from _documents(ctx, embedder, texts)
    pairs = list(zip(rows, blobs, strict=True))
    stored = yield from ctx.transact(
        lambda conn: item_vectors.store_item_vectors(conn, embedder.model, pairs)
    )
    return len(rows), stored


def _queue(ctx: MemoryContext, ids: Sequence[int], kind: str) -> None:
    """Have the background worker embed these rows (entries or items) after the
    write that stored them committed."""
    embedder = ctx.embedder
    if embedder is None or not ids:
        return
    embedder.add(list(ids), kind)
    embed = _embed if kind == "entry" else _embed_items

    def work() -> None:
        while batch := embedder.take(BATCH, kind):
            try:
                run(embed(ctx, batch, len(batch)))
            except EmbeddingTimeout as exc:
                # The model does not answer: leave the rest too (found by words; a
                # backfill embeds them), so that close() does not wait a timeout a batch.
                rest = len(embedder.take(1 << 62, kind))
                logger.warning("embedding %d rows (%s) gave up: %s", len(batch) + rest, kind, exc)
                return
            except Exception:  # the rows stay findable by words; a backfill embeds them
                logger.exception("embedding %d rows (%s) failed", len(batch), kind)

    embedder.queue.submit(f"embed {kind}", work)


def queue_entries(ctx: MemoryContext, ids: Sequence[int]) -> None:
    """After an append committed: have the background worker embed these entries."""
    _queue(ctx, ids, "entry")


def queue_items(ctx: MemoryContext, ids: Sequence[int]) -> None:
    """After a layer write committed: have the background worker embed these items
    (those that have a vector of the model already are skipped)."""
    _queue(ctx, ids, "item")


def embed_missing(
    ctx: MemoryContext, batch: int = 256, progress: Callable[[int], None] | None = None
) -> Op[int]:
    """Embed every entry and every stored layer item of the project without a vector
    of the memory's model (new ones, or all after a model change); returns how many
    vectors were stored. ``progress`` is called with that count after each batch.

    Raises:
        EmbeddingFailed: the model failed; the batches before were stored.
    """
    total = 0
    for embed in (_embed, _embed_items):
        while True:
            read, stored = yield from embed(ctx, None, batch)
            total += stored
            if progress is not None and stored:
                progress(total)
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
        (vector,) = yield from _vectors(ctx, embedder, [query[:MAX_EMBEDDED_CHARS]], query=True)
    except EmbeddingFailed:
        logger.warning("embedding a query failed; searching by words only", exc_info=True)
        return None
    return vector
