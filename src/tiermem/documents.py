"""JSON documents by namespace and key in a memory's project: ``mem.documents``.

A :class:`DocumentStore` runs batches of :mod:`tiermem.document_types` operations
(get, put, search, list namespaces), each batch in one transaction with tiermem's
typed errors, full-text search over each document's indexed fields (and cosine
similarity over their embeddings, when the store has an embedding model), filters
run in SQL, times to live and the access tiers that ``get_tier_stats``,
``recalculate_tiers`` and ``prune_expired`` count, refresh and delete. Every put and
delete writes a ``document:put`` or ``document:deleted`` event to the change feed
in its transaction. Integrations (the LangGraph store) adapt it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ._core.context import MemoryContext
from ._core.embedder import Embedder
from ._core.runner import Op, arun, run
from ._ops import documents as operations
from .document_types import DocumentOp, DocumentResult, DocumentState
from .errors import InvalidArgument

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

__all__ = ["DocumentStore", "TextsAt", "plain_texts_at"]

TextsAt = operations.TextsAt


def plain_texts_at(value: Mapping[str, Any], path: str) -> list[str]:
    """The texts at ``path``, field names joined with ``.`` (``"$"``: the whole
    value as JSON): the string or number there, or every string and number under
    the object or list there."""
    if path == "$":
        return [json.dumps(value)]
    found: Any = value
    for name in path.split("."):
        if not isinstance(found, Mapping) or name not in found:
            return []
        found = found[name]
    return operations.leaf_text(found)


class DocumentStore:
    """The documents of one memory's project (``memory.documents``).

    Args:
        context: the memory's operation context.
        texts_at: reads the texts at a field path of a value, for full-text search
            and embeddings (default :func:`plain_texts_at`).
        embeddings: a LangChain embedding model whose vectors search scores by.
        dims: the vectors' dimensions (required with ``embeddings``).

    Raises:
        InvalidArgument: for ``embeddings`` without valid ``dims``.
    """

    def __init__(
        self,
        context: MemoryContext,
        *,
        texts_at: TextsAt = plain_texts_at,
        embeddings: Embeddings | None = None,
        dims: int | None = None,
    ) -> None:
        if embeddings is not None and (
            isinstance(dims, bool) or not isinstance(dims, int) or dims < 1
        ):
            raise InvalidArgument("index with embed needs dims, an int >= 1")
        self._context = context
        self._texts_at = texts_at
        self._embeddings = embeddings
        # One embedder per store: the calls are bounded by ``embedding_timeout``.
        self._embedder = None if embeddings is None else Embedder(embeddings)
        self._dims = dims if embeddings is not None else None

    def indexed(
        self,
        *,
        texts_at: TextsAt = plain_texts_at,
        embeddings: Embeddings | None = None,
        dims: int | None = None,
    ) -> DocumentStore:
        """The same documents, indexed with this path reader and embedding model."""
        return DocumentStore(self._context, texts_at=texts_at, embeddings=embeddings, dims=dims)

    @property
    def embeddings(self) -> Embeddings | None:
        """The embedding model, if any."""
        return self._embeddings

    @property
    def dims(self) -> int | None:
        """The embeddings' dimensions, if any."""
        return self._dims

    def setup(self) -> None:
        """Create tiermem's tables if they are missing (idempotent; the first batch
        creates them too).

        Raises:
            StorageError: (a subclass) when the database cannot be reached or written.
        """
        self._context.database.ensure_schema()

    async def asetup(self) -> None:
        """Async :meth:`setup`, on a worker thread."""
        await asyncio.to_thread(self._context.database.ensure_schema)

    def batch(self, ops: Iterable[DocumentOp]) -> list[DocumentResult]:
        """Run the operations in one transaction; results in their order.

        Reads see the documents as they were before the batch's writes; of several
        writes to one document the last wins.

        Raises:
            InvalidArgument: for a bad argument (nothing runs).
            StorageError: (a subclass) when the database fails; nothing was written.
        """
        return run(self._batch(ops))

    async def abatch(self, ops: Iterable[DocumentOp]) -> list[DocumentResult]:
        """Async :meth:`batch`."""
        return await arun(self._batch(ops))

    def _batch(self, ops: Iterable[DocumentOp]) -> Op[list[DocumentResult]]:
        return operations.batch(
            self._context,
            list(ops),
            texts_at=self._texts_at,
            embedder=self._embedder,
            dims=self._dims,
        )

    def sweep_expired(self) -> int:
        """Delete the project's documents whose time to live has passed; how many."""
        return run(operations.sweep(self._context))

    async def asweep_expired(self) -> int:
        """Async :meth:`sweep_expired`."""
        return await arun(operations.sweep(self._context))

    def state(self, namespace: tuple[str, ...], key: str) -> DocumentState | None:
        """The access state of the live document at ``namespace``/``key`` (``None``
        when there is none or its time to live has passed). Not an access."""
        return run(operations.state(self._context, tuple(namespace), key))

    async def astate(self, namespace: tuple[str, ...], key: str) -> DocumentState | None:
        """Async :meth:`state`."""
        return await arun(operations.state(self._context, tuple(namespace), key))
