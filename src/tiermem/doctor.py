"""The storage invariants (RELIABILITY I1-I12) as read-only checks.

``find_violations`` returns one line per problem (empty when healthy); the
``tiermem doctor`` command prints them and ``tiermem.testing.check_invariants``
fails a test with them. Each line starts with the invariant it breaks:

* I1 partition: an entry is active or linked to a level-1 summary of its own session.
* I2 no orphans, no empties: every row belongs to an existing session; every
  summary covers entries (or merged summaries) of one contiguous seq range;
  ranges do not overlap; compressed entries precede active ones.
* I3 order: seqs of a session are 1..N with ``last_seq`` = N.
* I4 tokens: the session counters equal what its rows add up to; with
  ``deep`` every count is recomputed with the session's recorded encoding.
* I5 tool pairing: each result answers the latest earlier open call of its id
  (an id may be reused once answered), on the same side of the compression
  boundary; ``pending_calls`` lists exactly the unanswered calls;
  with ``deep`` the rendered context passes the provider-shape rules
  (:func:`provider_shape_problems`).
* I6 summaries: non-empty, not an error stub, shorter than what they cover,
  created no earlier than what they cover.
* I7 content (``deep``): every stored message deserializes, and its type, role,
  id and text columns agree with it.
* I8 time: ``created_at <= last_accessed`` (``<= now`` + 5 min with ``now``).
* I9 storage: SQLite ``integrity_check``, ``foreign_key_check``, WAL mode;
  PostgreSQL (with ``application_name``) no advisory lock and no idle
  transaction left by that application.
* I11 tiers: a known tier (with ``policy``, never older than its ``last_accessed``
  says).
* I12 claims: a claim has a token and an expiry (with ``now`` and
  ``claim_ttl``, one that does not outlive its lease).

The structural rules (I1, I2's summary structure, I5's tool pairing, I6) are
those an import enforces, in one place, :mod:`tiermem._core.structure`: the
doctor reads each session's summaries and the structural columns of its
entries and runs them, so an import never accepts a session the doctor reports.
Counting checks are set-based SQL; the deep checks read each session's rows.
"""

from __future__ import annotations

from ._core.shape import Provider, provider_shape_problems
from ._storage.checks import find_violations

__all__ = ["Provider", "find_violations", "provider_shape_problems"]
