"""The chatbot backend under load: many concurrent conversations against several workers.

Starts ``examples/chat_service.py`` with ``--workers`` worker processes on loopback
(a subprocess), drives ``--conversations`` conversations at once with a plain
HTTP/1.1 client (``plain_http.py``) for ``--turns`` turns each, and reports turns per
second, the endpoint's p50 / p99 latency, the CPU per turn and the compressions. Afterwards it
checks that every acknowledged turn is stored exactly once (both messages, by their
ids) and that ``tiermem doctor`` is green. In the tiermem scenarios that are paced, a
subscriber process follows the change feed (``chat_feed.py``): its lag is reported,
and every stored entry's ``entry:added`` event must have reached it, in order per
session.

Scenarios, run one after the other in a fresh PostgreSQL schema each:

* ``tiermem-saturated``, ``tiermem``: the service on tiermem (uvicorn's worker
  processes), the second with the subscriber;
* ``tiermem-kill``: the same, with one worker SIGKILLed halfway through; uvicorn's
  supervisor starts another, and the clients retry the turns that got no answer with
  the same message id (the service stores a retried turn once);
* ``tiermem-preload-kill``: the same kill, with the app built before the workers
  are forked (``--preload``): the forked workers must not share the parent's
  connections, and the replacement is forked from the same parent;
* ``langgraph-saturated``, ``langgraph``: the reference, ``create_agent`` with
  ``SummarizationMiddleware`` and ``AsyncPostgresSaver``, the same model, budget and
  load;
* ``none-saturated``: the service with no memory at all (the model sees the new
  message alone): the floor that HTTP, the model and the client cost;
* ``tiermem-subscriber-kill``: the subscriber SIGKILLed halfway and started again
  1 s later under the same consumer name: it resumes after its acknowledged position
  (events it wrote but had not acknowledged come again, counted as redelivered).

``-saturated`` scenarios send each conversation's next turn as soon as the answer
arrives (throughput); the others wait ``--think`` seconds on average between two
turns, as people do (latency at that many conversations).

Run from the repository root::

    .venv/bin/python benchmarks/chat_load.py                      # 200 x 16 turns
    .venv/bin/python benchmarks/chat_load.py --conversations 50 --turns 5

Results go to ``benchmarks/results/chat_load.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from chat_feed import FeedCheck, Subscriber, check_feed
from plain_http import HttpConnection, TransportError

from tiermem import ConversationMemory

ROOT = Path(__file__).resolve().parents[1]
SERVICE = ROOT / "examples" / "chat_service.py"
DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@dataclass(frozen=True)
class Scenario:
    """How one scenario runs."""

    backend: str
    paced: bool = True
    subscriber: bool = False
    kill: str | None = None  # "worker" or "subscriber", once half the turns are in
    preload: bool = False


SCENARIOS = {
    "tiermem-saturated": Scenario("tiermem", paced=False),
    "langgraph-saturated": Scenario("langgraph", paced=False),
    "none-saturated": Scenario("none", paced=False),
    "tiermem": Scenario("tiermem", subscriber=True),
    "langgraph": Scenario("langgraph"),
    "tiermem-kill": Scenario("tiermem", subscriber=True, kill="worker"),
    "tiermem-preload-kill": Scenario("tiermem", subscriber=True, kill="worker", preload=True),
    "tiermem-subscriber-kill": Scenario("tiermem", subscriber=True, kill="subscriber"),
}
#: Mean seconds a user of the paced scenarios reads and types between two turns.
DEFAULT_THINK = 5.0
WORDS = (
    "parcel order refund invoice courier delay depot label tracking address weekend "
    "morning warehouse customs receipt discount account password delivery window"
).split()
#: Seconds one request may take before the client counts it as unanswered.
REQUEST_TIMEOUT = 30.0
#: Seconds a turn is retried before the client gives up on it (and its conversation).
TURN_DEADLINE = 120.0


@dataclass
class LoadResult:
    """What one scenario measured and verified."""

    scenario: str
    conversations: int
    turns: int
    workers: int
    think: float
    seconds: float = 0.0
    acknowledged: int = 0
    turns_per_s: float = 0.0
    steady_turns_per_s: float = 0.0
    turns_per_worker: list[int] = field(default_factory=list)
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    max_turn_ms: float = 0.0
    service_cpu_ms: float = 0.0
    database_cpu_ms: float = 0.0
    client_cpu_ms: float = 0.0
    retries: int = 0
    replayed: int = 0
    compressions: int = 0
    max_context_tokens: int = 0
    over_budget: int = 0
    killed: int | None = None
    replaced: bool | None = None
    workers_seen: int = 0
    lost: int | None = None
    duplicated: int | None = None
    doctor_ok: bool | None = None
    feed: FeedCheck | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        """Nothing lost, nothing stored twice, the doctor green (where checked)."""
        return (
            not self.errors
            and self.acknowledged == self.conversations * self.turns
            and self.lost in (0, None)
            and self.duplicated in (0, None)
            and self.doctor_ok in (True, None)
            and self.replaced in (True, None)
            and (self.feed is None or self.feed.correct)
        )


def message(conversation: int, turn: int) -> str:
    """The user's deterministic message for one turn."""
    rng = random.Random(conversation * 100_003 + turn)
    words = " ".join(rng.choice(WORDS) for _ in range(18))
    return f"Conversation {conversation}, turn {turn}: {words}?"


