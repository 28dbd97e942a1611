"""A memory's embedding model and what goes with it: the id stored with its
vectors, the fusion weight, the background queue that embeds new entries and
layer items, and the per-process cache of session and layer vectors.

The model is called with a timeout (``MemoryConfig.embedding_timeout``): a
synchronous call runs on a daemon helper thread, as the summarizer's do, so a model
that never answers costs a thread, never the caller nor the process's exit, and at
most ``MAX_STUCK_CALLS`` such calls are outstanding (then calls fail at once).

numpy (the ``embeddings`` extra) is imported only when an ``Embedder`` is made.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any

from .._compression.background import BackgroundQueue
from .._compression.summarizer import DaemonWorkers
from ..errors import EmbeddingFailed, EmbeddingTimeout, InvalidArgument
from .named_models import embeddings_from_name

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from .dense import VectorCache

__all__ = ["Embedder", "model_id"]


def model_id(embeddings: object) -> str:
    """The id stored with each vector: the class and, when it has them, its model
    name and size, so a different model (or the same class configured otherwise) is
    told apart and its vectors are not mixed with the old ones. A wrapper of another
    model (a cache, say) names the wrapped one in its ``model_name``."""
    kind = type(embeddings)
    parts = [f"{kind.__module__}.{kind.__qualname__}"]
    for name in ("model", "model_name", "size", "dimensions"):
        value = getattr(embeddings, name, None)
        if isinstance(value, str | int) and not isinstance(value, bool):
            parts.append(f"{name}={value}")
    return ":".join(parts)[:255]


class Embedder:
    """The embedding side of one memory.

    Args:
        embeddings: any LangChain ``Embeddings``, or a ``"provider:model"`` name for
            LangChain's ``init_embeddings``.
        weight: the scaled similarity's weight in the fusion (scaled BM25's is 1;
            see :mod:`tiermem._storage.hybrid`).

    Raises:
        InvalidArgument: for something that is not an ``Embeddings``, a negative
            weight, or when numpy (the ``embeddings`` extra) is missing.
    """

    def __init__(self, embeddings: Embeddings | str, weight: float = 1.0) -> None:
        from langchain_core.embeddings import Embeddings

        if isinstance(embeddings, str):
            embeddings = embeddings_from_name(embeddings)
        if not isinstance(embeddings, Embeddings):
            raise InvalidArgument(
                f"embeddings must be a LangChain Embeddings, got {embeddings.__class__.__name__}"
            )
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight >= 0:
            raise InvalidArgument(f"dense_weight must be a number >= 0, got {weight!r}")
        try:
            from . import dense
        except ImportError as exc:  # pragma: no cover - the extra is installed in tests
            raise InvalidArgument(
                "embeddings need numpy: pip install 'tiermem[embeddings]'"
            ) from exc
        self.embeddings = embeddings
        self.model = model_id(embeddings)
        self.weight = float(weight)
        self.cache: VectorCache = dense.VectorCache()
        self.queue = BackgroundQueue("embed")
        self._waiting: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        #: The bytes of this model's vectors, as its first answer in this process had.
        self.size: int | None = None
        _EMBEDDERS.add(self)

    def check_size(self, size: int) -> None:
        """Check that a vector of ``size`` bytes is as large as the model's first
        (which sets the size).

        Raises:
            EmbeddingFailed: the model changed its vectors' size under one model id;
                such vectors cannot be compared with the stored ones.
        """
        with self._lock:
            if self.size is None:
                self.size = size
            expected = self.size
        if size != expected:
            raise EmbeddingFailed(
                f"the embedding model returned vectors of {size // 4} numbers, not "
                f"{expected // 4} as before under the model id {self.model!r}; "
                "vectors of another size are never stored (give the model another id, "
                "e.g. its dimensions attribute, to change it)"
            )

    def embed(self, texts: list[str], query: bool, timeout: float | None) -> Any:
        """The model's answer for ``texts`` (documents), or for one query as a list
        of one vector; on a daemon helper thread when ``timeout`` is set.

        Raises:
            EmbeddingTimeout: no answer within ``timeout`` seconds.
            Exception: what the model raised.
        """
        embeddings = self.embeddings

        def call() -> Any:
            if query:
                return [embeddings.embed_query(texts[0])]
            return embeddings.embed_documents(texts)

        if timeout is None:
            return call()
        kind, value = _CALLS.call(call, timeout)
        if kind == "error":
            raise value
        return value

    async def aembed(self, texts: list[str], query: bool, timeout: float | None) -> Any:
        """:meth:`embed` from async code: a model's own async methods under
        ``asyncio.wait_for``, else its sync ones as :meth:`embed` runs them (never on
        the loop's executor, which a model that never answers would hold)."""
        from langchain_core.embeddings import Embeddings

        kind = type(self.embeddings)
        if query and kind.aembed_query is not Embeddings.aembed_query:
            awaited: Any = self.embeddings.aembed_query(texts[0])
        elif not query and kind.aembed_documents is not Embeddings.aembed_documents:
            awaited = self.embeddings.aembed_documents(texts)
        else:
            return await asyncio.to_thread(self.embed, texts, query, timeout)
        try:
            found = await asyncio.wait_for(awaited, timeout)
        except TimeoutError as exc:
            raise EmbeddingTimeout(f"embedding model did not answer within {timeout} s") from exc
        return [found] if query else found

    def add(self, ids: list[int], kind: str = "entry") -> None:
        """Remember new rows to embed: entries, or layer items (``kind="item"``)."""
        with self._lock:
            self._waiting.setdefault(kind, []).extend(ids)

    def take(self, n: int, kind: str = "entry") -> list[int]:
        """Up to ``n`` of the rows of ``kind`` waiting, oldest first (they stop
        waiting)."""
        with self._lock:
            waiting = self._waiting.get(kind, [])
            taken, self._waiting[kind] = waiting[:n], waiting[n:]
        return taken

    def after_fork(self) -> None:
        """Forget what the parent was embedding (its worker does not exist in a
        forked child; the rows stay findable by words and ``embed_missing``
        embeds them), and start a new vector cache: a parent's thread may have held
        the old one's lock when the process forked."""
        self._lock = threading.Lock()
        self._waiting = {}
        self.cache = type(self.cache)()


_EMBEDDERS: weakref.WeakSet[Embedder] = weakref.WeakSet()
#: The daemon threads of timed embedding calls (their own pool: a hung embedding
#: model does not use up the summarizer's threads, nor it this).
_CALLS = DaemonWorkers("embedding model", EmbeddingTimeout)


def _reset_after_fork() -> None:
    global _CALLS
    _CALLS = DaemonWorkers("embedding model", EmbeddingTimeout)
    for embedder in list(_EMBEDDERS):
        embedder.after_fork()


os.register_at_fork(after_in_child=_reset_after_fork)
