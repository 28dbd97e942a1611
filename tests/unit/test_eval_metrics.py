"""Retrieval metrics on hand-made rankings, and dataset validation's typed errors."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from tiermem.errors import DatasetInvalid, InvalidArgument
from tiermem.evaluation import load_dataset, parse_dataset
from tiermem.evaluation.baseline import query_words
from tiermem.evaluation.metrics import (
    Outcome,
    ndcg_at_k,
    percentile,
    recall_all_at_k,
    recall_any_at_k,
    summarize,
)

LOG3, LOG5 = math.log2(3), math.log2(5)


def test_recall_any_and_all_at_k() -> None:
    """any: one evidence turn in the top k is enough; all: every one must be."""
    ranked = ["a", "b", "c", "d"]
    assert recall_any_at_k(ranked, ["b", "d"], 1) == 0.0
    assert recall_any_at_k(ranked, ["b", "d"], 2) == 1.0
    assert recall_all_at_k(ranked, ["b", "d"], 3) == 0.0
    assert recall_all_at_k(ranked, ["b", "d"], 4) == 1.0
    assert recall_all_at_k([], ["b"], 10) == 0.0


def test_ndcg_with_binary_relevance() -> None:
    """Gain 1/log2(rank+1) per evidence turn, over the ideal ranking's gain."""
    ranked = ["a", "b", "c", "d"]
    assert ndcg_at_k(["b", "d"], ["b", "d"], 10) == pytest.approx(1.0)
    assert ndcg_at_k(ranked, ["b", "d"], 3) == pytest.approx((1 / LOG3) / (1 + 1 / LOG3))
    assert ndcg_at_k(ranked, ["b", "d"], 4) == pytest.approx((1 / LOG3 + 1 / LOG5) / (1 + 1 / LOG3))
    assert ndcg_at_k(ranked, ["z"], 4) == 0.0
    # Three evidence turns but k = 2: the ideal fills two ranks, so two hits is 1.0.
    assert ndcg_at_k(["x", "y"], ["x", "y", "z"], 2) == pytest.approx(1.0)


def test_a_turn_retrieved_twice_counts_once() -> None:
    """Duplicates neither inflate the gain nor push a later turn out of the top k."""
    assert ndcg_at_k(["a", "a", "b"], ["a"], 10) == pytest.approx(1.0)
    assert recall_all_at_k(["a", "a", "b"], ["a", "b"], 2) == 1.0


def test_percentile_interpolates_between_ranks() -> None:
    """p95 of 1..4 is 3.85 (linear interpolation, numpy's default); none is 0."""
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.95) == pytest.approx(3.85)
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([], 0.95) == 0.0


def test_summarize_averages_the_metrics_and_times() -> None:
    """Means over the questions, times in milliseconds."""
    outcomes = [
        Outcome("q1", "c", ("a", "b"), ("a",), 0.001),
        Outcome("q2", "c", ("x", "y"), ("b", "y"), 0.003),
    ]
    summary = summarize(outcomes, 2)
    assert summary.questions == 2
    assert summary.recall_any == 1.0
    assert summary.recall_all == 0.5
    assert summary.ndcg == pytest.approx((1.0 + (1 / LOG3) / (1 + 1 / LOG3)) / 2)
    assert summary.mean_ms == pytest.approx(2.0)
    assert summary.p95_ms == pytest.approx(2.9)
    assert summary.as_dict()["recall_all"] == 0.5
    assert summarize([], 10).questions == 0


def test_query_words_drop_stopwords_and_repeats() -> None:
    """Only the words that can tell turns apart remain, lower-cased, in order."""
    assert query_words("What kind of DOG does the user have? The dog!") == ["kind", "dog", "user"]
    assert query_words("What is it?") == []


VALID: dict[str, Any] = {
    "conversations": [
        {
            "id": "c1",
            "sessions": [
                {
                    "id": "s1",
                    "date": "2024-01-05",
                    "turns": [
                        {"id": "t1", "role": "user", "content": "I adopted a beagle."},
                        {"id": "t2", "role": "assistant", "content": "Lovely!"},
                    ],
                },
                {
                    "id": "s2",
                    "date": "2024-02-01T10:00:00+01:00",
                    "turns": [{"id": "t3", "role": "user", "content": "Hi again."}],
                },
            ],
        }
    ],
    "questions": [
        {
            "id": "q1",
            "conversation": "c1",
            "question": "Which dog?",
            "category": "single-hop",
            "evidence": ["t1"],
        }
    ],
}


