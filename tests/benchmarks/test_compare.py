"""compare.py: the command line, the repeat and skip rules, the table and the outputs."""

from __future__ import annotations

import json
from pathlib import Path

import compare
import pytest
from measure import RunResult, RunSpec
from report import copy_to_docs, table_rows


def _ok(name: str, turns: int, total: float, last10: float = 1.0) -> RunResult:
    return RunResult(name, turns, "ok", turns_done=turns, total_s=total, last10_ms=last10)


def test_parse_args_reads_lengths_names_and_rejects_bad_values() -> None:
    """Lengths are sorted and deduplicated, --quick overrides them, bad values fail."""
    options = compare.parse_args(["--turns", "1_000,100,100", "--only", "floor-sqlite"])
    assert options.turns == (100, 1000)
    assert options.contenders == ("floor-sqlite",)
    assert compare.parse_args(["--quick"]).turns == compare.QUICK_TURNS
    for bad in (["--turns", "0"], ["--only", "nope"], ["--repeat", "0"]):
        with pytest.raises(SystemExit):
            compare.parse_args(bad)


def test_repeat_keeps_the_fastest_run_and_stops_at_a_failed_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--repeat keeps the smallest total; a run that did not complete ends the repeats."""
    runs = iter([_ok("a", 10, 3.0), _ok("a", 10, 1.0), _ok("a", 10, 2.0)])
    monkeypatch.setattr(compare, "run_isolated", lambda spec: next(runs))
    assert compare._fastest(RunSpec("a", 10, 0, 1.0), repeat=3).total_s == 1.0

    calls: list[RunSpec] = []

    def failing(spec: RunSpec) -> RunResult:
        calls.append(spec)
        return RunResult("a", 10, "error: boom")

    monkeypatch.setattr(compare, "run_isolated", failing)
    assert compare._fastest(RunSpec("a", 10, 0, 1.0), repeat=3).status == "error: boom"
    assert len(calls) == 1


def test_a_contender_that_timed_out_is_not_started_at_a_larger_n(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once a contender times out, its longer runs are recorded as skipped."""
    started: list[tuple[str, int]] = []

    def fake_run(spec: RunSpec) -> RunResult:
        started.append((spec.contender, spec.turns))
        if spec.contender == "lc-trim-messages":
            return RunResult(spec.contender, spec.turns, "timeout", turns_done=spec.turns // 2)
        return _ok(spec.contender, spec.turns, 1.0)

    monkeypatch.setattr(compare, "run_isolated", fake_run)
    options = compare.parse_args(
        ["--turns", "10,100,1000", "--only", "floor-sqlite,lc-trim-messages"]
    )
    results = compare.run_all(options)
    assert started == [("floor-sqlite", 10), ("lc-trim-messages", 10), ("floor-sqlite", 100),
                       ("floor-sqlite", 1000)]  # fmt: skip
    skipped = [r for r in results if r.status.startswith("timeout (skipped")]
    assert [(r.contender, r.turns) for r in skipped] == [
        ("lc-trim-messages", 100),
        ("lc-trim-messages", 1000),
    ]
    assert "timed out at N=10" in capsys.readouterr().out


def test_table_ratios_are_the_baseline_over_each_contender() -> None:
    """tm/x is tiermem's figure over the row's: below 1 where tiermem is cheaper;
    a run that did not complete shows how far it got and no ratio."""
    base = _ok("tiermem-sqlite", 100, total=1.0, last10=0.5)
    slower = _ok("lc-token-buffer", 100, total=2.0, last10=2.0)
    cut = RunResult("lc-trim-messages", 100, "timeout", turns_done=37, total_s=9.0)
    rows = table_rows([base, slower, cut], base)
    assert rows[0][-2:] == ["1.00x", "1.00x"]
    assert rows[1][-2:] == ["0.50x", "0.25x"]
    assert rows[2][1] == "timeout @37/100"
    assert rows[2][2] == "-" and rows[2][-2:] == ["-", "-"]


def test_compare_prints_tables_and_writes_json_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One real invocation: a table per N, every result in the JSON, and a PNG plot."""
    out, docs = tmp_path / "results", tmp_path / "docs"
    argv = ["--turns", "20,40", "--only", "tiermem-sqlite,floor-tiktoken,lc-token-buffer"]
    argv += ["--results-dir", str(out)]
    assert compare.main(argv) == 0
    printed = capsys.readouterr().out
    assert "N = 20 turns" in printed and "N = 40 turns" in printed

    payload = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    assert payload["meta"]["turns"] == [20, 40] and payload["meta"]["max_tokens"] == 2000
    assert payload["meta"]["versions"]["tiermem"]
    got = {(r["contender"], r["turns"]): r for r in payload["results"]}
    assert set(got) == {
        (name, n)
        for name in ("tiermem-sqlite", "floor-tiktoken", "lc-token-buffer")
        for n in (20, 40)
    }
    assert all(r["status"] == "ok" and r["turns_done"] == r["turns"] for r in got.values())
    assert all(0 < r["max_ctx_tokens"] <= 2000 for r in got.values())
    png = (out / "compare.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert copy_to_docs(out / "compare.png", docs).read_bytes() == png
