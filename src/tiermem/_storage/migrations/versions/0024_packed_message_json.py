"""An entry's message JSON is kept packed: each run of the JSON that nearly every
message repeats (a field at its usual value, the ``type`` its ``data`` repeats) as one
control character (:func:`tiermem._core.messages.pack`).

A plain message's row is 70 (human) to 128 (AI) characters shorter, and every read
puts the runs back exactly (:func:`tiermem._core.messages.unpack`). Rows stored
before are read as they are, so the upgrade changes nothing. The downgrade unpacks
every packed row, as an earlier version reads them.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

from alembic import op

from tiermem._core.packing import unpack
from tiermem._storage.migrations.messages import rewrite_messages

revision = "0024"
down_revision = "0023"


def upgrade() -> None:
    """Nothing to change: both forms are read."""


def downgrade() -> None:
    """Unpack each packed row."""
    rewrite_messages(op.get_bind(), lambda body, _text: unpack(body))
