"""Access tiers: how recently a session or memory item was used. Pure, no I/O."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from ._core.settings import KeywordChecked
from .errors import InvalidArgument

__all__ = [
    "ACTIVE_BOOST",
    "DEFAULT_EXPIRING_LAYERS",
    "EXPIRED_BOOST",
    "STORED_LAYERS",
    "MAX_TIER_AGE",
    "RECENT_BOOST",
    "MemoryTier",
    "TierPolicy",
    "calculate_tier",
    "tier_boost",
]

#: Search-ranking boost of an item in the ACTIVE tier.
ACTIVE_BOOST = 0.3
#: Search-ranking boost of an item in the RECENT tier.
RECENT_BOOST = 0.1
#: Search-ranking penalty of an item in the EXPIRED tier.
EXPIRED_BOOST = -0.2


class MemoryTier(enum.StrEnum):
    """How recently a session (or memory item) was read or written."""

    ACTIVE = "active"
    RECENT = "recent"
    ARCHIVED = "archived"
    EXPIRED = "expired"


#: The longest tier threshold (100 years of 365 days): cutoffs are the clock's time
#: minus a threshold, which must stay a datetime.
MAX_TIER_AGE = timedelta(days=100 * 365)

#: The memory layers whose items are stored (working memory stays in the process).
STORED_LAYERS = frozenset({"episodic", "semantic", "procedural"})
#: The layers whose items expire after ``expired_after`` without access by default:
#: episodes, like conversations. Learned facts (semantic) and rules (procedural) persist.
DEFAULT_EXPIRING_LAYERS = frozenset({"episodic"})


@dataclass(frozen=True, slots=True)
class TierPolicy(KeywordChecked):
    """Age thresholds of the tiers; an age equal to a threshold falls in the older tier,
    except ``expired_after``: only strictly older items are EXPIRED. Each threshold is
    a ``timedelta`` of at most ``MAX_TIER_AGE`` (100 years).

    ``expiring_layers`` names the memory layers whose stored items expire after
    ``expired_after`` without access, as sessions do (and are then deleted by
    ``prune_expired``): by default the episodic layer only. Learned facts (semantic)
    and rules (procedural) persist across conversations, ARCHIVED at most, unless
    their layer is listed here: ``TierPolicy(expiring_layers={"episodic", "semantic"})``.
    """

    active_within: timedelta = timedelta(hours=1)
    recent_within: timedelta = timedelta(hours=24)
    expired_after: timedelta = timedelta(days=30)
    expiring_layers: Collection[str] = DEFAULT_EXPIRING_LAYERS  # kept as a frozenset

    def __post_init__(self) -> None:
        thresholds = (self.active_within, self.recent_within, self.expired_after)
        if not all(isinstance(value, timedelta) for value in thresholds):
            raise InvalidArgument("TierPolicy thresholds must be timedelta values")
        if not (timedelta(0) < self.active_within <= self.recent_within <= self.expired_after):
            raise InvalidArgument(
                "TierPolicy needs 0 < active_within <= recent_within <= expired_after"
            )
        if self.expired_after > MAX_TIER_AGE:
            raise InvalidArgument(
                f"TierPolicy thresholds must be at most {MAX_TIER_AGE.days} days, "
                f"got expired_after={self.expired_after!r}"
            )
        layers = self.expiring_layers
        if isinstance(layers, str) or not isinstance(layers, Iterable):
            raise InvalidArgument(
                f"expiring_layers must be a collection of layer names, got {layers!r}"
            )
        values = list(layers)
        names = frozenset(str(layer) for layer in values)
        if not all(isinstance(layer, str) for layer in values) or not names <= STORED_LAYERS:
            raise InvalidArgument(
                f"expiring_layers must name stored layers ({', '.join(sorted(STORED_LAYERS))}),"
                f" got {values!r}"
            )
        object.__setattr__(self, "expiring_layers", names)  # a frozenset of plain names

    def for_layer(self, layer: str) -> TierPolicy:
        """The policy of ``layer``'s items: this one if the layer expires, else one whose
        ``expired_after`` is ``MAX_TIER_AGE``, so its items are never expired by age."""
        if layer in self.expiring_layers:
            return self
        return dataclasses.replace(self, expired_after=MAX_TIER_AGE)


DEFAULT_POLICY = TierPolicy()


def calculate_tier(
    last_accessed: datetime | None, now: datetime, policy: TierPolicy = DEFAULT_POLICY
) -> MemoryTier:
    """Return the tier of an item last accessed at ``last_accessed``.

    Never accessed (``None``) is ARCHIVED: old, but never expired by age. A
    ``last_accessed`` in the future counts as "now" (ACTIVE), never as newer.

    Raises:
        InvalidArgument: if a datetime is naive.
    """
    if now.tzinfo is None or (last_accessed is not None and last_accessed.tzinfo is None):
        raise InvalidArgument("calculate_tier needs timezone-aware datetimes")
    if last_accessed is None:
        return MemoryTier.ARCHIVED
    age = max(now - last_accessed, timedelta(0))
    if age < policy.active_within:
        return MemoryTier.ACTIVE
    if age < policy.recent_within:
        return MemoryTier.RECENT
    if age > policy.expired_after:
        return MemoryTier.EXPIRED
    return MemoryTier.ARCHIVED


def tier_boost(tier: MemoryTier | str) -> float:
    """Ranking boost of a tier: ACTIVE +0.3, RECENT +0.1, ARCHIVED 0, EXPIRED -0.2."""
    return {
        MemoryTier.ACTIVE: ACTIVE_BOOST,
        MemoryTier.RECENT: RECENT_BOOST,
        MemoryTier.EXPIRED: EXPIRED_BOOST,
    }.get(MemoryTier(tier), 0.0)
