"""A memory's embedding model and what goes with it: the id stored with its
vectors, the fusion weight, the background queue that embeds new entries and
layer items, and the per-process cache of session and layer vectors.

numpy (the ``embeddings`` extra) is imported only when an ``Embedder`` is made.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import TYPE_CHECKING

from .._compression.background import BackgroundQueue
from ..errors import InvalidArgument
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
        _EMBEDDERS.add(self)

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


def _reset_after_fork() -> None:
    for embedder in list(_EMBEDDERS):
        embedder.after_fork()


os.register_at_fork(after_in_child=_reset_after_fork)
