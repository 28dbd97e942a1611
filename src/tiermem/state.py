"""``SessionState``: the versioned, JSON round-trippable snapshot of one session.

``SessionState.to_json()`` is canonical (sorted keys, no spaces), so
``export(import(export(s))) == export(s)`` byte for byte. Parsing is strict (no
NaN or Infinity, no duplicate keys, bounded depth and size); what an import then
checks is in :mod:`tiermem._ops.transfer`.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ._core.files import read_at_most
from .errors import ImportValidationError
from .types import EntryType

__all__ = [
    "MAX_IMPORT_BYTES",
    "SCHEMA_VERSION",
    "ExportedEntry",
    "ExportedSummary",
    "SessionState",
    "read_export",
]

SCHEMA_VERSION: Literal[1] = 1
MAX_IMPORT_BYTES = 512 * 1024 * 1024
MAX_DEPTH = 200
#: The largest value of an INTEGER column (seqs, levels, access counts) on PostgreSQL;
#: SQLite's integers are wider, but both backends accept the same exports.
MAX_INTEGER = 2**31 - 1
#: An int that fits an INTEGER column.
Integer = Annotated[int, Field(le=MAX_INTEGER)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


#: The UTC times an export may hold: a day inside Python's years 1-9999, because
#: PostgreSQL hands a stored time back in the connection's time zone, which must not
#: push it out of those years.
_EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
_LATEST = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)


def _aware(value: datetime) -> datetime:
    """Every datetime of an export carries its UTC offset and is kept in UTC: a naive
    one could be any zone, and would not round-trip byte for byte."""
    if value.tzinfo is None:
        raise ValueError("datetimes must carry a UTC offset")
    try:
        utc = value.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59:59-05:00 is in the year 10000
        utc = None
    if utc is None or not _EARLIEST <= utc <= _LATEST:
        raise ValueError(
            f"datetime out of range: its UTC time must lie between {_EARLIEST.isoformat()} "
            f"and {_LATEST.isoformat()}"
        )
    return utc


class ExportedSummary(_Strict):
    """A summary in an export; ``parent`` is the index of its merged summary."""

    content: str = Field(min_length=1)
    level: Integer = Field(ge=1)
    first_seq: Integer = Field(ge=1)
    last_seq: Integer = Field(ge=1)
    created_at: datetime
    start_time: datetime
    end_time: datetime
    parent: int | None = None

    _aware_times = field_validator("created_at", "start_time", "end_time")(_aware)


class ExportedEntry(_Strict):
    """An entry in an export; ``summary`` is the index of the summary covering it,
    ``retired_at`` when it stopped being current (see ``MemoryEntry.retired_at``;
    left out of the JSON while it is current)."""

    seq: Integer = Field(ge=1)
    type: EntryType
    role: str
    message: dict[str, Any]
    timestamp: datetime
    pinned: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    summary: int | None = None
    retired_at: datetime | None = Field(default=None, exclude_if=lambda value: value is None)

    _aware_times = field_validator("timestamp")(_aware)

    @field_validator("retired_at")
    @classmethod
    def _aware_retired(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _aware(value)


class SessionState(_Strict):
    """A whole session: entries in seq order, summaries oldest first."""

    schema_version: Literal[1] = SCHEMA_VERSION
    session_id: str
    encoding: str
    created_at: datetime
    last_accessed: datetime
    access_count: Integer = Field(ge=0)
    entries: list[ExportedEntry]
    summaries: list[ExportedSummary]

    _aware_times = field_validator("created_at", "last_accessed")(_aware)

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, no whitespace, UTF-8 text."""
        return json.dumps(
            self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )

    @classmethod
    def from_json(cls, data: str | bytes) -> SessionState:
        """Parse and validate an export strictly.

        Raises:
            ImportValidationError: with the JSON path of the first problem.
        """
        if len(data) > MAX_IMPORT_BYTES:
            raise ImportValidationError(f"export larger than {MAX_IMPORT_BYTES} bytes")
        if isinstance(data, bytes):
            try:
                data = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ImportValidationError("export is not UTF-8") from exc
        try:
            parsed = json.loads(data, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        except RecursionError as exc:
            raise ImportValidationError("JSON nested too deeply") from exc
        except ValueError as exc:  # JSONDecodeError, duplicates, NaN
            raise ImportValidationError(f"invalid JSON: {exc}") from exc
        _check_depth(parsed)
        if not isinstance(parsed, dict):
            raise ImportValidationError("export must be a JSON object")
        if parsed.get("schema_version") != SCHEMA_VERSION:
            raise ImportValidationError(
                f"unsupported schema_version {parsed.get('schema_version')!r} "
                f"(this tiermem reads {SCHEMA_VERSION})",
                path="$.schema_version",
            )
        try:
            return cls.model_validate_json(data, strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
            raise ImportValidationError(first["msg"], path=path) from exc


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        counts = Counter(key for key, _ in pairs)
        raise ValueError(f"duplicate key {next(k for k, n in counts.items() if n > 1)!r}")
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_CONTAINERS = (dict, list)


def _check_depth(value: Any) -> None:
    # Only containers go on the stack: scalars (most values) cannot nest.
    stack: list[tuple[Any, int]] = [(value, 0)] if type(value) in _CONTAINERS else []
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ImportValidationError(f"JSON nested deeper than {MAX_DEPTH}")
        children = item.values() if type(item) is dict else item
        stack.extend((child, depth + 1) for child in children if type(child) in _CONTAINERS)


# --------------------------------------------------------------------------- export


def read_export(source: str | Path | BinaryIO) -> bytes | None:
    """The bytes of an export at ``source`` (a path, or a binary stream such as
    stdin), or ``None`` when it holds more than :data:`MAX_IMPORT_BYTES` (an endless
    input is read no further than one byte past that).

    Raises:
        OSError: the file cannot be opened or read.
    """
    return read_at_most(source, MAX_IMPORT_BYTES)
