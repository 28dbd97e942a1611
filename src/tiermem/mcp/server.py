"""The tools of ``tiermem mcp``, on the official MCP Python SDK (the ``mcp`` extra).

:func:`build_server` makes an :class:`~mcp.server.mcpserver.MCPServer` whose tools
call the public async API of :class:`~tiermem.ConversationMemory` and of its
layers (``mem.layers(scope)``). Every tool has a JSON schema for its input
(validated before it runs) and one for its output; a result carries both the
structured content and a readable text. A :class:`~tiermem.errors.TiermemError`
(or a database failure) becomes a tool error (``isError``) whose text is
``<ErrorClass>: <message>``; the server keeps serving.

Safety:

* ``read_only`` serves only the reading tools (:data:`READING_TOOLS`): no tool
  that adds, changes or deletes stored content. Reads still record accesses, as
  the Python API's do (that is how a session stays in a high tier), and a
  read-only server never creates tiermem's tables: a call on a database without
  them is a tool error.
* Every tool takes an optional ``project``; a project other than the server's
  is refused unless the server was built with ``all_projects``.
* ``prune_expired_contexts`` and ``compact_layer`` carry MCP's destructive
  annotation; pruning takes ``dry_run``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from ..errors import InvalidArgument
from ..layer_models import KnowledgeEntry, LayerItem, Rule
from ..maintenance import DEFAULT_LOAD_LIMIT
from ..memory import ConversationMemory
from ..types import MemoryEntry, TierStats
from .access import MemoryTools, peek_contexts, to_message, tool_error
from .results import (
    AddMessageOut,
    AddRuleOut,
    AppendOut,
    CompactOut,
    ContextOut,
    ExpandOut,
    LayerHitOut,
    LayerSearchOut,
    LayerStatsOut,
    LearnOut,
    LoadContextOut,
    LoadedOut,
    MemoryStatsOut,
    PruneOut,
    RecalculateOut,
    RecallOut,
    RulesOut,
    SearchHitOut,
    SearchOut,
    entry_line,
    entry_out,
    fact_out,
    item_out,
    memory_stats,
    plural,
    rule_out,
)

__all__ = [
    "READING_TOOLS",
    "WRITING_TOOLS",
    "MemoryTools",
    "build_server",
    "tool_error",
]

T = TypeVar("T")

#: Tools a read-only server serves: none adds, changes or deletes stored content.
READING_TOOLS = (
    "get_memory_stats",
    "load_context",
    "get_context",
    "search_memory",
    "expand_summary",
    "search_layer",
    "recall",
    "match_rules",
    "layer_stats",
)
#: Tools only a read-write server serves.
WRITING_TOOLS = (
    "recalculate_memory_tiers",
    "prune_expired_contexts",
    "add_message",
    "append_episode",
    "learn",
    "add_rule",
    "compact_layer",
)
#: The most sessions or hits one call returns.
MAX_RESULTS = 1000

_READING = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITING = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
_REFRESHING = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_DELETING = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
_FOLDING = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)


def argument_problem(tool: str, error: ValidationError) -> InvalidArgument:
    """The arguments' validation error in tiermem's words: each field, what is wrong
    and the value given (shortened), without pydantic's type codes and links."""
    problems = []
    for detail in error.errors():
        where = ".".join(str(part) for part in detail["loc"]) or "arguments"
        problem = f"{where}: {detail['msg']}"
        if detail["type"] != "missing":
            given = repr(detail.get("input"))
            problem += f", got {given if len(given) <= 60 else given[:57] + '...'}"
        problems.append(problem)
    return InvalidArgument(f"bad arguments for {tool}: " + "; ".join(problems))


