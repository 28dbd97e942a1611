"""Alembic migrations of tiermem's tables (``tiermem db upgrade``).

The version is kept in ``tiermem_alembic_version`` so tiermem's history never
mixes with an application's own Alembic history in the same database.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.util import CommandError

from ...errors import InvalidArgument
from ..database import Database, translate_error
from ..tables import lock_schema

__all__ = ["VERSION_TABLE", "upgrade"]

VERSION_TABLE = "tiermem_alembic_version"


def upgrade(url: str | None = None, revision: str = "head") -> None:
    """Migrate the database at ``url`` (default: the embedded SQLite file) to ``revision``.

    Raises:
        InvalidArgument: for a bad URL or an unknown revision.
        StorageError: (a subclass) when the database fails, e.g. ``StorageCorrupt``
            for a file that is not a database; nothing was migrated.
    """
    database = Database(url)
    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent))
    try:
        with database.engine.begin() as connection:
            # Concurrent upgrades would race to create the version table.
            lock_schema(connection)
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    except CommandError as error:
        raise InvalidArgument(f"cannot upgrade to revision {revision!r}: {error}") from error
    except sa.exc.SQLAlchemyError as error:
        raise translate_error(error) from error
    finally:
        database.dispose()
