"""The health hints of ``tiermem stats``: pure, no database."""

from __future__ import annotations

import pytest

from tiermem import TierStats
from tiermem.cli import tier_hints


def test_empty_project_says_so() -> None:
    """A project without sessions gets one hint saying it is empty."""
    assert tier_hints(TierStats(0, 0, 0, 0, 0)) == ["no sessions in this project yet"]


def test_healthy_project_has_no_hints() -> None:
    """Active sessions and few expired ones give no hint."""
    assert tier_hints(TierStats(total=100, active=5, recent=20, archived=66, expired=9)) == []


@pytest.mark.parametrize(("expired", "hinted"), [(9, False), (10, True), (60, True)])
def test_many_expired_suggests_prune(expired: int, hinted: bool) -> None:
    """From 10% of sessions expired on, the hints suggest running prune."""
    hints = tier_hints(TierStats(100, 1, 0, 99 - expired, expired))
    assert any("tiermem prune" in hint for hint in hints) is hinted


def test_no_active_session_is_reported() -> None:
    """A project with sessions but none active is told so."""
    hints = tier_hints(TierStats(total=4, active=0, recent=4, archived=0, expired=0))
    assert hints == ["no active sessions: none was read or written within the active window"]


def test_many_expired_layer_items_suggest_prune() -> None:
    """From 10% of a project's layer items expired on, the hints suggest prune too; a
    project with items but no sessions is not called empty."""
    hints = tier_hints(TierStats(0, 0, 0, 0, 0, items=10, active_items=9, expired_items=1))
    assert hints == ["1 layer items (10.0%) are expired: run `tiermem prune` to delete them"]
    assert tier_hints(TierStats(0, 0, 0, 0, 0, items=10, active_items=10)) == []
