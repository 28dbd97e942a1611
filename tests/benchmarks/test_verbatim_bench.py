"""The turn-by-turn verbatim benchmark runs end to end, and a plain read keeps at
least half of its budget in messages word for word once compression has begun."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import verbatim_bench


@pytest.mark.slow  # about 15 s: 250 reads of a conversation as it grows
def test_a_plain_read_gives_most_of_its_budget_to_messages(tmp_path: Path) -> None:
    """One conversation at 2,000 tokens: every read of its second half is judged, the
    messages take at least half the budget on average (0.45 before a compression
    counted the merge after it) and the summaries at most a fifth of it plus their
    last merge's margin."""
    code = verbatim_bench.main(
        ["--budgets", "2000", "--conversations", "1", "--results-dir", str(tmp_path)]
    )
    assert code == 0
    (row,) = json.loads((tmp_path / "verbatim_bench.json").read_text())
    assert row["budget"] == 2000 and row["reads"] > 100
    assert 0.5 <= row["verbatim_share"] <= 1
    assert 0 < row["verbatim_fewest"] <= row["verbatim_mean"]
    assert row["summaries_mean"] <= 0.3 * 2000