def free_port() -> int:
    """A loopback port nobody listens on (now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """A new PostgreSQL schema, dropped afterwards; yields ``url`` pointed at it."""
    schema = f"chatload_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    # The application name marks the service's connections, whose server processes'
    # CPU time is counted (other clients may be using the server meanwhile).
    query = {"options": f"-csearch_path={schema}", "application_name": schema}
    scoped = sa.make_url(url).update_query_dict(query)
    try:
        yield scoped.render_as_string(hide_password=False)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: set[int]) -> dict[int, float]:
    """User plus system CPU seconds of each live process of ``pids`` (a negative key
    stands for the process of its absolute value, keeping it apart)."""
    out: dict[int, float] = {}
    for key in pids:
        with contextlib.suppress(OSError):
            # The command name (field 2) may hold spaces: count from its closing paren.
            stat = Path(f"/proc/{abs(key)}/stat").read_text().rsplit(")", 1)[1].split()
            out[key] = (int(stat[11]) + int(stat[12])) / _TICK
    return out


def server_processes(url: str) -> set[int]:
    """The PostgreSQL server processes serving connections named as ``url``'s."""
    name = sa.make_url(url).query["application_name"]
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            query = "SELECT pid FROM pg_stat_activity WHERE application_name = :name"
            pids = set(conn.execute(sa.text(query), {"name": name}).scalars())
            return pids - {conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()}
    finally:
        engine.dispose()


@dataclass
class CpuMeter:
    """CPU seconds the service's processes and their database connections spend."""

    service: Service
    url: str
    start: dict[int, float] = field(default_factory=dict)

    def _now(self) -> dict[int, float]:
        pids = {self.service.process.pid} | self.service.worker_pids()
        return cpu_seconds(pids | {-pid for pid in server_processes(self.url)})

    def begin(self) -> None:
        """Take the starting figures."""
        self.start = self._now()

    def spent(self) -> tuple[float, float]:
        """(service, database) CPU seconds since :meth:`begin` (a process that ended
        meanwhile, such as a killed worker, is not counted)."""
        end = self._now()
        service = database = 0.0
        for key, seconds in end.items():
            delta = seconds - self.start.get(key, 0.0)
            if key < 0:
                database += delta
            else:
                service += delta
        return service, database


