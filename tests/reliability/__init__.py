"""The reliability suite (RELIABILITY.md section 8), by case:

* T07 ``test_crash_append``, T08/T14 kill ``test_crash_compress``,
  T09 ``test_crash_import_prune``, T10 ``test_crash_lock``: SIGKILL at failpoints
  and at random moments (``harness`` spawns, waits for the ``.hit`` marker, kills).
* T11-T15, T17, T18 ``test_concurrency``, T19 ``test_fork``.
* T20 ``test_sql_discipline``, T21 ``test_signals_isolation``.
* T25 ``test_big_entries`` (and the limit in ``test_bad_inputs``), T28-T31 and
  T36 ``test_bad_inputs``.
* T33-T35 ``test_storage_faults``.
* The invariant checker and ``tiermem doctor``: ``test_invariant_checker``,
  ``test_doctor``. T37 lives in ``tests/property/test_state_machine.py``.

Process and crash tests are ``@pytest.mark.slow`` (``make test-slow``).
"""
