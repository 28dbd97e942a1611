"""The durable change feed.

Creates ``tiermem_event`` and ``tiermem_consumer`` and, on PostgreSQL, the
trigger that notifies followers; each step is skipped when ``create_tables``
made it already.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from alembic import op

from tiermem._storage.event_schema import consumer_table, event_table, install_notify

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    """Create the event and consumer tables and the notify trigger."""
    bind = op.get_bind()
    event_table.create(bind, checkfirst=True)
    consumer_table.create(bind, checkfirst=True)
    install_notify(bind)


def downgrade() -> None:
    """Drop the trigger and the tables."""
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql("DROP TRIGGER IF EXISTS tiermem_event_notify ON tiermem_event")
        bind.exec_driver_sql("DROP FUNCTION IF EXISTS tiermem_event_notify()")
    consumer_table.drop(bind, checkfirst=True)
    event_table.drop(bind, checkfirst=True)