class Service:
    """``examples/chat_service.py`` in a subprocess of its own process group."""

    def __init__(self, url: str, backend: str, workers: int, preload: bool) -> None:
        self.port = free_port()
        self.workers = workers
        command = [sys.executable, str(SERVICE), "--backend", backend, "--url", url]
        command += ["--workers", str(workers), "--port", str(self.port), "--project", "load"]
        if preload:
            command.append("--preload")
        self.process = subprocess.Popen(command, start_new_session=True)
        self.base_url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 90.0) -> set[int]:
        """Wait until every worker answered ``/health``; their pids."""
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        while time.monotonic() < deadline and len(seen) < self.workers:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited with {self.process.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                # A new connection each time, so that other workers get to accept it.
                seen.add(httpx.get(f"{self.base_url}/health", timeout=2).json()["worker"])
            time.sleep(0.05)
        if not seen:
            raise RuntimeError("the service did not answer /health in time")
        return seen

    def new_worker(self, known: set[int], timeout: float = 60.0) -> bool:
        """Whether a worker not in ``known`` answers ``/health`` within ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/health", timeout=2).json()["worker"] not in known:
                    return True
            time.sleep(0.05)
        return False

    def worker_pids(self) -> set[int]:
        """The service's child processes now."""
        pids: set[int] = set()
        for task in Path(f"/proc/{self.process.pid}/task").glob("*/children"):
            pids.update(int(pid) for pid in task.read_text().split())
        return pids

    def stop(self) -> None:
        """SIGTERM the supervisor (which stops its workers); SIGKILL the group if stuck."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


class Load:
    """The clients: one task per conversation, each turn retried until answered."""

    def __init__(self, base_url: str, conversations: int, turns: int, think: float) -> None:
        self.base_url = base_url
        self.conversations = conversations
        self.turns = turns
        self.think = think
        self.latencies: list[float] = []
        self.turn_times: list[float] = []
        self.answered_at: list[float] = []
        self.acknowledged: dict[int, int] = {}
        self.retries = 0
        self.replayed = 0
        self.compressions = 0
        self.max_context_tokens = 0
        self.over_budget = 0
        self.workers: Counter[int] = Counter()
        self.errors: list[str] = []
        self.halfway = asyncio.Event()

    async def _turn(self, client: HttpConnection, conversation: int, turn: int) -> bool:
        body = {
            "session_id": f"c{conversation:04d}",
            "message": message(conversation, turn),
            "message_id": f"c{conversation:04d}-t{turn:03d}",
        }
        started = time.perf_counter()
        while time.perf_counter() - started < TURN_DEADLINE:
            attempt = time.perf_counter()
            try:
                status, answer = await client.post_json("/chat", body)
            except TransportError:
                status, answer = None, None
            if status == 200:
                now = time.perf_counter()
                self.latencies.append(now - attempt)
                self.turn_times.append(now - started)
                self.answered_at.append(now)
                self._record(answer)
                return True
            if status is not None and status < 500:
                self.errors.append(f"{body['message_id']}: HTTP {status}")
                return False
            self.retries += 1
            await asyncio.sleep(0.05 + random.random() * 0.1)
        self.errors.append(f"{body['message_id']}: no answer within {TURN_DEADLINE:.0f} s")
        return False

    def _record(self, answer: dict[str, Any]) -> None:
        self.workers[answer["worker"]] += 1
        self.compressions += bool(answer["compressed"])
        self.replayed += bool(answer["replayed"])
        self.max_context_tokens = max(self.max_context_tokens, answer["context_tokens"])
        self.over_budget += answer["context_tokens"] > answer["max_tokens"]
        if len(self.latencies) * 2 >= self.conversations * self.turns:
            self.halfway.set()

    def client(self) -> HttpConnection:
        """A client of the service. Each conversation has its own connection, as
        separate users do. It is a plain HTTP/1.1 client, not httpx: the load shares
        the machine's cores with the service, and httpx cost about 1.15 ms of CPU per
        turn, which both backends lost alike (see ``plain_http.py``)."""
        address = httpx.URL(self.base_url)
        return HttpConnection(address.host, address.port or 80, REQUEST_TIMEOUT)

    async def _conversation(self, conversation: int, client: HttpConnection) -> None:
        # Staggered starts, so that the conversations do not move in lockstep.
        await asyncio.sleep(random.random() * max(self.think, 0.05))
        try:
            for turn in range(self.turns):
                if not await self._turn(client, conversation, turn):
                    return
                self.acknowledged[conversation] = turn + 1
                if self.think:
                    await asyncio.sleep(self.think * (0.5 + random.random()))
        finally:
            await client.aclose()

    async def warm_up(self, turns: int) -> None:
        """Answer ``turns`` turns in sessions of their own, not counted (first calls
        in a fresh worker load caches and open connections)."""

        async def one(i: int) -> None:
            client = self.client()
            body = {"session_id": f"warm{i}", "message": message(-1, i), "message_id": f"w{i}"}
            try:
                await client.post_json("/chat", body)
            finally:
                await client.aclose()

        await asyncio.gather(*(one(i) for i in range(turns)))

    async def run(self) -> float:
        """Run every conversation to its end; the seconds it took."""
        clients = [self.client() for _ in range(self.conversations)]
        started = time.perf_counter()
        await asyncio.gather(
            *(self._conversation(c, clients[c]) for c in range(self.conversations))
        )
        return time.perf_counter() - started


@dataclass
class Strike:
    """What is killed once half the turns are answered, and what happened."""

    service: Service
    subscriber: Subscriber | None
    target: str | None
    killed: int | None = None
    known: set[int] = field(default_factory=set)

    async def wait_and_kill(self, load: Load) -> None:
        """SIGKILL the busiest live worker, or the subscriber (started again 1 s later)."""
        await load.halfway.wait()
        if self.target == "subscriber" and self.subscriber is not None:
            self.killed = self.subscriber.process.pid
            self.subscriber.kill()
            await asyncio.sleep(1.0)
            self.subscriber.restart()
            return
        alive = self.service.worker_pids()
        serving = [pid for pid, _ in load.workers.most_common() if pid in alive]
        if serving:
            self.known.update(alive, load.workers)
            self.killed = serving[0]
            os.kill(self.killed, signal.SIGKILL)


async def _drive(load: Load, strike: Strike, meter: CpuMeter) -> float:
    """Warm up, then run the load with ``strike`` armed; the seconds it took."""
    warm_turns = 8 * strike.service.workers
    await load.warm_up(warm_turns)
    if strike.subscriber is not None:  # each warm-up turn stores two entries
        await asyncio.to_thread(strike.subscriber.wait_live, 2 * warm_turns)
    meter.begin()
    task = asyncio.create_task(strike.wait_and_kill(load)) if strike.target else None
    seconds = await load.run()
    if task is not None:
        if not load.halfway.is_set():  # too few turns answered to strike
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task  # a struck subscriber is started again before the checks
    return seconds


def verify_stored(url: str, load: Load) -> tuple[int, int, dict[str, set[int]]]:
    """(lost, duplicated, stored): acknowledged messages missing, messages stored
    twice, and the entry ids of each conversation."""
    lost = duplicated = 0
    stored: dict[str, set[int]] = {}
    with ConversationMemory(url, project="load") as memory:
        for conversation in range(load.conversations):
            entries = memory.get_entries(f"c{conversation:04d}")
            stored[f"c{conversation:04d}"] = {entry.id for entry in entries}
            ids = Counter(entry.message.id for entry in entries)
            duplicated += sum(count - 1 for count in ids.values() if count > 1)
            for turn in range(load.acknowledged.get(conversation, 0)):
                key = f"c{conversation:04d}-t{turn:03d}"
                lost += (ids[f"{key}:user"] == 0) + (ids[f"{key}:ai"] == 0)
    return lost, duplicated, stored


def doctor(url: str) -> bool:
    """Whether ``tiermem doctor`` finds every invariant holding."""
    command = [sys.executable, "-m", "tiermem.cli", "doctor", "--url", url]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout + done.stderr, flush=True)
    return done.returncode == 0


def _percentile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def run_scenario(
    scenario: str,
    *,
    url: str = DEFAULT_URL,
    conversations: int = 200,
    turns: int = 16,
    workers: int = 4,
    think: float = DEFAULT_THINK,
) -> LoadResult:
    """Start the service for ``scenario``, drive the load, stop it, verify.

    Args:
        scenario: one of :data:`SCENARIOS`.
        url: the PostgreSQL server (a fresh schema in it is used, then dropped).
        conversations: conversations at once.
        turns: turns per conversation.
        workers: worker processes of the service.
        think: mean seconds a client waits between two turns of a conversation
            (a ``-saturated`` scenario waits none: each answer is followed at once
            by the next turn).
    """
    plan = SCENARIOS[scenario]
    think = think if plan.paced else 0.0
    result = LoadResult(scenario, conversations, turns, workers, think)
    with fresh_schema(url) as scoped, tempfile.TemporaryDirectory() as scratch:
        service = Service(scoped, plan.backend, workers, plan.preload)
        subscriber: Subscriber | None = None
        stored: dict[str, set[int]] = {}
        try:
            first = service.wait_ready()
            if plan.subscriber:
                subscriber = Subscriber(scoped, "load", Path(scratch) / "events.jsonl")
            load = Load(service.base_url, conversations, turns, think)
            meter = CpuMeter(service, scoped)
            strike = Strike(service, subscriber, plan.kill)
            client_started = time.process_time()
            seconds = asyncio.run(_drive(load, strike, meter))
            service_cpu, database_cpu = meter.spent()
            client_cpu = time.process_time() - client_started
            if plan.kill == "worker" and strike.killed is not None:
                # The supervisor must have started a replacement.
                result.replaced = service.new_worker(first | strike.known)
            if plan.backend == "tiermem":
                result.lost, result.duplicated, stored = verify_stored(scoped, load)
                result.doctor_ok = doctor(scoped)
            if subscriber is not None:
                subscriber.wait_for(set().union(*stored.values()))
                subscriber.stop()
                result.feed = check_feed(subscriber.log, stored)
        finally:
            if subscriber is not None:
                subscriber.stop()
            service.stop()
        latencies = [s * 1000 for s in load.latencies]
        result.seconds = round(seconds, 3)
        result.acknowledged = sum(load.acknowledged.values())
        result.turns_per_s = round(result.acknowledged / seconds, 1) if seconds else 0.0
        result.steady_turns_per_s = round(steady_rate(load.answered_at), 1)
        result.turns_per_worker = sorted(load.workers.values())
        result.p50_ms = round(_percentile(latencies, 50), 2)
        result.p99_ms = round(_percentile(latencies, 99), 2)
        result.max_turn_ms = round(max(load.turn_times, default=0.0) * 1000, 1)
        per_turn = 1000 / max(result.acknowledged, 1)
        result.service_cpu_ms = round(service_cpu * per_turn, 2)
        result.database_cpu_ms = round(database_cpu * per_turn, 2)
        result.client_cpu_ms = round(client_cpu * per_turn, 2)
        result.retries, result.replayed = load.retries, load.replayed
        result.compressions = load.compressions
        result.max_context_tokens, result.over_budget = load.max_context_tokens, load.over_budget
        result.killed, result.workers_seen = strike.killed, len(load.workers)
        result.errors = load.errors[:20]
    return result


def steady_rate(answered_at: list[float]) -> float:
    """Turns per second between the answers of the first 10 % and of 90 % of the
    turns: the load while the conversations are under way. The first ones start
    staggered, and in the last ones only the conversations of the worker that drew
    the most are left (uvicorn's workers take connections from one socket, unevenly:
    58 of 200 conversations on one worker and 45 on another, say), so the machine
    idles while the run's wall time still counts."""
    if len(answered_at) < 10:
        return 0.0
    times = sorted(answered_at)
    first, last = len(times) // 10, len(times) * 9 // 10
    spent = times[last] - times[first]
    return (last - first) / spent if spent > 0 else 0.0


def _row(result: LoadResult) -> str:
    checks = "n/a" if result.lost is None else f"{result.lost}/{result.duplicated}"
    doctor_state = {True: "green", False: "RED", None: "n/a"}[result.doctor_ok]
    return (
        f"{result.scenario:<22}{result.acknowledged:>7}{result.turns_per_s:>9.1f}"
        f"{result.steady_turns_per_s:>9.1f}"
        f"{result.p50_ms:>9.1f}{result.p99_ms:>9.1f}{result.max_turn_ms:>10.0f}"
        f"{result.service_cpu_ms:>9.1f}{result.database_cpu_ms:>8.1f}{result.client_cpu_ms:>8.1f}"
        f"{result.retries:>8}{result.compressions:>7}{result.max_context_tokens:>8}"
        f"{checks:>10}{doctor_state:>8}"
    )


def targets(results: list[LoadResult]) -> list[tuple[str, bool | None, str]]:
    """The issue's targets: (what, met or None when not measured, figures)."""
    by_name = {r.scenario: r for r in results}
    ours, reference = by_name.get("tiermem-saturated"), by_name.get("langgraph-saturated")
    out: list[tuple[str, bool | None, str]] = []
    if ours and reference and reference.steady_turns_per_s and reference.turns_per_s:
        # Judged while the conversations are all under way (see steady_rate); the
        # whole run's figures are printed beside it.
        ratio = ours.steady_turns_per_s / reference.steady_turns_per_s
        whole = ours.turns_per_s / reference.turns_per_s
        cost = (reference.service_cpu_ms + reference.database_cpu_ms) / max(
            ours.service_cpu_ms + ours.database_cpu_ms, 0.01
        )
        figures = (
            f"x{ratio:.2f} steady: {ours.steady_turns_per_s:.0f} vs "
            f"{reference.steady_turns_per_s:.0f} turns/s; whole run x{whole:.2f}: "
            f"{ours.turns_per_s:.0f} vs {reference.turns_per_s:.0f}; "
            f"service + database CPU per turn x{cost:.2f} lower"
        )
        out.append(("tiermem >= 2x the reference's turns/s (saturated)", ratio >= 2, figures))
    paced = by_name.get("tiermem")
    if paced:
        what = f"tiermem p99 < 100 ms ({paced.conversations} conversations, think {paced.think} s)"
        out.append((what, paced.p99_ms < 100, f"{paced.p99_ms:.1f} ms"))
    feeds = {r.scenario: r.feed for r in results if r.feed is not None}
    steady = {name: feed for name, feed in feeds.items() if name != "tiermem-subscriber-kill"}
    if steady:
        worst = max(feed.lag_p99_ms for feed in steady.values())
        figures = ", ".join(f"{name}: {feed.lag_p99_ms:.0f} ms" for name, feed in steady.items())
        out.append(("subscriber lag p99 < 1 s (no subscriber killed)", worst < 1000, figures))
    if feeds:
        clean = all(feed.correct for feed in feeds.values())
        figures = ", ".join(
            f"{name}: {feed.missing} missing, {feed.out_of_order} out of order"
            for name, feed in feeds.items()
        )
        out.append(("zero lost events, each session's in order", clean, figures))
    checked = [r for r in results if r.lost is not None]
    if checked:
        clean = all(r.correct for r in checked)
        figures = ", ".join(f"{r.scenario}: {r.lost} lost, {r.duplicated} dup" for r in checked)
        out.append(("zero lost or duplicated turns, doctor green", clean, figures))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios, print the table and the targets, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", default=os.environ.get("TIERMEM_CHAT_URL", DEFAULT_URL))
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=16)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument(
        "--think", type=float, default=DEFAULT_THINK, help="mean s between turns (paced)"
    )
    parser.add_argument("--only", action="append", choices=list(SCENARIOS))
    parser.add_argument("--results-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    loadavg = Path("/proc/loadavg").read_text().strip()
    print(
        f"{args.conversations} conversations x {args.turns} turns, {args.workers} workers, "
        f"paced scenarios think {args.think} s; load before: {loadavg}",
        flush=True,
    )
    results = []
    for scenario in args.only or SCENARIOS:
        print(f"-- {scenario}", flush=True)
        result = run_scenario(
            scenario,
            url=args.url,
            conversations=args.conversations,
            turns=args.turns,
            workers=args.workers,
            think=args.think,
        )
        results.append(result)
        for error in result.errors[:5]:
            print(f"   error: {error}", flush=True)
    print(
        f"\n{'scenario':<22}{'turns':>7}{'turns/s':>9}{'steady/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'max turn':>10}{'svc cpu':>9}{'db cpu':>8}{'client':>8}{'retries':>8}{'compr':>7}"
        f"{'max ctx':>8}{'lost/dup':>10}{'doctor':>8}"
    )
    for result in results:
        print(_row(result))
    print()
    for result in results:
        print(f"{result.scenario:<24}turns per worker: {result.turns_per_worker}")
    followed = [r for r in results if r.feed is not None]
    if followed:
        print(
            f"\n{'subscriber':<22}{'events':>8}{'again':>7}{'missing':>9}{'order':>7}"
            f"{'lag p50':>9}{'lag p99':>9}{'lag max':>9}"
        )
    for result in followed:
        feed = result.feed
        assert feed is not None
        print(
            f"{result.scenario:<22}{feed.events:>8}{feed.redelivered:>7}{feed.missing:>9}"
            f"{feed.out_of_order:>7}{feed.lag_p50_ms:>9.1f}{feed.lag_p99_ms:>9.1f}"
            f"{feed.lag_max_ms:>9.1f}"
        )
    met = targets(results)
    for what, ok, figures in met:
        print(f"target {what}: {'met' if ok else 'NOT met'} ({figures})")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / "chat_load.json"
    payload = {
        "settings": vars(args) | {"results_dir": str(args.results_dir)},
        "loadavg": Path("/proc/loadavg").read_text().strip(),
        "results": [asdict(r) for r in results],
        "targets": [{"target": w, "met": ok, "figures": f} for w, ok, f in met],
    }
    out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0 if all(r.correct for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