class _Server(MCPServer[Any]):
    """The SDK's server, with argument errors reported as tiermem's errors are
    (``InvalidArgument: ...``) instead of pydantic's text."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if isinstance(error.__cause__, ValidationError):
                return tool_error(argument_problem(name, error.__cause__))
            raise


# ---------------------------------------------------------------- input types

Project = Annotated[
    str | None,
    Field(
        description="Project (namespace); default: the server's. Another project is "
        "refused unless the server runs with --all-projects."
    ),
]
SessionId = Annotated[str, Field(description="Session id.")]
Scope = Annotated[str, Field(description="Layer scope inside the project.")]
Layer = Literal["working", "episodic", "semantic", "procedural"]
Metadata = Annotated[dict[str, Any] | None, Field(description="JSON object stored with the item.")]


def build_server(tools: MemoryTools, *, name: str = "tiermem") -> MCPServer[Any]:
    """An MCP server whose tools operate on ``tools``' memories.

    Args:
        tools: the memories, and the read-only and all-projects switches.
        name: the server's name in the MCP handshake.
    """
    server: MCPServer[Any] = _Server(
        name,
        instructions=(
            "Tiered conversation memory: sessions of messages (add_message, get_context, "
            "search_memory, expand_summary), access tiers (load_context, get_memory_stats, "
            "recalculate_memory_tiers, prune_expired_contexts) and four layers per scope "
            "(working, episodic, semantic, procedural)."
        ),
        log_level="WARNING",
    )
    wanted = set(READING_TOOLS) | (set() if tools.read_only else set(WRITING_TOOLS))

    def tool(annotations: ToolAnnotations) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            if fn.__name__ in wanted:
                description = inspect.cleandoc(fn.__doc__ or "")
                server.add_tool(
                    fn, description=description, annotations=annotations, structured_output=True
                )
            return fn

        return register

    # ------------------------------------------------------------ access tiers

    @tool(_READING)
    async def get_memory_stats(
        project: Project = None,
    ) -> Annotated[CallToolResult, MemoryStatsOut]:
        """How a project's sessions and layer items spread over the access tiers
        (ACTIVE, RECENT, ARCHIVED, EXPIRED), with totals and health hints. Records no
        access."""

        def present(memory: ConversationMemory, tiers: TierStats) -> tuple[BaseModel, str]:
            out = memory_stats(memory.project, tiers)
            lines = [
                f"project {out.project!r}: {plural(out.total, 'session')} (active "
                f"{out.active}, recent {out.recent}, archived {out.archived}, expired "
                f"{out.expired}); {plural(out.items, 'layer item')} (active "
                f"{out.active_items}, recent {out.recent_items}, archived "
                f"{out.archived_items}, expired {out.expired_items})",
                *(f"! {hint}" for hint in out.hints),
            ]
            return out, "\n".join(lines)

        return await tools.call(project, lambda m: m.aget_tier_stats(), present)

    @tool(_REFRESHING)
    async def recalculate_memory_tiers(
        project: Project = None,
    ) -> Annotated[CallToolResult, RecalculateOut]:
        """Store the tier every session and layer item of a project has by its last
        access; returns the number whose stored tier changed."""

        def present(memory: ConversationMemory, count: int) -> tuple[BaseModel, str]:
            out = RecalculateOut(project=memory.project, updated=count)
            what = plural(count, "session or layer item", "sessions and layer items")
            return out, f"{what} of {out.project!r} changed tier"

        return await tools.call(project, lambda m: m.arecalculate_tiers(), present)

    @tool(_DELETING)
    async def prune_expired_contexts(
        limit: Annotated[
            int | None,
            Field(ge=0, description="Delete at most this many (default: every expired one)."),
        ] = None,
        dry_run: Annotated[bool, Field(description="Only count what would be deleted.")] = False,
        project: Project = None,
    ) -> Annotated[CallToolResult, PruneOut]:
        """Delete the EXPIRED sessions (with their entries and summaries), then the
        expired layer items, oldest first; nothing that is not expired is ever
        deleted. Respects the limit; running it again deletes nothing new."""

        def present(memory: ConversationMemory, count: int) -> tuple[BaseModel, str]:
            out = PruneOut(project=memory.project, deleted=count, dry_run=dry_run)
            verb = "would delete" if dry_run else "deleted"
            what = plural(
                count,
                "expired session, layer item or document",
                "expired sessions, layer items and documents",
            )
            return out, f"{verb} {what} of {out.project!r}"

        return await tools.call(
            project, lambda m: m.aprune_expired(limit=limit, dry_run=dry_run), present
        )

    @tool(_READING)
    async def load_context(
        limit: Annotated[
            int, Field(ge=0, le=MAX_RESULTS, description="Load at most this many sessions.")
        ] = DEFAULT_LOAD_LIMIT,
        project: Project = None,
    ) -> Annotated[CallToolResult, LoadContextOut]:
        """The sessions of a project, most relevant first (ACTIVE, then RECENT, then
        ARCHIVED; each tier most recently accessed first; EXPIRED never), each with
        its context (summaries and recent messages). Each load records an access, so
        a session used often stays in a high tier."""

        async def work(memory: ConversationMemory) -> tuple[Any, dict[str, str]]:
            loaded = await memory.aload_context(limit)
            ids = [item.session.session_id for item in loaded]
            return loaded, await asyncio.to_thread(peek_contexts, memory, ids)

        def present(
            memory: ConversationMemory, value: tuple[Any, dict[str, str]]
        ) -> tuple[BaseModel, str]:
            loaded, texts = value
            sessions = [
                LoadedOut(
                    session_id=item.session.session_id,
                    tier=item.tier.value,
                    last_accessed=item.session.last_accessed,
                    access_count=item.session.access_count,
                    total_entries=item.session.total_entries,
                    context_tokens=item.session.context_tokens,
                    context=texts.get(item.session.session_id, ""),
                )
                for item in loaded
            ]
            parts = [f"{plural(len(sessions), 'session')} of project {memory.project!r}"]
            parts += [f"## {s.session_id} ({s.tier})\n{s.context}" for s in sessions]
            return LoadContextOut(project=memory.project, sessions=sessions), "\n\n".join(parts)

        return await tools.call(project, work, present)

    # ------------------------------------------------------------ conversation

    @tool(_WRITING)
    async def add_message(
        session_id: SessionId,
        content: Annotated[str, Field(description="The message text.")],
        role: Literal["user", "assistant", "system"] = "user",
        metadata: Metadata = None,
        project: Project = None,
    ) -> Annotated[CallToolResult, AddMessageOut]:
        """Store a message in a session (created on its first message); may trigger
        the session's compression."""

        def present(memory: ConversationMemory, entry: MemoryEntry) -> tuple[BaseModel, str]:
            out = entry_out(entry)
            return AddMessageOut(entry=out), f"stored {entry_line(out)}"

        return await tools.call(
            project,
            lambda m: m.aadd_message(session_id, to_message(role, content), metadata=metadata),
            present,
        )

    @tool(_READING)
    async def get_context(
        session_id: SessionId, project: Project = None
    ) -> Annotated[CallToolResult, ContextOut]:
        """A session's context within its token budget: the summaries of older
        messages, then the recent messages. An access of the session."""

        def present(memory: ConversationMemory, text: str) -> tuple[BaseModel, str]:
            return ContextOut(session_id=session_id, context=text), text

        return await tools.call(project, lambda m: m.aget_context_for_llm(session_id), present)

    @tool(_READING)
    async def search_memory(
        query: Annotated[str, Field(description="Plain words; no syntax.")],
        session_id: Annotated[
            str | None, Field(description="Search only this session (default: every one).")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_RESULTS)] = 10,
        project: Project = None,
    ) -> Annotated[CallToolResult, SearchOut]:
        """Full-text search over a project's messages, compressed originals included,
        best first (text relevance, recency and tier boosts). Records no access."""

        def present(memory: ConversationMemory, hits: list[Any]) -> tuple[BaseModel, str]:
            out = [SearchHitOut(score=hit.score, entry=entry_out(hit.entry)) for hit in hits]
            lines = [plural(len(out), "hit")] + [
                f"{hit.score:.3f} {entry_line(hit.entry)}" for hit in out
            ]
            return SearchOut(hits=out), "\n".join(lines)

        return await tools.call(project, lambda m: m.asearch(query, session_id, limit), present)

    @tool(_READING)
    async def expand_summary(
        summary_id: Annotated[int, Field(ge=1, description="A summary's id.")],
        project: Project = None,
    ) -> Annotated[CallToolResult, ExpandOut]:
        """The original messages a summary covers, in order. Records no access."""

        def present(
            memory: ConversationMemory, entries: list[MemoryEntry]
        ) -> tuple[BaseModel, str]:
            out = [entry_out(entry) for entry in entries]
            lines = [f"summary {summary_id} covers {plural(len(out), 'entry', 'entries')}"]
            lines += [entry_line(entry) for entry in out]
            return ExpandOut(summary_id=summary_id, entries=out), "\n".join(lines)

        return await tools.call(project, lambda m: m.aexpand_summary(summary_id), present)

    # ------------------------------------------------------------ layers

    @tool(_WRITING)
    async def append_episode(
        content: Annotated[str, Field(description="What happened.")],
        metadata: Metadata = None,
        scope: Scope = "default",
        project: Project = None,
    ) -> Annotated[CallToolResult, AppendOut]:
        """Store an episode in the episodic layer of a scope."""

        def present(memory: ConversationMemory, item: LayerItem) -> tuple[BaseModel, str]:
            return AppendOut(item=item_out(item)), f"stored episode {item.id}: {item.content}"

        return await tools.call(
            project,
            lambda m: m.layers(scope).aappend("episodic", content, metadata),
            present,
        )

    @tool(_READING)
    async def search_layer(
        layer: Layer,
        query: Annotated[str, Field(description="Plain words; no syntax.")],
        limit: Annotated[int, Field(ge=1, le=MAX_RESULTS)] = 10,
        scope: Scope = "default",
        project: Project = None,
    ) -> Annotated[CallToolResult, LayerSearchOut]:
        """Items of a layer matching any word of the query, best first; each hit is
        an access. Expired items are never returned."""

        def present(memory: ConversationMemory, hits: list[Any]) -> tuple[BaseModel, str]:
            out = [LayerHitOut(score=hit.score, item=item_out(hit.item)) for hit in hits]
            lines = [f"{plural(len(out), 'hit')} in {layer}"]
            lines += [f"{hit.score:.3f} [{hit.item.id}] {hit.item.content}" for hit in out]
            return LayerSearchOut(hits=out), "\n".join(lines)

        return await tools.call(
            project, lambda m: m.layers(scope).asearch(layer, query, limit), present
        )

    @tool(_WRITING)
    async def learn(
        key: Annotated[str, Field(description="The fact's name.")],
        value: Annotated[str, Field(description="The fact.")],
        metadata: Metadata = None,
        scope: Scope = "default",
        project: Project = None,
    ) -> Annotated[CallToolResult, LearnOut]:
        """Store a semantic fact under a key, replacing an earlier value."""

        def present(memory: ConversationMemory, fact: KnowledgeEntry) -> tuple[BaseModel, str]:
            return LearnOut(fact=fact_out(fact)), f"learned {fact.key}: {fact.value}"

        return await tools.call(
            project, lambda m: m.layers(scope).alearn(key, value, metadata), present
        )

    @tool(_READING)
    async def recall(
        key: Annotated[str, Field(description="The fact's name.")],
        scope: Scope = "default",
        project: Project = None,
    ) -> Annotated[CallToolResult, RecallOut]:
        """The semantic fact stored under a key (an access), if there is one and it
        is not expired."""

        def present(
            memory: ConversationMemory, fact: KnowledgeEntry | None
        ) -> tuple[BaseModel, str]:
            if fact is None:
                return RecallOut(found=False, fact=None), f"no fact under {key!r}"
            return RecallOut(found=True, fact=fact_out(fact)), f"{fact.key}: {fact.value}"

        return await tools.call(project, lambda m: m.layers(scope).arecall(key), present)

    @tool(_WRITING)
    async def add_rule(
        condition: Annotated[str, Field(description="When the rule applies.")],
        action: Annotated[str, Field(description="What to do then.")],
        metadata: Metadata = None,
        scope: Scope = "default",
        project: Project = None,
    ) -> Annotated[CallToolResult, AddRuleOut]:
        """Store a procedural rule: when the condition holds, do the action."""

        def present(memory: ConversationMemory, rule: Rule) -> tuple[BaseModel, str]:
            return AddRuleOut(
                rule=rule_out(rule)
            ), f"rule {rule.id}: when {rule.condition}: {rule.action}"

        return await tools.call(
            project, lambda m: m.layers(scope).aadd_rule(condition, action, metadata), present
        )

    @tool(_READING)
    async def match_rules(
        situation: Annotated[str, Field(description="The situation, in plain words.")],
        limit: Annotated[int, Field(ge=1, le=MAX_RESULTS)] = 5,
        scope: Scope = "default",
        project: Project = None,
    ) -> Annotated[CallToolResult, RulesOut]:
        """The procedural rules that best match a situation, best first, with their
        scores; each is an access."""

        def present(memory: ConversationMemory, rules: list[Rule]) -> tuple[BaseModel, str]:
            out = [rule_out(rule) for rule in rules]
            lines = [plural(len(out), "rule")]
            lines += [f"{r.score:.3f} when {r.condition}: {r.action}" for r in out]
            return RulesOut(rules=out), "\n".join(lines)

        return await tools.call(
            project, lambda m: m.layers(scope).amatch_rules(situation, limit), present
        )

    @tool(_FOLDING)
    async def compact_layer(
        layer: Layer,
        keep_last: Annotated[int, Field(ge=0, description="Items kept as they are.")] = 10,
        summarize_older: Annotated[
            bool, Field(description="Fold the older items into one summary (else drop them).")
        ] = True,
        scope: Scope = "default",
        project: Project = None,
    ) -> Annotated[CallToolResult, CompactOut]:
        """Keep the newest items of a layer and fold the older ones into a summary
        item (working, episodic) or drop them (procedural, or summarize_older=false);
        semantic facts are left alone."""

        def present(memory: ConversationMemory, done: Any) -> tuple[BaseModel, str]:
            summary = None if done.summary is None else item_out(done.summary)
            out = CompactOut(
                layer=done.type.value, removed=done.removed, kept=done.kept, summary=summary
            )
            return out, f"{layer}: removed {out.removed}, kept {out.kept}"

        return await tools.call(
            project,
            lambda m: m.layers(scope).acompact(layer, keep_last, summarize_older),
            present,
        )

    @tool(_READING)
    async def layer_stats(
        scope: Scope = "default", project: Project = None
    ) -> Annotated[CallToolResult, LayerStatsOut]:
        """Sizes of a scope's layers (working tokens, item counts, storage bytes)."""

        def present(memory: ConversationMemory, stats: Any) -> tuple[BaseModel, str]:
            out = LayerStatsOut(
                scope=scope,
                working_memory_tokens=stats.working_memory_tokens,
                episodic_entry_count=stats.episodic_entry_count,
                semantic_entry_count=stats.semantic_entry_count,
                procedural_rule_count=stats.procedural_rule_count,
                total_storage_bytes=stats.total_storage_bytes,
            )
            return out, (
                f"scope {scope!r}: {plural(out.working_memory_tokens, 'working token')}, "
                f"{plural(out.episodic_entry_count, 'episode')}, "
                f"{plural(out.semantic_entry_count, 'fact')}, "
                f"{plural(out.procedural_rule_count, 'rule')}, "
                f"{plural(out.total_storage_bytes, 'byte')}"
            )

        return await tools.call(project, lambda m: m.layers(scope).aget_stats(), present)

    return server
