"""A canonical dump of every ``tiermem_*`` table, for "state unchanged" assertions."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

__all__ = ["canonical_dump", "tiermem_table_names"]


def tiermem_table_names(engine: Engine) -> list[str]:
    """Names of every table (and view) whose name starts with ``tiermem_``, sorted."""
    inspector = sa.inspect(engine)
    names = set(inspector.get_table_names()) | set(inspector.get_view_names())
    return sorted(name for name in names if name.startswith("tiermem_"))


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return {"hex": bytes(value).hex()}
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return repr(value)


def canonical_dump(engine: Engine, *, ignore: Mapping[str, Collection[str]] | None = None) -> str:
    """Every row of every ``tiermem_*`` table as canonical JSON (rows sorted).

    Args:
        ignore: columns left out per table (``{"tiermem_session": {"claim_token"}}``);
            by default nothing is left out.
    """
    skip = ignore or {}
    tables: dict[str, list[str]] = {}
    with engine.connect() as conn:
        for name in tiermem_table_names(engine):
            result = conn.execute(sa.text(f'SELECT * FROM "{name}"')).mappings()
            rows = [
                json.dumps(
                    {
                        key: _plain(value)
                        for key, value in row.items()
                        if key not in skip.get(name, ())
                    },
                    sort_keys=True,
                    ensure_ascii=False,
                )
                for row in result
            ]
            tables[name] = sorted(rows)
        conn.rollback()
    return json.dumps(tables, sort_keys=True, ensure_ascii=False, indent=0)
