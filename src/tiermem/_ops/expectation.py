"""What a turn expects of the session it is appended to (``add_and_get_messages``).

A service that answers a turn from the context an earlier call returned stores the
turn only if the session is still as that context showed it. The check runs under
the session's lock, inside the append's transaction, so no other append can come
between it and the turn; when it fails, :class:`~tiermem.errors.StaleContext` rolls
the transaction back and nothing is written.

* ``expected_version`` (the ``version`` of the :class:`~tiermem.types.ContextMessages`
  a read returned) compares the session's row and its last seq: every append moves
  it, whatever the order, ids or kind of the messages (tool results stored out of
  call order, ``add_context``, messages without ids), and clearing the session
  changes its row.
* ``expected_last_id`` (deprecated) compares the message id of the session's newest
  entry. An id cannot name a position: after tool results stored out of call order
  the rendered context does not end with the newest entry, and a message without id
  cannot be told from another. So ``None`` passed explicitly expects an empty
  session, and on a session that has messages raises ``InvalidArgument`` rather than
  let a stale turn through.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import EllipsisType

from .._storage.store import NO_SESSION_VERSION
from ..errors import InvalidArgument, StaleContext

__all__ = ["Expected"]

_NO_SESSION = (0, 0, 0)


@dataclass(frozen=True, slots=True)
class Expected:
    """A turn's expectation: a session ``version``, or (deprecated) the ``last_id`` of
    its newest message (``...``: none)."""

    version: str | None = None
    last_id: str | None | EllipsisType = ...

    def __post_init__(self) -> None:
        if self.version is not None:
            _parse(self.version)
            if self.last_id is not ...:
                raise InvalidArgument("pass expected_version or expected_last_id, not both")
        last_id = self.last_id
        if (
            last_id is not ...
            and last_id is not None
            and not (last_id and isinstance(last_id, str))
        ):
            raise InvalidArgument(
                f"expected_last_id must be a non-empty str or None, got {last_id!r}"
            )

    @property
    def active(self) -> bool:
        """Whether anything is checked."""
        return self.version is not None or self.last_id is not ...

    @property
    def by_id(self) -> bool:
        """Whether the newest message's id is checked (it must then be read)."""
        return self.last_id is not ...

    def check(self, session_id: str, version: str, newest_seq: int, newest_id: str | None) -> None:
        """Check a session at ``version`` whose newest entry before this append is
        ``newest_seq`` (0: none) with message id ``newest_id``.

        Raises:
            StaleContext: the session changed since the context was read.
            InvalidArgument: ``expected_last_id=None`` on a session that has messages.
        """
        if self.version is not None:
            wanted = _parse(self.version)
            if wanted == _NO_SESSION:  # read before the session existed: still empty?
                stale = newest_seq != 0
            else:
                stale = wanted != _parse(version)
            if stale:
                raise StaleContext(
                    f"session {session_id!r} changed since its context was read: it is "
                    f"at version {version}, not {self.version}; nothing was written"
                )
        if self.last_id is ...:
            return
        if self.last_id is None and newest_seq:
            raise InvalidArgument(
                f"expected_last_id=None, but session {session_id!r} has messages: an "
                "absent id cannot name its newest one; pass "
                "expected_version=context.version instead; nothing was written"
            )
        if newest_id != self.last_id:
            raise StaleContext(
                f"session {session_id!r} changed since its context was read: its "
                f"newest message is {newest_id!r}, not {self.last_id!r}; "
                "nothing was written"
            )


def _parse(version: object) -> tuple[int, ...]:
    """The row, creation time and last seq a version names.

    Raises:
        InvalidArgument: it is not a version a read returned.
    """
    if isinstance(version, str):
        parts = version.split(":")
        if len(parts) == 3 and all(p.isascii() and p.isdigit() and len(p) <= 19 for p in parts):
            return tuple(int(part) for part in parts)
    raise InvalidArgument(
        f"expected_version must be the version of a context a read returned (like "
        f"{NO_SESSION_VERSION!r}), got {version!r}"
    )