def test_a_valid_dataset_parses_into_typed_values() -> None:
    """Dates become aware UTC datetimes; an optional answer may be left out."""
    dataset = parse_dataset(VALID, name="tiny")
    assert dataset.name == "tiny"
    (conversation,) = dataset.conversations
    assert conversation.sessions[0].date.isoformat() == "2024-01-05T00:00:00+00:00"
    assert conversation.last_date.isoformat() == "2024-02-01T09:00:00+00:00"
    assert dataset.questions[0].evidence == ("t1",)
    assert dataset.questions[0].answer is None
    assert dataset.categories() == ["single-hop"]


def _broken(path: str, value: Any) -> dict[str, Any]:
    """A copy of VALID with the field at ``path`` (keys and indexes, dotted) set to
    ``value``, or removed when ``value`` is ``...``."""
    data = copy.deepcopy(VALID)
    *parents, last = [int(part) if part.isdigit() else part for part in path.split(".")]
    target: Any = data
    for part in parents:
        target = target[part]
    if value is ...:
        del target[last]
    else:
        target[last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "where", "words"),
    [
        ("conversations", ..., "$", "missing field 'conversations'"),
        ("questions", [], "$.questions", "non-empty list"),
        ("conversations.0.id", "", "$.conversations[0].id", "1-255 characters"),
        (
            "conversations.0.sessions.0.date",
            "5 Jan",
            "$.conversations[0].sessions[0].date",
            "ISO 8601",
        ),
        (
            "conversations.0.sessions.1.date",
            "2023-12-31",
            "$.conversations[0].sessions[1].date",
            "date order",
        ),
        (
            "conversations.0.sessions.0.turns.1.role",
            "system",
            "$.conversations[0].sessions[0].turns[1]",
            "role must be",
        ),
        (
            "conversations.0.sessions.1.turns.0.id",
            "t1",
            "$.conversations[0].sessions[1].turns[0].id",
            "duplicate turn id 't1'",
        ),
        (
            "conversations.0.sessions.0.turns.0.content",
            "  ",
            "$.conversations[0].sessions[0].turns[0].content",
            "non-empty string",
        ),
        ("questions.0.conversation", "c9", "$.questions[0].conversation", "no conversation"),
        ("questions.0.evidence", ["t1", "t1"], "$.questions[0].evidence", "a turn twice"),
        ("questions.0.evidence", ["t7"], "$.questions[0].evidence[0]", "no turn of"),
        ("questions.0.category", 3, "$.questions[0].category", "non-empty string"),
    ],
)
def test_every_schema_violation_is_a_dataset_invalid_naming_the_field(
    path: str, value: Any, where: str, words: str
) -> None:
    """The error is typed (an InvalidArgument), names the field and says what is wrong."""
    with pytest.raises(DatasetInvalid) as caught:
        parse_dataset(_broken(path, value))
    assert isinstance(caught.value, InvalidArgument)
    assert caught.value.path == where
    assert words in str(caught.value)


def test_evidence_from_another_conversation_is_refused() -> None:
    """A question's evidence must be turns of its own conversation."""
    data = copy.deepcopy(VALID)
    other = copy.deepcopy(data["conversations"][0])
    other["id"] = "c2"
    for number, session in enumerate(other["sessions"]):
        for turn in session["turns"]:
            turn["id"] = f"c2-{number}-{turn['id']}"
    data["conversations"].append(other)
    data["questions"][0]["evidence"] = ["c2-0-t1"]
    with pytest.raises(DatasetInvalid, match="no turn of conversation 'c1'"):
        parse_dataset(data)


def test_files_that_are_not_json_or_missing_are_dataset_invalid(tmp_path: Path) -> None:
    """load_dataset reports unreadable, non-UTF-8 and non-JSON files with the same type."""
    with pytest.raises(DatasetInvalid, match="cannot read"):
        load_dataset(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(DatasetInvalid, match="not UTF-8 JSON"):
        load_dataset(tmp_path / "bad.json")
    (tmp_path / "latin.json").write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(DatasetInvalid, match="not UTF-8 JSON"):
        load_dataset(tmp_path / "latin.json")
    (tmp_path / "list.json").write_text("[]", encoding="utf-8")
    with pytest.raises(DatasetInvalid, match="expected an object"):
        load_dataset(tmp_path / "list.json")
    (tmp_path / "ok.json").write_text(json.dumps(VALID), encoding="utf-8")
    assert load_dataset(tmp_path / "ok.json").name == "ok"
