"""``tiermem eval context`` end to end on a small generated dataset: every context
within its budget, the baselines and the cache replay measured, the shipped dataset
up to date with its generator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tiermem import cli
from tiermem.evaluation import parse_dataset
from tiermem.evaluation.context import run_context

from ..conftest import store_url

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
CONTEXT = ROOT / "benchmarks" / "context"


def _dataset() -> dict[str, Any]:
    """Two sessions of chatter around one planted fact, asked about at the end."""
    turns = []
    for n in range(120):
        text = f"Turn {n}: the weather was grey and I tidied the flat again."
        if n == 8:
            text = "My sister Ana moved to Lisbon and works at a bakery called Pastelaria Rosa."
        turns.append(
            {"id": f"t{n}", "role": "user" if n % 2 == 0 else "assistant", "content": text}
        )
    sessions = [
        {"id": "s1", "date": "2024-01-10T09:00:00+00:00", "turns": turns[:60]},
        {"id": "s2", "date": "2024-02-10T09:00:00+00:00", "turns": turns[60:]},
    ]
    return {
        "name": "small",
        "conversations": [{"id": "c", "sessions": sessions}],
        "questions": [
            {
                "id": "q",
                "conversation": "c",
                "question": "What is the bakery Ana works at called?",
                "category": "named",
                "evidence": ["t8"],
                "answer": "Pastelaria Rosa",
            }
        ],
    }


def test_every_method_is_judged_within_its_budget(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """At 600 tokens the buffer has lost the fact; tiermem recalls it with the
    question as its query; every context is within budget; the replay counts calls."""
    report = run_context(
        parse_dataset(_dataset()),
        budgets=(600,),
        url=store_url(backend, tmp_path, request),
        replay_turns=60,
    )
    rows = {row.method: row for row in report.figures}
    assert set(rows) == {
        "tiermem, query=question",
        "tiermem, plain read",
        "tiermem, plain read, messages alone",
        "plain buffer",
        "plain buffer, 60 % of B",
        "last 10 + BM25",
    }
    assert all(row.questions == 1 and row.over_budget == 0 for row in rows.values())
    assert rows["plain buffer"].evidence_any == 0
    buffer = rows["plain buffer"]
    assert buffer.missed == ["q"] and buffer.as_dict()["missed"] == ["q"]
    assert rows["tiermem, query=question"].evidence_any == 1
    assert rows["tiermem, query=question"].missed == []
    assert rows["tiermem, query=question"].answer == 1
    assert rows["last 10 + BM25"].evidence_any == 1
    # The smaller buffer fills 60 % of the budget; a read's messages alone are a part
    # of it, with no more evidence.
    small = rows["plain buffer, 60 % of B"]
    assert 0 < small.tokens <= 0.6 * 600 < rows["plain buffer"].tokens
    alone, plain = rows["tiermem, plain read, messages alone"], rows["tiermem, plain read"]
    assert 0 < alone.tokens < plain.tokens and alone.evidence_any <= plain.evidence_any
    assert [r.strategy for r in report.replay] == [
        "tiermem, working summarizer",
        "tiermem, failing summarizer",
        "tiermem without recall, working summarizer",
        "tiermem, heuristic summary (no model)",
        "summarization-middleware-like",
    ]
    assert all(r.calls == 60 and 0 <= r.cached_share <= 1 for r in report.replay)
    # Every strategy shows messages word for word, within the budget.
    assert all(0 < r.verbatim_share <= 1 for r in report.replay)
    # A cheaper cache bills less, unless nothing was cached.
    assert all(
        r.cheap_billed_per_call < r.billed_per_call or r.cached_share == 0 for r in report.replay
    )


def test_the_command_prints_json(tmp_path: Path) -> None:
    """``tiermem eval context FILE --json`` prints the figures; a bad budget is one line."""
    path = tmp_path / "small.json"
    path.write_text(json.dumps(_dataset()))
    result = runner.invoke(
        cli.app, ["eval", "context", str(path), "--budgets", "600", "--replay-turns", "0", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [row["budget"] for row in data["figures"]] == [600] * 6 and data["replay"] == []
    missed = {row["method"]: row["missed"] for row in data["figures"]}
    assert missed["plain buffer"] == ["q"] and missed["tiermem, query=question"] == []
    bad = runner.invoke(cli.app, ["eval", "context", str(path), "--budgets", "lots"])
    assert bad.exit_code == 1 and "--budgets" in bad.output


def test_the_shipped_dataset_is_what_its_generator_writes() -> None:
    """benchmarks/context/dataset.json is regenerated deterministically."""
    done = subprocess.run(
        [sys.executable, str(CONTEXT / "make_context_dataset.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
