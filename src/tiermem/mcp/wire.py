"""Answers to requests the MCP SDK cannot read.

The SDK drops a line (stdio) or answers ``id: null`` (HTTP) when a message does
not parse: JSON nested deeper than its parser's limit, a string holding a lone
surrogate escape (``"\\ud800"``), or valid JSON that is not a JSON-RPC message.
A client that sent a request then waits forever for its answer. Here such a
message's ``id`` and ``method`` are found by a scan of its top-level members
(which never recurses, so no depth defeats it), and a request gets a JSON-RPC
error carrying its id; a notification or a response gets nothing, as JSON-RPC
wants.
"""

from __future__ import annotations

import json
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

__all__ = ["error_for_text", "error_for_validation", "request_id"]

_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


def _skip_whitespace(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


def _skip_value(text: str, index: int) -> int:
    """The index after the JSON value at ``index`` (objects and arrays by counting
    brackets, so any depth is skipped without recursion)."""
    if text[index : index + 1] not in ("{", "["):
        return int(_DECODER.raw_decode(text, index)[1])
    depth = 0
    while index < len(text):
        char = text[index]
        if char == '"':
            index = scanstring(text, index + 1, False)[1]
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    raise ValueError("unterminated JSON value")


def _top_level(text: str) -> dict[str, Any]:
    """The scalar top-level members ``id`` and ``method`` of the JSON object in
    ``text``, as far as it can be read."""
    found: dict[str, Any] = {}
    index = _skip_whitespace(text, 0)
    if text[index : index + 1] != "{":
        return found
    index += 1
    try:
        while True:
            index = _skip_whitespace(text, index)
            if text[index : index + 1] != '"':
                return found
            key, index = scanstring(text, index + 1, False)
            index = _skip_whitespace(text, index)
            if text[index : index + 1] != ":":
                return found
            index = _skip_whitespace(text, index + 1)
            if key in ("id", "method") and text[index : index + 1] not in ("{", "["):
                found[key], index = _DECODER.raw_decode(text, index)
            else:
                index = _skip_value(text, index)
            index = _skip_whitespace(text, index)
            if text[index : index + 1] != ",":
                return found
            index += 1
    except ValueError:
        return found


def request_id(text: str) -> int | str | None:
    """The id of the request in ``text`` (a JSON-RPC message that may not parse as a
    whole), or ``None`` when it names no method and id (a notification, a response,
    or not an object at all)."""
    members = _top_level(text)
    return _id_of(members)


def _id_of(members: dict[str, Any]) -> int | str | None:
    ident = members.get("id")
    if not isinstance(members.get("method"), str):
        return None
    if isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool)):
        return ident
    return None


def _reason(parser_error: str) -> str:
    """The parser's complaint in words a client's author acts on."""
    if "recursion limit" in parser_error:
        return f"JSON nested too deeply ({parser_error})"
    if "hex escape" in parser_error or "surrogate" in parser_error:
        return f"a lone surrogate escape such as \\ud800 is not text ({parser_error})"
    return parser_error


def error_for_text(text: str, parser_error: str) -> JSONRPCError | None:
    """The error answering the unparsable message ``text``, or ``None`` when it is no
    request (nothing to answer)."""
    ident = request_id(text)
    if ident is None:
        return None
    message = f"InvalidArgument: unreadable request: {_reason(parser_error)}"
    return JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(code=PARSE_ERROR, message=message))


def error_for_validation(error: ValidationError) -> JSONRPCError | None:
    """The error answering a message the SDK failed to validate (its line did not
    parse, or parsed to something that is no JSON-RPC message), or ``None`` when
    it is no request."""
    for detail in error.errors():
        given = detail.get("input")
        if detail["type"] == "json_invalid" and isinstance(given, str | bytes):
            text = given if isinstance(given, str) else given.decode("utf-8", "replace")
            reason = str(detail.get("ctx", {}).get("error", detail["msg"]))
            return error_for_text(text, reason)
    whole = next(
        (
            detail["input"]
            for detail in error.errors()
            if isinstance(detail.get("input"), dict) and "jsonrpc" in detail["input"]
        ),
        None,
    )
    ident = None if whole is None else _id_of(whole)
    if ident is None:
        return None
    details = error.errors()
    as_request = [d for d in details if d["loc"][:1] == ("JSONRPCRequest",)] or details
    where = ".".join(str(part) for part in as_request[0]["loc"][1:]) or "message"
    message = f"InvalidArgument: not a JSON-RPC request: {where}: {as_request[0]['msg']}"
    return JSONRPCError(
        jsonrpc="2.0", id=ident, error=ErrorData(code=INVALID_REQUEST, message=message)
    )
