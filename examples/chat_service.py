"""A chatbot backend: an ASGI service whose conversations live in tiermem on PostgreSQL.

Needs the ``examples`` dependency group (Starlette, uvicorn, httpx) and
``tiermem[postgres]``; the ``--backend langgraph`` reference also needs ``langchain``
and ``langgraph-checkpoint-postgres``. No API key: a deterministic fake chat model
(:class:`tiermem.testing.FakeSummarizer`) is both the chat model and the summarizer.

``POST /chat`` with ``{"session_id": ..., "message": ..., "message_id": ...}`` answers
``{"reply": ..., "context": [...], "context_tokens": ..., "compressed": ...}``: the
context is what the model was handed for this turn, within the token budget.

How the tiermem backend works (direct calls, no agent middleware): a conversation's
first turn on a worker reads the stored context with ``aget_messages``; the model
gets it plus the user's message; then the user's message and the reply are stored
together, and the next context read back, with ``aadd_and_get_messages(session,
[user, reply], ...)``: one transaction, so a turn is stored whole or not at all,
compressing afterwards when the session went over budget. The worker keeps that
context and answers the conversation's next turn from it, with no read:
``expected_version`` (the kept context's version) makes the write fail with
``StaleContext``, writing nothing, if another worker appended to the conversation
meanwhile, and the worker then reads the context again and answers anew. A client's
connection stays with one worker, so in steady state a turn is one transaction. The
memory's budget is the model's budget less a reserve for the incoming message, so
the context handed to the model always fits. The message ids derive from the
client's ``message_id``: a client that retries a turn it got no answer for (a worker
killed mid-request) never stores it twice. A write from a freshly read context skips
ids already stored (``skip_existing``, checked under the session's lock); a write
from a kept context fails with ``StaleContext`` when the retried turn was stored
meanwhile, since the session moved past that context. Either way a retry of a turn
whose answer was stored gets that answer again without calling the model.

The reference (``--backend langgraph``) keeps memory with LangGraph's durable stack:
``langchain.agents.create_agent`` with ``SummarizationMiddleware`` (the same budget as
trigger, the same token rule) and ``AsyncPostgresSaver`` on the same database.
``--backend none`` keeps no memory (the model sees only the new message): what
serving and the model cost alone.

Run it::

    python examples/chat_service.py --workers 4                # uvicorn's supervisor
    python examples/chat_service.py --workers 4 --preload      # the app built, then forked
    python examples/chat_service.py --backend langgraph --workers 4
    python examples/chat_service.py demo --url sqlite:///chat.db   # a few turns in-process
    python examples/chat_service.py subscriber --consumer audit --log audit.jsonl

``--url`` (or ``TIERMEM_CHAT_URL``) defaults to the local PostgreSQL ``test`` database.
Without ``--preload``, uvicorn spawns fresh worker processes that each build the app.
With it, the app and its memory are built (and the database touched) in the parent,
which then forks the workers and restarts any that dies, as a pre-forking server
does: tiermem notices it runs in a forked child and opens its own connections there.

``subscriber`` is a separate process that follows the project's durable change feed
(``memory.feed.afollow``) under a consumer name, writes each event as a JSON line
(with when it was made and when it arrived) and acknowledges what it wrote: killed
and started again under the same name, it resumes after its last acknowledgement.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol, TextIO, TypeGuard

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    MessageLikeRepresentation,
    convert_to_messages,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tiermem import ContextMessages, ConversationMemory, MemoryConfig, TokenCounter
from tiermem.errors import ContextReadFailed, StaleContext
from tiermem.feed import ChangeEvent
from tiermem.testing import FakeSummarizer

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
#: A small budget, so that conversations of a few dozen turns get compressed.
DEFAULT_MAX_TOKENS = 600
#: The newest messages never summarized, on both backends (three turns).
KEEP_MESSAGES = 6
#: Tokens of the model's budget kept free for the incoming user message (a longer
#: message is refused): the stored context gets the rest.
MESSAGE_RESERVE = 128
ENV_PREFIX = "TIERMEM_CHAT_"


class MessageCounts:
    """tiermem's token rule, each distinct plain message counted once. A service sees
    the same stored messages every turn; both backends count through one of these, so
    re-tokenizing the whole context each turn costs neither of them."""

    def __init__(self) -> None:
        self.counter = TokenCounter()
        self._known: dict[tuple[str, str, str | None], int] = {}

    def message(self, message: BaseMessage) -> int:
        """Tokens of ``message``."""
        if not isinstance(message.content, str) or getattr(message, "tool_calls", None):
            return self.counter.count_message(message)
        key = (message.type, message.content, message.name)
        tokens = self._known.get(key)
        if tokens is None:
            if len(self._known) >= 100_000:  # bounded: old conversations go
                self._known.clear()
            tokens = self._known[key] = self.counter.count_message(message)
        return tokens

    def messages(self, messages: Iterable[BaseMessage]) -> int:
        """Tokens of ``messages``."""
        return sum(self.message(message) for message in messages)


@dataclass(frozen=True)
class Settings:
    """What a worker needs to build the app (passed to spawned workers by environment).

    Attributes:
        url: the database, as a SQLAlchemy URL.
        backend: ``tiermem`` or ``langgraph``.
        project: tiermem's project, or the prefix of LangGraph's thread ids.
        max_tokens: the token budget of a conversation's context.
        prepared: the tables exist already (the launcher created them), so workers
            do not race to create them.
    """

    url: str = DEFAULT_URL
    backend: str = "tiermem"
    project: str = "chat"
    max_tokens: int = DEFAULT_MAX_TOKENS
    prepared: bool = False

    def to_env(self) -> dict[str, str]:
        """These settings as environment variables."""
        return {
            ENV_PREFIX + "URL": self.url,
            ENV_PREFIX + "BACKEND": self.backend,
            ENV_PREFIX + "PROJECT": self.project,
            ENV_PREFIX + "MAX_TOKENS": str(self.max_tokens),
            ENV_PREFIX + "PREPARED": "1" if self.prepared else "",
        }

    @classmethod
    def from_env(cls) -> Settings:
        """The settings in the environment (defaults for those missing)."""
        env = os.environ
        return cls(
            url=env.get(ENV_PREFIX + "URL", DEFAULT_URL),
            backend=env.get(ENV_PREFIX + "BACKEND", "tiermem"),
            project=env.get(ENV_PREFIX + "PROJECT", "chat"),
            max_tokens=int(env.get(ENV_PREFIX + "MAX_TOKENS", DEFAULT_MAX_TOKENS)),
            prepared=bool(env.get(ENV_PREFIX + "PREPARED")),
        )


@dataclass(frozen=True)
class TurnResult:
    """One answered turn."""

    reply: str
    context: list[BaseMessage]
    context_tokens: int
    compressed: bool
    replayed: bool = False


class ChatBackend(Protocol):
    """A conversation memory plus model behind the endpoint."""

    async def start(self) -> None:
        """Open connections (in the worker's event loop)."""

    async def stop(self) -> None:
        """Close them."""

    async def turn(self, session_id: str, message_id: str, text: str) -> TurnResult:
        """Store the user's message, answer it, store the answer."""


def chat_model() -> FakeSummarizer:
    """The deterministic stand-in for a chat model (and for the summarizer)."""
    return FakeSummarizer(record_calls=False)


class MessageTooLong(ValueError):
    """The user's message does not fit the reserve of the token budget."""


class TiermemBackend:
    """Memory by direct calls to tiermem's async API (see the module docstring)."""

    #: Contexts kept per worker, for this many conversations (the least recently
    #: answered go first).
    CACHED_CONVERSATIONS = 10_000

    def __init__(self, settings: Settings) -> None:
        config = MemoryConfig(
            max_tokens=settings.max_tokens - MESSAGE_RESERVE,
            recent_window=KEEP_MESSAGES,
            min_entries_to_compress=4,
        )
        self.memory = ConversationMemory(
            settings.url, project=settings.project, config=config, summarizer=chat_model()
        )
        self.model = chat_model()
        self.counts = MessageCounts()
        # Compressions run inline, before the call that triggered them returns, and a
        # conversation's turns come one at a time: counting them per session tells
        # whether this turn compressed.
        self.compressions: Counter[str] = Counter()
        self.memory.on("compressed", self._count)
        # The context each conversation's last turn here returned: the next turn is
        # answered from it and stored only if nobody appended since.
        self.contexts: OrderedDict[str, ContextMessages] = OrderedDict()
        self.stale = 0

    def _count(self, sender: object, *, session_id: str, **kwargs: Any) -> None:
        self.compressions[session_id] += 1

    def prepare(self) -> None:
        """Create the tables (the first transaction does)."""
        self.memory.list_sessions(limit=1)

    async def start(self) -> None:
        """Nothing to open: the engine connects lazily, also in a forked worker."""

    async def stop(self) -> None:
        """Release the connection pool."""
        await self.memory.aclose()

    async def turn(self, session_id: str, message_id: str, text: str) -> TurnResult:
        """One turn, idempotent under ``message_id``.

        Raises:
            MessageTooLong: the message is over :data:`MESSAGE_RESERVE` tokens.
        """
        user = HumanMessage(text, id=f"{message_id}:user")
        if self.counts.message(user) > MESSAGE_RESERVE:
            raise MessageTooLong(f"a message may have at most {MESSAGE_RESERVE} tokens")
        reply_id = f"{message_id}:ai"
        cached = self.contexts.get(session_id)
        if cached:
            if cached[-1].id == reply_id:  # a retry of a turn stored here
                return self._replay(cached)
            try:
                return await self._answer(session_id, cached, user, reply_id, cached.version)
            except StaleContext:  # another worker answered meanwhile: read again
                self.stale += 1
        stored = await self.memory.aget_messages(session_id)
        if stored and stored[-1].id == reply_id:  # a retry of a turn stored whole
            return self._replay(stored)
        return await self._answer(session_id, stored, user, reply_id, None)

    def _replay(self, stored: list[BaseMessage]) -> TurnResult:
        context = stored[:-1]
        return TurnResult(
            reply=str(stored[-1].content),
            context=context,
            context_tokens=self.counts.messages(context),
            compressed=False,
            replayed=True,
        )

    async def _answer(
        self,
        session_id: str,
        stored: list[BaseMessage],
        user: HumanMessage,
        reply_id: str,
        expected: str | None,
    ) -> TurnResult:
        """Answer from ``stored`` and store the turn with the next context, in one
        transaction (``expected``: the version the session must still be at)."""
        context = [*stored, user]
        answer = await self.model.ainvoke(context)
        reply = AIMessage(answer.content, id=reply_id)
        before = self.compressions[session_id]
        self.contexts.pop(session_id, None)
        try:
            # From a kept context, a turn stored meanwhile (a retry whose first answer
            # was lost) moved the session past ``expected``: StaleContext, and the
            # read below finds it stored. Skipping its ids instead would pass the
            # check and answer it anew.
            following = await self.memory.aadd_and_get_messages(
                session_id,
                [user, reply],
                skip_existing=expected is None,
                expected_version=expected,
            )
        except ContextReadFailed:  # the turn is stored; the next one reads
            pass
        else:
            self.contexts[session_id] = following
            if len(self.contexts) > self.CACHED_CONVERSATIONS:
                self.contexts.popitem(last=False)
        return TurnResult(
            reply=str(reply.content),
            context=context,
            context_tokens=self.counts.messages(context),
            compressed=self.compressions[session_id] > before,
        )


class LangGraphBackend:
    """The reference: an agent with ``SummarizationMiddleware`` and ``AsyncPostgresSaver``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.counts = MessageCounts()
        self.compressions: Counter[str] = Counter()
        self._pool: Any = None
        self.agent: Any = None

    def _count(self, messages: Iterable[MessageLikeRepresentation]) -> int:
        # tiermem's counting rule, so that both backends measure the budget alike.
        return self.counts.messages(convert_to_messages(messages))

    def _conninfo(self) -> str:
        # psycopg takes a libpq URL: SQLAlchemy's driver suffix is dropped.
        return self.settings.url.replace("postgresql+psycopg://", "postgresql://", 1)

    def prepare(self) -> None:
        """Create the checkpointer's tables."""
        asyncio.run(self._setup())

    async def _setup(self) -> None:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(self._conninfo()) as saver:
            await saver.setup()

    async def start(self) -> None:
        """Open the connection pool and build the agent."""
        from langchain.agents import create_agent
        from langchain.agents.middleware import SummarizationMiddleware
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.config import get_config
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        compressions = self.compressions

        class CountingSummarization(SummarizationMiddleware):
            """Counts, per thread, the turns that summarized."""

            async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
                """Summarize as the parent does, and count it."""
                update = await super().abefore_model(state, runtime)
                if update is not None:
                    compressions[get_config()["configurable"]["thread_id"]] += 1
                return update

        self._pool = AsyncConnectionPool(
            self._conninfo(),
            max_size=10,
            open=False,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        )
        await self._pool.open()
        saver = AsyncPostgresSaver(self._pool)
        middleware = CountingSummarization(
            chat_model(),
            trigger=("tokens", self.settings.max_tokens),
            keep=("messages", KEEP_MESSAGES),
            token_counter=self._count,
        )
        self.agent = create_agent(chat_model(), [], middleware=[middleware], checkpointer=saver)

    async def stop(self) -> None:
        """Close the connection pool."""
        if self._pool is not None:
            await self._pool.close()

    async def turn(self, session_id: str, message_id: str, text: str) -> TurnResult:
        """One agent run on the conversation's thread."""
        thread = f"{self.settings.project}:{session_id}"
        before = self.compressions[thread]
        user = HumanMessage(text, id=f"{message_id}:user")
        config = {"configurable": {"thread_id": thread}}
        state = await self.agent.ainvoke({"messages": [user]}, config)
        messages: list[BaseMessage] = state["messages"]
        context = messages[:-1]
        return TurnResult(
            reply=str(messages[-1].content),
            context=context,
            context_tokens=self.counts.messages(context),
            compressed=self.compressions[thread] > before,
        )


class NoMemoryBackend:
    """No memory at all: the model sees only the new message and nothing is stored.
    What serving and the model cost alone (the load benchmark's floor)."""

    def __init__(self, settings: Settings) -> None:
        self.model = chat_model()
        self.counts = MessageCounts()

    def prepare(self) -> None:
        """Nothing to create."""

    async def start(self) -> None:
        """Nothing to open."""

    async def stop(self) -> None:
        """Nothing to close."""

    async def turn(self, session_id: str, message_id: str, text: str) -> TurnResult:
        """Answer the message alone."""
        context: list[BaseMessage] = [HumanMessage(text, id=f"{message_id}:user")]
        answer = await self.model.ainvoke(context)
        return TurnResult(
            reply=str(answer.content),
            context=context,
            context_tokens=self.counts.messages(context),
            compressed=False,
        )


Backend = TiermemBackend | LangGraphBackend | NoMemoryBackend
BACKENDS: dict[str, Callable[[Settings], Backend]] = {
    "tiermem": TiermemBackend,
    "langgraph": LangGraphBackend,
    "none": NoMemoryBackend,
}


def make_backend(settings: Settings) -> Backend:
    """The backend ``settings`` names."""
    factory = BACKENDS.get(settings.backend)
    if factory is None:
        raise ValueError(f"unknown backend {settings.backend!r}: use one of {sorted(BACKENDS)}")
    return factory(settings)


def _text(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value)


def _bad_request(reason: str) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=400)


