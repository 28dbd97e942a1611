"""The time-to-live sweeper of ``TieredStore``: a daemon thread that sweeps every
interval until it is stopped.

A sweep that fails (the database locked or unreachable for a moment) is logged and
tried again sooner, after 1 s, then 2 s, 4 s... (never more than the interval),
until one succeeds; a failure never ends the thread, so expired items are always
swept again once the database answers.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable

__all__ = ["FIRST_RETRY_SECONDS", "Sweeper"]

logger = logging.getLogger(__name__)

#: The wait before the first retry of a failed sweep; each further failure doubles it.
FIRST_RETRY_SECONDS = 1.0


def retry_delay(failures: int, interval: float) -> float:
    """Seconds to wait after ``failures`` failed sweeps in a row (at most ``interval``)."""
    return min(interval, FIRST_RETRY_SECONDS * float(2 ** min(failures - 1, 32)))


class Sweeper:
    """Run ``sweep`` every ``interval`` seconds on a daemon thread.

    Attributes:
        future: completes when the thread ends (after :meth:`stop`).
    """

    def __init__(self, sweep: Callable[[], int], interval: float) -> None:
        self._sweep = sweep
        self._interval = interval
        self._stop = threading.Event()
        self.future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, name="tiermem-ttl-sweeper", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the thread to end; False when it did not within ``timeout`` seconds."""
        self._stop.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            delay, failures = self._interval, 0
            while not self._stop.wait(delay):
                try:
                    self._sweep()
                except Exception:  # a sweep's failure is no reason to stop sweeping
                    failures += 1
                    delay = retry_delay(failures, self._interval)
                    logger.warning(
                        "TTL sweep failed (%d in a row); next try in %g s",
                        failures,
                        delay,
                        exc_info=True,
                    )
                else:
                    delay, failures = self._interval, 0
        finally:
            self.future.set_result(None)
