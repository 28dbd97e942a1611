"""Alembic environment: runs on the connection handed over by ``upgrade``."""

from __future__ import annotations

from alembic import context

from tiermem._storage.migrations import VERSION_TABLE
from tiermem._storage.tables import TABLES

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=TABLES[0].metadata,
    version_table=VERSION_TABLE,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