def create_app(settings: Settings | None = None, backend: Backend | None = None) -> Starlette:
    """The ASGI app (uvicorn calls it with no argument: settings from the environment).

    Args:
        settings: what to build; default :meth:`Settings.from_env`.
        backend: an already built backend (the pre-forking launcher builds it first).
    """
    settings = settings or Settings.from_env()
    chat = backend or make_backend(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if not settings.prepared:
            await asyncio.to_thread(chat.prepare)
        await chat.start()
        try:
            yield
        finally:
            await chat.stop()

    async def post_chat(request: Request) -> JSONResponse:
        body = await request.json()
        if not isinstance(body, dict):
            return _bad_request("expected a JSON object")
        session_id, text = body.get("session_id"), body.get("message")
        message_id = body.get("message_id") or os.urandom(8).hex()
        if not (_text(session_id) and _text(text) and _text(message_id)):
            return _bad_request("session_id, message (and message_id) must be non-empty strings")
        try:
            result = await chat.turn(session_id, message_id, text)
        except MessageTooLong as error:
            return JSONResponse({"error": str(error)}, status_code=413)
        return JSONResponse(
            {
                "session_id": session_id,
                "message_id": message_id,
                "reply": result.reply,
                "context": [{"type": m.type, "content": m.content} for m in result.context],
                "context_tokens": result.context_tokens,
                "max_tokens": settings.max_tokens,
                "compressed": result.compressed,
                "replayed": result.replayed,
                "worker": os.getpid(),
            }
        )

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "backend": settings.backend, "worker": os.getpid()})

    routes = [Route("/chat", post_chat, methods=["POST"]), Route("/health", health)]
    return Starlette(routes=routes, lifespan=lifespan)


