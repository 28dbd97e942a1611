"""Fusion of BM25 and cosine similarity: scaled scores, weighted mean."""

from __future__ import annotations

import pytest

from tiermem._core.dense import blend, scaled


def test_scores_are_scaled_between_the_worst_and_the_best() -> None:
    """The best scores 1, the worst 0, the others in proportion; a list of equal
    scores (one candidate alone, say) scores 1 throughout; no scores, nothing."""
    assert scaled({1: 12.0, 2: 9.0, 3: 6.0}) == {1: 1.0, 2: 0.5, 3: 0.0}
    assert scaled({7: 0.81}) == {7: 1.0}
    assert scaled({1: 0.3, 2: 0.3}) == {1: 1.0, 2: 1.0}
    assert scaled({}) == {}


def test_blend_is_the_weighted_mean_of_scaled_scores() -> None:
    """(words + w * meaning) / (1 + w), 0 for a list a candidate is not in; the
    distance between cosines counts, not only their order."""
    words = {1: 8.0, 2: 4.0, 3: 0.0}
    meaning = {1: 0.80, 2: 0.70, 4: 0.90}  # 4 shares no word; 3 is not near the query
    fused = blend(words, meaning, 1.0)
    assert fused == pytest.approx({1: (1.0 + 0.5) / 2, 2: 0.5 / 2, 3: 0.0, 4: 1.0 / 2})
    by_meaning = blend(words, meaning, 3.0)
    assert by_meaning == pytest.approx({1: 2.5 / 4, 2: 0.5 / 4, 3: 0.0, 4: 3.0 / 4})
    assert max(by_meaning, key=by_meaning.__getitem__) == 4
    assert blend(words, meaning, 0.0) == pytest.approx({1: 1.0, 2: 0.5, 3: 0.0, 4: 0.0})


def test_blend_of_one_list_is_that_list_scaled() -> None:
    """Without any word match (or without any vector) the other list decides."""
    assert blend({}, {1: 0.9, 2: 0.6}, 1.0) == pytest.approx({1: 0.5, 2: 0.0})
    assert blend({1: 3.0, 2: 1.0}, {}, 2.0) == pytest.approx({1: 1 / 3, 2: 0.0})
