"""The one-call turn benchmark runs end to end and reports every contender."""

from __future__ import annotations

import json
from pathlib import Path

import turn_bench


def test_a_short_run_reports_every_contender_and_the_feed_cost(tmp_path: Path) -> None:
    """Every contender gets p50, p95 and CPU figures for each length, and the plain
    appends report a larger file with the feed on (its events) than off
    (300 events fill pages of their own)."""
    code = turn_bench.main(
        ["--turns", "30", "--repeat", "1", "--appends", "300", "--results-dir", str(tmp_path)]
    )
    assert code == 0
    report = json.loads((tmp_path / "turn_bench.json").read_text())
    rows = report["turns"]["30"]
    assert set(rows) == {
        "tiermem",
        turn_bench.NO_RECALL,
        turn_bench.NO_FEED,
        turn_bench.BASELINE,
        "ConversationSummaryBufferMemory",
    }
    for row in rows.values():
        assert 0 < row["p50_us"] <= row["p95_us"] and row["cpu_p50_us"] > 0
    appends = report["appends"]
    assert appends["feed on"]["kib"] > appends["feed off"]["kib"] > 0


def test_the_feed_cost_is_reported_on_both_backends_in_cpu_seconds(tmp_path: Path) -> None:
    """The appends alone (no turns) report, per backend, wall and CPU seconds and a
    database larger with the feed on than off."""
    code = turn_bench.main(
        [
            "--turns",
            "",
            "--repeat",
            "1",
            "--appends",
            "300",
            "--backends",
            "sqlite,postgres",
            "--results-dir",
            str(tmp_path),
        ]
    )
    assert code == 0
    report = json.loads((tmp_path / "turn_bench.json").read_text())
    assert report["turns"] == {}
    for key in ("appends", "appends_postgres"):
        on, off = report[key]["feed on"], report[key]["feed off"]
        assert on["kib"] > off["kib"] > 0
        for row in (on, off):
            assert 0 < row["cpu_seconds"] and 0 < row["seconds"]


def test_no_contender_always_steps_right_after_the_same_one() -> None:
    """The turn order is drawn afresh each turn: the feed-off variant is not always
    preceded by the feed-on one (whose code would leave it warm caches), and every
    contender sometimes steps first."""
    names = ["tiermem", turn_bench.NO_RECALL, turn_bench.NO_FEED, turn_bench.BASELINE, "classic"]
    orders = list(turn_bench.turn_orders(names, 200, seed=0))
    assert all(sorted(order) == sorted(names) for order in orders)
    before = {
        order[place - 1] for order in orders if (place := order.index(turn_bench.NO_FEED)) > 0
    }
    assert before == set(names) - {turn_bench.NO_FEED}
    assert {order[0] for order in orders} == set(names)
    assert list(turn_bench.turn_orders(names, 200, seed=0)) == orders  # seeded


def test_postgres_is_played_apart_from_the_in_process_contenders() -> None:
    """The PostgreSQL contender steps only beside the baseline: the server's work
    after its commits would otherwise fall into the SQLite contenders' turns."""
    local, apart = turn_bench.passes(postgres=True)
    assert turn_bench.POSTGRES not in local and turn_bench.NO_RECALL in local
    assert apart == [turn_bench.POSTGRES, turn_bench.BASELINE]
    assert turn_bench.passes(postgres=False) == [local]


def test_the_postgres_ratio_is_to_the_baseline_of_its_own_pass(tmp_path: Path) -> None:
    """A short run on both backends reports tiermem-pg with its own pass's baseline."""
    code = turn_bench.main(
        [
            "--turns",
            "20",
            "--repeat",
            "1",
            "--appends",
            "0",
            "--backends",
            "sqlite,postgres",
            "--results-dir",
            str(tmp_path),
        ]
    )
    assert code == 0
    rows = json.loads((tmp_path / "turn_bench.json").read_text())["turns"]["20"]
    assert rows[turn_bench.POSTGRES]["baseline_p50_us"] > 0
    assert turn_bench.BASELINE in rows and turn_bench.NO_RECALL in rows