def serve(settings: Settings, host: str, port: int, workers: int, preload: bool) -> None:
    """Serve with ``workers`` processes until SIGINT or SIGTERM."""
    import uvicorn

    make_backend(settings).prepare()  # once, before any worker starts
    settings = replace(settings, prepared=True)
    if not preload:
        os.environ.update(settings.to_env())
        uvicorn.run(
            "chat_service:create_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level="warning",
            access_log=False,
        )
        return
    backend = make_backend(settings)
    if isinstance(backend, TiermemBackend):
        backend.prepare()  # the parent really uses its engine before forking
    app = create_app(settings, backend)
    sock = socket.create_server((host, port), backlog=2048)
    _prefork(app, sock, workers)


def _prefork(app: Starlette, sock: socket.socket, workers: int) -> None:
    """Fork ``workers`` servers of ``app`` on ``sock``; start a new one when one dies."""
    import uvicorn

    def child() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        config = uvicorn.Config(app, log_level="warning", access_log=False)
        uvicorn.Server(config).run(sockets=[sock])
        os._exit(0)

    def start() -> int:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            child()
        return pid

    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    pids = {start() for _ in range(workers)}
    while not stopping:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid and pid in pids:
            pids.discard(pid)
            print(f"worker {pid} died; starting another", file=sys.stderr, flush=True)
            pids.add(start())
        elif not pid:
            time.sleep(0.2)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


