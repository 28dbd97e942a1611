"""``tiermem mcp``: serve the memory's tools to MCP clients (the ``mcp`` extra).

Everything a long-running server needs is a flag or an environment variable: the
chat model that writes summaries (``--chat-model`` / ``TIERMEM_CHAT_MODEL``,
``provider:model`` through LangChain's ``init_chat_model``), the budgets of
:class:`~tiermem.MemoryConfig` that shape a context, read-only mode, and over
HTTP the bearer token.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .cli_common import ProjectOption, UrlOption, fail, reported
from .errors import InvalidArgument
from .memory import ConversationMemory
from .types import MemoryConfig

__all__ = ["mcp_command", "server_memory"]


def server_memory(
    url: str | None,
    project: str,
    *,
    chat_model: str | None = None,
    limits: dict[str, Any] | None = None,
) -> ConversationMemory:
    """The memory a server serves: its budgets are ``MemoryConfig``'s defaults with
    ``limits`` (those not ``None``) applied, its summarizer ``chat_model``.

    Raises:
        InvalidArgument: a limit out of range, or a chat model that cannot be made.
    """
    changes = {name: value for name, value in (limits or {}).items() if value is not None}
    config = MemoryConfig(**changes)
    # A provider:model name is made into a chat model by the memory itself.
    return ConversationMemory(url, project=project, config=config, summarizer=chat_model)


def _limit(flag: str, env: str, text: str) -> Any:
    return typer.Option(flag, envvar=env, help=text)


def mcp_command(
    url: UrlOption = None,
    project: ProjectOption = "default",
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio "
            "(a loopback HOST unless --allow-remote).",
        ),
    ] = None,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only",
            help="Serve only the reading tools; never create the database or its tables.",
        ),
    ] = False,
    all_projects: Annotated[
        bool,
        typer.Option("--all-projects", help="Let tools name any project, not only --project."),
    ] = False,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Let --http listen on a non-loopback address (needs --token).",
        ),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="TIERMEM_MCP_TOKEN",
            help="Over --http, refuse (401) every request without the header "
            "'Authorization: Bearer TOKEN'.",
        ),
    ] = None,
    chat_model: Annotated[
        str | None,
        typer.Option(
            "--chat-model",
            envvar="TIERMEM_CHAT_MODEL",
            metavar="PROVIDER:MODEL",
            help="Write summaries with this chat model (LangChain's init_chat_model, "
            "e.g. openai:gpt-4o-mini); default: the heuristic summarizer.",
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        _limit("--max-tokens", "TIERMEM_MAX_TOKENS", "Compress a session past this many tokens."),
    ] = None,
    max_entries: Annotated[
        int | None,
        _limit("--max-entries", "TIERMEM_MAX_ENTRIES", "Compress past this many active messages."),
    ] = None,
    recent_window: Annotated[
        int | None,
        _limit("--recent-window", "TIERMEM_RECENT_WINDOW", "Never compress the newest N messages."),
    ] = None,
    summarizer_timeout: Annotated[
        float | None,
        _limit(
            "--summarizer-timeout",
            "TIERMEM_SUMMARIZER_TIMEOUT",
            "Give up a summarizer call after this many seconds.",
        ),
    ] = None,
) -> None:
    """Serve the memory to MCP clients (needs the mcp extra): over stdio by default,
    or streamable HTTP with --http. The budgets default to MemoryConfig's. Tools:
    get_memory_stats, recalculate_memory_tiers, prune_expired_contexts,
    load_context, add_message, get_context, search_memory, expand_summary,
    append_episode, search_layer, learn, recall, add_rule, match_rules,
    compact_layer, layer_stats. A tool's error is returned to the client as a tool
    error; the server keeps serving."""
    try:
        from .mcp import parse_http_address, serve
        from .mcp.http_guard import is_loopback_host
    except ModuleNotFoundError:
        fail("the mcp command needs the mcp extra: pip install 'tiermem[mcp]'")
    limits = {
        "max_tokens": max_tokens,
        "max_entries": max_entries,
        "recent_window": recent_window,
        "summarizer_timeout": summarizer_timeout,
    }
    with reported():
        address = None if http is None else parse_http_address(http, allow_remote=allow_remote)
        if address is not None and not is_loopback_host(address[0]) and not token:
            raise InvalidArgument(
                f"{address[0]} is not a loopback address: a server reachable from other "
                "hosts needs --token (or TIERMEM_MCP_TOKEN)"
            )
        if read_only:
            # A read-only memory refuses a missing SQLite file without connecting:
            # an unreachable database stays a tool error.
            ConversationMemory(url, read_only=True).close()
        memory = server_memory(url, project, chat_model=chat_model, limits=limits)
    serve(memory, read_only=read_only, all_projects=all_projects, http=address, token=token)
