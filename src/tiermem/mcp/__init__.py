"""tiermem as an MCP server (``tiermem mcp``; needs the ``mcp`` extra).

:func:`~tiermem.mcp.server.build_server` makes the server and its tools (their
results are the models of :mod:`tiermem.mcp.results`);
:func:`~tiermem.mcp.transport.serve` runs it over stdio or streamable HTTP.
"""

from __future__ import annotations

from .access import MemoryTools
from .server import READING_TOOLS, WRITING_TOOLS, build_server
from .transport import parse_http_address, serve

__all__ = [
    "READING_TOOLS",
    "WRITING_TOOLS",
    "MemoryTools",
    "build_server",
    "parse_http_address",
    "serve",
]