async def demo(settings: Settings, turns: int) -> None:
    """Play ``turns`` turns of one conversation through the app, in this process."""
    import httpx

    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://chat") as client,
    ):
        for turn in range(turns):
            message = f"Turn {turn}: my parcel {1000 + turn} is late, where is it now?"
            response = await client.post(
                "/chat", json={"session_id": "demo", "message": message, "message_id": f"m{turn}"}
            )
            answer = response.raise_for_status().json()
            mark = " (compressed)" if answer["compressed"] else ""
            print(
                f"turn {turn}: {len(answer['context'])} messages, "
                f"{answer['context_tokens']}/{answer['max_tokens']} tokens{mark}"
            )


def _record(event: ChangeEvent) -> dict[str, Any]:
    """The log line of one event: where and what it is, when it was made and received."""
    payload = event.payload
    return {
        "position": event.position,
        "kind": event.kind,
        "session_id": event.session_id,
        "entry_id": payload.get("entry_id"),
        "seq": payload.get("seq"),
        "created_at": event.created_at.isoformat(),
        "received_at": datetime.now(UTC).isoformat(),
    }


async def subscribe(
    settings: Settings,
    consumer: str,
    out: TextIO,
    *,
    idle_timeout: float | None = None,
    ack_every: float = 0.25,
) -> int:
    """Follow the project's change feed as ``consumer``, writing a JSON line per event.

    Events are acknowledged after they are written, every ``ack_every`` seconds and
    when the follower stops (cancelled, or ``idle_timeout`` seconds without an
    event): a follower killed in between gets the unacknowledged ones again when
    it comes back under the same name (at least once). Returns the events written.
    """
    memory = ConversationMemory(settings.url, project=settings.project)
    feed = memory.feed
    written, handled, acked = 0, None, None
    since = time.monotonic()
    try:
        async for event in feed.afollow(consumer, idle_timeout=idle_timeout):
            out.write(json.dumps(_record(event)) + "\n")
            out.flush()
            written, handled = written + 1, event
            if time.monotonic() - since >= ack_every:
                await feed.aack(consumer, event)
                acked, since = event, time.monotonic()
    finally:
        if handled is not None and handled is not acked:
            await feed.aack(consumer, handled)
        await memory.aclose()
    return written


