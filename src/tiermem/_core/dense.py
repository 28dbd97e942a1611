"""Dense vectors: their stored form, exact cosine scoring and fusion.

Vectors are stored L2-normalized as little-endian float32 bytes, so cosine
similarity is one matrix-vector product. Scoring is exact (every vector of the
searched session), with numpy; nothing here needs a vector extension in the
database. numpy comes with the ``embeddings`` extra and is imported only when a
memory has embeddings.

Fusion is a weighted mean of scaled scores (:func:`blend`): each list's scores
(BM25, cosine) are scaled to 0-1 between its worst and its best candidate, so
neither scale dominates the other, and how far apart two candidates score, not
only their order, carries into the fused score.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "PartitionVectors",
    "VectorCache",
    "blend",
    "decode",
    "encode_all",
    "nearest",
    "scaled",
    "top",
]

Matrix = NDArray[np.float32]


def encode_all(found: object, count: int) -> list[bytes]:
    """The stored forms of a model's answer for ``count`` texts: each vector
    L2-normalized float32 (a zero vector stays zero). Any numbers are accepted
    (Python's or numpy's).

    Raises:
        ValueError: unless ``found`` is ``count`` non-empty vectors of finite numbers,
            all of one size.
    """
    if isinstance(found, str | bytes) or not isinstance(found, Sequence | np.ndarray):
        raise ValueError(f"{type(found).__name__}, not a list of vectors")
    if len(found) != count:
        raise ValueError(f"{len(found)} vectors for {count} texts")
    try:
        matrix = np.asarray(found, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError("something other than vectors of numbers of one size") from exc
    if matrix.ndim != 2 or matrix.shape[1] == 0:
        raise ValueError("something other than vectors of numbers of one size")
    if not np.isfinite(matrix).all():
        raise ValueError("a vector with a non-finite value")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return [row.astype("<f4").tobytes() for row in matrix / norms]


def decode(blobs: Sequence[bytes]) -> Matrix:
    """Stored vectors as the rows of one matrix (all of one size)."""
    if not blobs:
        return np.zeros((0, 0), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), -1).astype(np.float32)


def top(ids: NDArray[np.int64], matrix: Matrix, query: bytes, n: int) -> list[tuple[int, float]]:
    """The ``n`` rows most similar to ``query`` (cosine), best first, as (id, similarity)."""
    if not len(ids) or n <= 0:
        return []
    vector = decode([query])[0]
    if vector.shape[0] != matrix.shape[1]:
        return []  # vectors of another size: another model, not comparable
    similarities = matrix @ vector
    n = min(n, len(ids))
    best = np.argpartition(-similarities, n - 1)[:n]
    best = best[np.argsort(-similarities[best], kind="stable")]
    return [(int(ids[i]), float(similarities[i])) for i in best]


def nearest(vectors: Mapping[int, bytes], query: bytes, n: int) -> list[tuple[int, float]]:
    """The ``n`` of ``vectors`` (id -> stored vector) most similar to ``query``; those
    of another size than the query's are not comparable, and skipped."""
    alike = {key: blob for key, blob in vectors.items() if len(blob) == len(query)}
    if not alike:
        return []
    ids = np.fromiter(alike, dtype=np.int64, count=len(alike))
    return top(ids, decode(list(alike.values())), query, n)


def scaled(scores: Mapping[int, float]) -> dict[int, float]:
    """``scores`` (id -> score) min-max scaled: the best 1, the worst 0; when all
    are equal, all 1 (the list holds no information on their order)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high <= low:
        return dict.fromkeys(scores, 1.0)
    span = high - low
    return {item: (score - low) / span for item, score in scores.items()}


def blend(
    lexical: Mapping[int, float], similar: Mapping[int, float], weight: float
) -> dict[int, float]:
    """The fused relevance of every candidate of either list: ``(L + weight * D) /
    (1 + weight)``, where ``L`` and ``D`` are its :func:`scaled` BM25 and cosine
    (0 when it is not in that list), so it lies in 0-1."""
    words, meaning = scaled(lexical), scaled(similar)
    return {
        item: (words.get(item, 0.0) + weight * meaning.get(item, 0.0)) / (1.0 + weight)
        for item in words.keys() | meaning.keys()
    }


class PartitionVectors:
    """The vectors of one partition (a session) as read so far, those of ``size``
    bytes only: a model that changed its vectors' size under one id left vectors
    that are not comparable with the query's (counted in :attr:`count`, not kept)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.ids: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.matrix: Matrix = np.zeros((0, size // 4), dtype=np.float32)
        self.count = 0
        self.last = 0

    def extend(self, rows: Sequence[tuple[int, int, bytes]]) -> None:
        """Add rows of (row id, item id, vector) read after :attr:`last`."""
        if not rows:
            return
        self.count += len(rows)
        self.last = max(self.last, max(row[0] for row in rows))
        kept = [row for row in rows if len(row[2]) == self.size]
        if not kept:
            return
        matrix = decode([row[2] for row in kept])
        ids = np.fromiter((row[1] for row in kept), dtype=np.int64, count=len(kept))
        self.matrix = np.vstack([self.matrix, matrix])
        self.ids = np.concatenate([self.ids, ids])

    @property
    def nbytes(self) -> int:
        """The memory the vectors take."""
        return int(self.matrix.nbytes + self.ids.nbytes)


class VectorCache:
    """The vectors of recently searched partitions, per process, bounded in bytes.

    A partition is read from the database once and then only its new rows; when
    rows were deleted (the stored count is lower than the cached count plus the
    new rows) it is read again. Least recently used partitions are dropped first.
    """

    def __init__(self, max_bytes: int = 512 * 1024 * 1024) -> None:
        self._max_bytes = max_bytes
        self._parts: OrderedDict[Any, PartitionVectors] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self,
        key: Any,
        version: tuple[int, int],
        read: Callable[[int], Sequence[tuple[int, int, bytes]]],
        size: int,
    ) -> PartitionVectors:
        """The vectors of ``size`` bytes of partition ``key``, brought up to
        ``version`` (its stored count and largest row id) with ``read(after)``,
        which returns its rows of a higher row id than ``after``."""
        count, last = version
        key = (key, size)
        with self._lock:
            part = self._parts.pop(key, None)
        if part is None or part.count > count:
            part = PartitionVectors(size)
        if last > part.last:
            part.extend(read(part.last))
        if part.count != count:  # rows were deleted meanwhile: read them all again
            part = PartitionVectors(size)
            part.extend(read(0))
        with self._lock:
            self._parts[key] = part
            total = sum(p.nbytes for p in self._parts.values())
            while total > self._max_bytes and len(self._parts) > 1:
                _, dropped = self._parts.popitem(last=False)
                total -= dropped.nbytes
        return part

    def clear(self) -> None:
        """Forget every partition."""
        with self._lock:
            self._parts.clear()
