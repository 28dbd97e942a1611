"""``postgres://`` and ``postgresql://`` both open PostgreSQL through psycopg 3; a URL of
another driver or database is refused with the forms tiermem supports, not with an
install hint for an extra that is already installed."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.conftest import PG_URL
from tiermem import ConversationMemory
from tiermem.errors import InvalidArgument


@pytest.mark.postgres
@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "postgresql+psycopg"])
def test_every_postgresql_scheme_opens_the_database_through_psycopg(
    scheme: str, pg_schema: str
) -> None:
    """The scheme hosting services hand out works as the canonical one does."""
    rest = sa.make_url(PG_URL).set(drivername=scheme)
    url = f"{rest.render_as_string(hide_password=False)}?options=-csearch_path%3D{pg_schema}"
    memory = ConversationMemory(url)
    try:
        assert memory.database.engine.dialect.driver == "psycopg"
        memory.add_user_message("s", "hello")
        assert [m.content for m in memory.get_messages("s")] == ["hello"]
    finally:
        memory.close()


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql+psycopg2://app:secret@db/app", "unsupported driver 'postgresql+psycopg2'"),
        ("postgresql+asyncpg://app:secret@db/app", "unsupported driver 'postgresql+asyncpg'"),
        ("postgres+pg8000://app:secret@db/app", "unsupported driver 'postgres+pg8000'"),
        ("sqlite+aiosqlite:///chat.db", "unsupported driver 'sqlite+aiosqlite'"),
        ("mysql://app:secret@db/app", "unsupported database 'mysql'"),
    ],
)
def test_an_unsupported_driver_is_refused_naming_the_supported_forms(url: str, named: str) -> None:
    """The message says what is wrong and what works; it never shows the password."""
    with pytest.raises(InvalidArgument) as caught:
        ConversationMemory(url)
    message = str(caught.value)
    assert named in message
    assert "sqlite:///" in message and "postgresql://" in message and "postgres://" in message
    assert "pip install" not in message and "tiermem[postgres]" not in message
    assert "secret" not in message