async def _subscribe_until_stopped(settings: Settings, consumer: str, log: str) -> None:
    """:func:`subscribe` until SIGINT or SIGTERM, which acknowledge what was written."""
    with contextlib.ExitStack() as stack:
        out = sys.stdout if log == "-" else stack.enter_context(open(log, "a", encoding="utf-8"))
        task = asyncio.ensure_future(subscribe(settings, consumer, out))
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "command", nargs="?", default="serve", choices=["serve", "demo", "subscriber"]
    )
    parser.add_argument("--url", default=os.environ.get(ENV_PREFIX + "URL", DEFAULT_URL))
    parser.add_argument("--backend", default="tiermem", choices=sorted(BACKENDS))
    parser.add_argument("--project", default="chat", help="tiermem project / thread prefix")
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--preload", action="store_true", help="build the app, then fork")
    parser.add_argument("--turns", type=int, default=12, help="turns of the demo")
    parser.add_argument("--consumer", default="chat-subscriber", help="the subscriber's name")
    parser.add_argument("--log", default="-", help="the subscriber's JSON-lines file (-: stdout)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Serve, play the demo, or follow the change feed."""
    args = parse_args(argv)
    settings = Settings(
        url=args.url, backend=args.backend, project=args.project, max_tokens=args.max_tokens
    )
    if args.command == "demo":
        asyncio.run(demo(settings, args.turns))
        return
    if args.command == "subscriber":
        asyncio.run(_subscribe_until_stopped(settings, args.consumer, args.log))
        return
    serve(settings, args.host, args.port, args.workers, args.preload)


if __name__ == "__main__":
    main()
