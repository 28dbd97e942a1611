"""What ``prune_expired`` deletes: the rule a configuration sets, in words, and what it
would delete now. ``tiermem prune`` prints both (``--dry-run`` lists the sessions)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from .tiers import MemoryTier
from .types import MemoryConfig, SessionInfo

if TYPE_CHECKING:
    from .memory import ConversationMemory

__all__ = ["ExpiredPreview", "preview_expired", "prune_rule"]

#: How the rule names the items of each stored layer, in the order it names them.
_LAYER_ITEMS = {
    "episodic": "episodes (episodic)",
    "semantic": "learned facts (semantic)",
    "procedural": "rules (procedural)",
}


def _age(age: timedelta) -> str:
    """``age`` in days, or in hours below a day."""
    if age >= timedelta(days=1):
        days = age / timedelta(days=1)
        return f"{days:g} day{'' if days == 1 else 's'}"
    hours = age / timedelta(hours=1)
    return f"{hours:g} hour{'' if hours == 1 else 's'}"


def prune_rule(config: MemoryConfig) -> str:
    """One sentence saying what ``prune_expired`` deletes, and keeps, under ``config``."""
    policy = config.tier_policy
    idle = _age(policy.expired_after)
    expiring = [items for layer, items in _LAYER_ITEMS.items() if layer in policy.expiring_layers]
    kept = [items for layer, items in _LAYER_ITEMS.items() if layer not in policy.expiring_layers]
    parts = [f"sessions not accessed for over {idle}, with their entries and summaries"]
    if expiring:
        parts.append(f"{' and '.join(expiring)} not accessed for over {idle}")
    parts.append("stored documents past their time to live")
    parts.append(f"change-feed events older than {_age(config.event_retention)}")
    rule = "prune deletes " + "; ".join(parts)
    if kept:
        rule += f"; it keeps {' and '.join(kept)}, which do not expire by age"
    return rule


@dataclass(frozen=True, slots=True)
class ExpiredPreview:
    """What a prune of the project would delete now.

    Attributes:
        sessions: the expired sessions, least recently accessed first (at most the
            preview's limit).
        session_count: every expired session.
        items: the expired layer items (of the layers that expire).
        documents: the stored documents whose time to live has passed.
    """

    sessions: list[SessionInfo]
    session_count: int
    items: int
    documents: int

    def lines(self) -> list[str]:
        """The preview as indented lines: each listed session, then the counts."""
        lines = [
            f"  session {s.session_id} (last accessed {s.last_accessed:%Y-%m-%d %H:%M} UTC)"
            for s in self.sessions
        ]
        if self.session_count > len(self.sessions):
            lines.append(f"  ... and {self.session_count - len(self.sessions)} more sessions")
        lines.append(f"  {self.items} expired layer items")
        lines.append(f"  {self.documents} documents past their time to live")
        return lines


def preview_expired(memory: ConversationMemory, limit: int = 20) -> ExpiredPreview:
    """What ``memory.prune_expired()`` would delete in its project now; not an access."""
    stats = memory.get_tier_stats()
    sessions = memory.least_recently_used(MemoryTier.EXPIRED, limit)
    return ExpiredPreview(sessions, stats.expired, stats.expired_items, stats.expired_documents)
