"""Put ``benchmarks/`` on the import path: its scripts import each other by name
(``from measure import ...``), as they do when run as ``benchmarks/compare.py``.
A spawned child process inherits ``sys.path``, so it finds them too."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))
