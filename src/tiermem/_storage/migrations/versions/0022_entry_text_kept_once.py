"""An entry's text is kept once: in its ``content`` column, and no longer again in its
message JSON.

Entries stored from this revision on keep ``0`` where their message JSON held the
text, when the message's content is that text itself (plain-text messages; content
blocks and tool calls keep their JSON whole); every read puts the text back
(:func:`tiermem._core.messages.stored_message`). Rows stored before are read as they
are, so the upgrade changes nothing. The downgrade puts the text back into every
such row, as an earlier version reads them.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

from alembic import op

from tiermem._core.messages import full_json, stored_message
from tiermem._storage.migrations.messages import rewrite_messages

revision = "0022"
down_revision = "0021"


def upgrade() -> None:
    """Nothing to change: both forms are read."""


def downgrade() -> None:
    """Put each hollow entry's text back into its JSON."""
    rewrite_messages(op.get_bind(), lambda body, text: full_json(stored_message(body, text)))
