"""The tables of graph checkpoints kept with their sessions (:mod:`tiermem.threads`).

A thread's checkpoints belong to the thread's session (``session_pk``, deleted with
it); ``checkpoint_ns`` tells a subgraph's checkpoints from the root graph's.

* ``tiermem_checkpoint``: one checkpoint, its parent, the run that made it, its
  channel versions (JSON), the channels whose value is rebuilt from the writes of
  its ancestors (LangGraph's ``DeltaChannel``: a prune keeps those ancestors) and
  the checkpoint and metadata as the saver serialized them (type and bytes).
* ``tiermem_checkpoint_blob``: one value per (channel, version), written once. A
  message list is not serialized again: its row (type ``tiermem:refs``) holds the
  entry ids of the messages, as a full list or as the ids appended to the list of
  its ``base`` version; ``root`` is the version of the full list a chain starts
  from, so a chain is read in one query.
* ``tiermem_checkpoint_write``: the pending writes of a checkpoint, keyed as
  LangGraph keys them (task id and index), with the task's path for their order.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from .schema import session_table

__all__ = [
    "CheckpointBlobRow",
    "CheckpointRow",
    "CheckpointWriteRow",
    "blob_table",
    "checkpoint_table",
    "write_table",
]

_SESSION = f"{session_table.name}.pk"


def _session_column(*, primary_key: bool = False) -> sa.Column[int]:
    """The owning session, whose deletion deletes the row."""
    return sa.Column(
        sa.Integer,
        sa.ForeignKey(_SESSION, ondelete="CASCADE"),
        nullable=False,
        primary_key=primary_key,
    )


class CheckpointRow(SQLModel, table=True):
    """One checkpoint of a thread's namespace."""

    __tablename__ = "tiermem_checkpoint"
    __table_args__ = (
        sa.UniqueConstraint(
            "session_pk", "checkpoint_ns", "checkpoint_id", name="uq_tiermem_checkpoint_id"
        ),
        sa.Index(
            "ix_tiermem_checkpoint_run",
            "run_id",
            sqlite_where=sa.text("run_id IS NOT NULL"),
            postgresql_where=sa.text("run_id IS NOT NULL"),
        ),
    )

    pk: int | None = Field(default=None, primary_key=True)
    session_pk: int = Field(sa_column=_session_column())
    checkpoint_ns: str = Field(sa_type=sa.Text)
    checkpoint_id: str = Field(max_length=255)
    parent_id: str | None = Field(default=None, max_length=255)
    run_id: str | None = Field(default=None, max_length=255)
    versions: str = Field(sa_type=sa.Text)
    delta_channels: str | None = Field(default=None, sa_type=sa.Text)
    checkpoint_type: str = Field(max_length=64)
    checkpoint: bytes = Field(sa_type=sa.LargeBinary)
    metadata_type: str = Field(max_length=64)
    meta: bytes = Field(sa_type=sa.LargeBinary)


class CheckpointBlobRow(SQLModel, table=True):
    """The value of one channel at one version."""

    __tablename__ = "tiermem_checkpoint_blob"
    __table_args__ = (
        sa.Index(
            "ix_tiermem_checkpoint_blob_root",
            "session_pk",
            "checkpoint_ns",
            "channel",
            "root",
            sqlite_where=sa.text("root IS NOT NULL"),
            postgresql_where=sa.text("root IS NOT NULL"),
        ),
        {"sqlite_with_rowid": False},
    )

    session_pk: int = Field(sa_column=_session_column(primary_key=True))
    checkpoint_ns: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    channel: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    version: str = Field(sa_column=sa.Column(sa.String(255), primary_key=True))
    type: str = Field(max_length=64)
    value: bytes | None = Field(default=None, sa_type=sa.LargeBinary)
    root: str | None = Field(default=None, max_length=255)


class CheckpointWriteRow(SQLModel, table=True):
    """One pending write of a task to a checkpoint."""

    __tablename__ = "tiermem_checkpoint_write"
    __table_args__ = ({"sqlite_with_rowid": False},)

    session_pk: int = Field(sa_column=_session_column(primary_key=True))
    checkpoint_ns: str = Field(sa_column=sa.Column(sa.Text, primary_key=True))
    checkpoint_id: str = Field(sa_column=sa.Column(sa.String(255), primary_key=True))
    task_id: str = Field(sa_column=sa.Column(sa.String(255), primary_key=True))
    idx: int = Field(sa_column=sa.Column(sa.Integer, primary_key=True, autoincrement=False))
    channel: str = Field(sa_type=sa.Text)
    type: str = Field(max_length=64)
    value: bytes | None = Field(default=None, sa_type=sa.LargeBinary)
    task_path: str = Field(default="", sa_type=sa.Text)


checkpoint_table: sa.Table = CheckpointRow.__table__  # type: ignore[attr-defined]
blob_table: sa.Table = CheckpointBlobRow.__table__  # type: ignore[attr-defined]
write_table: sa.Table = CheckpointWriteRow.__table__  # type: ignore[attr-defined]
