"""``tiermem doctor``: exit 0 on a healthy store, 3 with the problem named after damage."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from typer.testing import CliRunner

from tiermem._storage import statements
from tiermem._storage.schema import entry_table, session_table, summary_table
from tiermem.cli import app

from .harness import StoreSpec
from .workers import op_messages, opened

E, S, M = entry_table.c, session_table.c, summary_table.c


def _doctor(store: StoreSpec) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["doctor", "--url", store.url])
    return result.exit_code, " ".join(result.output.split())


def _seed(store: StoreSpec) -> None:
    with opened(store) as memory:
        for session_id in ("a", "b"):
            for index in range(8):
                memory.add_messages(session_id, op_messages(session_id, index))
            memory.compress(session_id, force=True)


def _pk(conn: Connection, session_id: str) -> int:
    return int(conn.execute(sa.select(S.pk).where(S.session_id == session_id)).scalar_one())


def _corrupt_counter(conn: Connection) -> None:
    conn.execute(
        sa.update(session_table)
        .where(S.session_id == "a")
        .values(active_tokens=S.active_tokens + 7)
    )


def _cross_link(conn: Connection) -> None:
    foreign = conn.execute(sa.select(M.id).where(M.session_pk == _pk(conn, "b"))).scalar_one()
    victim = conn.execute(
        sa.select(sa.func.min(E.id)).where(E.session_pk == _pk(conn, "a"), statements.COMPRESSED)
    ).scalar_one()
    conn.execute(sa.update(entry_table).where(E.id == victim).values(summary_id=foreign))


def _seq_gap(conn: Connection) -> None:
    pk = _pk(conn, "a")
    last = conn.execute(sa.select(sa.func.max(E.seq)).where(E.session_pk == pk)).scalar_one()
    conn.execute(
        sa.update(entry_table).where(E.session_pk == pk, E.seq == last).values(seq=last + 100)
    )


def test_doctor_passes_a_healthy_store(store: StoreSpec) -> None:
    """On a healthy store with compressed sessions doctor exits 0 and says so."""
    _seed(store)
    code, output = _doctor(store)
    assert code == 0, output
    assert "every invariant holds" in output


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (_corrupt_counter, "I4 session 'a': counters"),
        (_cross_link, "linked to a summary not in this session"),
        (_seq_gap, "I3 session 'a': seqs"),
    ],
    ids=["counter", "cross-session-link", "seq-gap"],
)
def test_doctor_reports_damage(
    store: StoreSpec, damage: Callable[[Connection], None], expected: str
) -> None:
    """After raw SQL breaks a counter, links an entry to another session's summary or opens
    a seq gap, doctor exits 3 and names the broken invariant."""
    _seed(store)
    engine = store.engine()
    try:
        with engine.begin() as conn:
            damage(conn)
    finally:
        engine.dispose()
    code, output = _doctor(store)
    assert code == 3, output
    assert expected in output
