"""Retrieval metrics at a cut-off ``k``, and their aggregation per question category.

Relevance is binary: a retrieved turn is relevant when it is one of the question's
evidence turns. A turn retrieved twice counts once (at its first rank).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "Outcome",
    "Summary",
    "ndcg_at_k",
    "percentile",
    "recall_all_at_k",
    "recall_any_at_k",
    "summarize",
]


def _top(ranked: Sequence[str], k: int) -> list[str]:
    """The first ``k`` distinct ids of ``ranked``."""
    seen: list[str] = []
    for item in ranked:
        if len(seen) == k:
            break
        if item not in seen:
            seen.append(item)
    return seen


def recall_any_at_k(ranked: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """1.0 when any evidence turn is among the top ``k``, else 0.0."""
    return 1.0 if set(_top(ranked, k)) & set(evidence) else 0.0


def recall_all_at_k(ranked: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """1.0 when every evidence turn is among the top ``k``, else 0.0."""
    return 1.0 if set(evidence) <= set(_top(ranked, k)) else 0.0


def ndcg_at_k(ranked: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """Normalized discounted cumulative gain with binary relevance: the gain
    ``1 / log2(rank + 1)`` of each evidence turn in the top ``k``, divided by the
    gain of the ideal ranking (every evidence turn first)."""
    relevant = set(evidence)
    if not relevant:
        return 0.0
    gain = sum(
        1.0 / math.log2(rank + 2) for rank, item in enumerate(_top(ranked, k)) if item in relevant
    )
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(len(relevant), k)))
    return gain / ideal


def percentile(values: Sequence[float], share: float) -> float:
    """The ``share`` quantile (0-1) of ``values`` by linear interpolation between
    the closest ranks (numpy's default); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = share * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one method answered one question."""

    question: str
    category: str
    ranked: tuple[str, ...]
    evidence: tuple[str, ...]
    seconds: float


@dataclass(frozen=True, slots=True)
class Summary:
    """The metrics of a group of questions (means; times in milliseconds)."""

    questions: int
    recall_any: float
    recall_all: float
    ndcg: float
    mean_ms: float
    p95_ms: float

    def as_dict(self) -> dict[str, float | int]:
        """The figures under stable keys."""
        return {
            "questions": self.questions,
            "recall_any": round(self.recall_any, 4),
            "recall_all": round(self.recall_all, 4),
            "ndcg": round(self.ndcg, 4),
            "mean_ms": round(self.mean_ms, 3),
            "p95_ms": round(self.p95_ms, 3),
        }


def summarize(outcomes: Sequence[Outcome], k: int) -> Summary:
    """The mean metrics at ``k`` and the query times of ``outcomes``."""
    count = len(outcomes)
    if not count:
        return Summary(0, 0.0, 0.0, 0.0, 0.0, 0.0)
    times = [outcome.seconds * 1000 for outcome in outcomes]
    return Summary(
        questions=count,
        recall_any=sum(recall_any_at_k(o.ranked, o.evidence, k) for o in outcomes) / count,
        recall_all=sum(recall_all_at_k(o.ranked, o.evidence, k) for o in outcomes) / count,
        ndcg=sum(ndcg_at_k(o.ranked, o.evidence, k) for o in outcomes) / count,
        mean_ms=sum(times) / count,
        p95_ms=percentile(times, 0.95),
    )
