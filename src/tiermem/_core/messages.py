"""Private helpers: message <-> stored JSON, entry types, text rendering, id rules."""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from pydantic_core import PydanticUndefined

from ..errors import EntryTooLarge, InvalidContent, InvalidSessionId
from ..types import EntryType
from .packing import pack, unpack

_SESSION_ID_MAX = 255
#: The longest message id stored (the ``message_id`` column is VARCHAR(255) on
#: PostgreSQL; SQLite gets the same limit so every store holds what the other does).
MESSAGE_ID_MAX = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: The key under which the summary message of get_messages carries its summary ids.
SUMMARY_MARKER = "tiermem_summary_ids"
#: Stored text starting with this Unicode noncharacter is a JSON string (see store_text).
_ESCAPED_TEXT = "\ufdd0"


def store_text(text: str) -> str:
    """``text`` as kept in a TEXT column: unchanged, unless it holds NUL (which
    PostgreSQL TEXT cannot store) or starts with the escape marker; such text is
    stored as the marker plus its JSON string, so every text round-trips exactly."""
    if "\x00" in text or text.startswith(_ESCAPED_TEXT):
        return _ESCAPED_TEXT + json.dumps(text)
    return text


def load_text(stored: str) -> str:
    """The text :func:`store_text` stored."""
    if stored.startswith(_ESCAPED_TEXT):
        return str(json.loads(stored[len(_ESCAPED_TEXT) :]))
    return stored


def validate_session_id(session_id: object, what: str = "session id") -> str:
    """Return ``session_id`` if it obeys the rule: a str of 1-255 characters,
    no control characters (NUL, newline, ...), no leading or trailing whitespace.
    ``what`` names the value in the error (projects follow the same rule).

    Raises:
        InvalidSessionId: otherwise.
    """
    if not isinstance(session_id, str):
        raise InvalidSessionId(f"{what} must be a str, got {type(session_id).__name__}")
    if not 1 <= len(session_id) <= _SESSION_ID_MAX:
        raise InvalidSessionId(f"{what} must have 1-{_SESSION_ID_MAX} characters")
    if _CONTROL.search(session_id) or session_id != session_id.strip():
        raise InvalidSessionId(f"{what} {session_id!r} has control characters or outer whitespace")
    _check_encodable(session_id, what, InvalidSessionId)
    return session_id


def _check_encodable(text: str, what: str, error: type[InvalidContent | InvalidSessionId]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(f"{what} is not valid Unicode (lone surrogate?)") from exc


def classify(message: BaseMessage) -> tuple[EntryType, str]:
    """The entry type and role of a message."""
    if isinstance(message, AIMessage):
        return (EntryType.TOOL_CALL if message.tool_calls else EntryType.MESSAGE), "assistant"
    if isinstance(message, ToolMessage):
        return EntryType.TOOL_RESULT, "tool"
    if isinstance(message, HumanMessage):
        return EntryType.MESSAGE, "user"
    if isinstance(message, SystemMessage):
        return EntryType.MESSAGE, "system"
    return EntryType.MESSAGE, message.type


#: The deepest nesting of lists and dicts accepted in a message or in metadata,
#: counting a message's fields (``content``, ``additional_kwargs``, ``tool_calls``,
#: ...) and the values of metadata as the first level (a tool call's ``args`` is
#: the third). Deeper values would exhaust the recursion of the JSON encoder and of
#: everything that reads them back.
MAX_NESTING = 100


_CONTAINERS = (dict, list, tuple)


def check_nesting(what: str, *levels: Iterable[Any]) -> None:
    """Refuse lists and dicts nested deeper than ``MAX_NESTING`` in ``levels``, each
    an iterable of first-level values; walked without recursion.

    Raises:
        InvalidContent: when they are nested deeper (or hold a cycle).
    """
    stack: list[tuple[Iterable[Any], int]] = [(level, 0) for level in levels]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise InvalidContent(f"{what} nests lists and dicts deeper than {MAX_NESTING} levels")
        for child in value.values() if isinstance(value, dict) else value:
            if isinstance(child, _CONTAINERS):
                stack.append((child, depth + 1))


#: One encoder for every call: ``json.dumps`` with options builds a new one each time,
#: which costs an append's two or three small documents about as much as encoding them.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def dumps(value: Any) -> str:
    """Strict JSON: NaN refused; NUL is escaped so PostgreSQL TEXT holds it."""
    return _ENCODER.encode(value)


def serialize(message: BaseMessage, *, max_chars: int) -> str:
    """The exact JSON of ``message`` (``message_to_dict``).

    Raises:
        InvalidContent: for values JSON cannot hold, invalid Unicode or nesting
            deeper than ``MAX_NESTING``.
        EntryTooLarge: above ``max_chars``.
    """
    if not isinstance(message, BaseMessage):
        raise InvalidContent(f"expected a LangChain BaseMessage, got {type(message).__name__}")
    check_nesting("message", message.__dict__.values(), (message.__pydantic_extra__ or {}).values())
    try:
        text = dumps(message_to_dict(message))
    except (TypeError, ValueError) as exc:
        raise InvalidContent(f"message is not JSON-serializable: {exc}") from exc
    _check_encodable(text, "message", InvalidContent)
    check_entry_size(text, "", max_chars)  # before its metadata is even serialized
    return text


#: An entry's message as its row keeps it: the JSON :func:`serialize` made or, for an
#: entry whose text is kept once (see :func:`hollow`), that JSON without the text
#: and the text (its ``content`` column, as :func:`load_text` reads it). The JSON is
#: packed (:mod:`tiermem._core.packing`) in rows stored since migration 0024; it is
#: unpacked only when parsed (a miss of the parse cache, which keys it as stored) or
#: given out whole (:func:`full_json`).
StoredMessage = str | tuple[str, str]
#: What starts a message's data in its JSON (``message_to_dict`` writes ``type``, then
#: ``data`` with ``content`` first). In a hollow JSON a number follows: ``0``, the
#: content is the whole text, or ``n``, its first ``n`` characters (an assistant
#: message whose text also renders its tool calls). No message's content is a number.
_HOLE_AT = ',"data":{"content":'
#: The hole is looked for within this many characters of the start (after the type).
_HOLE_WITHIN = 64


def hollow(message_json: str, message: BaseMessage, text: str) -> str:
    """What an entry's row keeps of ``message_json`` beside ``text``, its ``content``
    column: when the message's content is that text, or begins it, the JSON with a
    number in its place, so that the row holds the text once (:func:`stored_message`
    and :func:`full_json` put it back); any other JSON unchanged. Either way packed
    (:func:`pack`)."""
    return pack(_hollow(message_json, message, text))


def _hollow(message_json: str, message: BaseMessage, text: str) -> str:
    content = message.content
    if type(content) is not str or not content or not text.startswith(content):
        return message_json
    head = '{"type":' + dumps(message.type) + _HOLE_AT
    if len(head) > _HOLE_WITHIN:  # a type too long for the hole to be found
        return message_json
    body = dumps(content)
    end = len(head) + len(body)
    if not message_json.startswith(head) or not message_json.startswith(body, len(head)):
        return message_json
    if message_json[end : end + 1] != ",":
        return message_json
    return f"{head}{0 if content == text else len(content)}{message_json[end:]}"


def _hole(stored: str) -> tuple[int, int, int] | None:
    """Where the number of a hollow JSON starts and ends, and the number; ``None``
    for a whole JSON."""
    at = stored.find(_HOLE_AT, 0, _HOLE_WITHIN)
    if at < 0:
        return None
    start = at + len(_HOLE_AT)
    if stored.startswith("0", start):  # the common case: the whole text (a length
        return start, start + 1, 0  # never starts with 0; a packed run may follow)
    end, size = start, len(stored)
    while end < size and "0" <= stored[end] <= "9":
        end += 1
    return None if end == start else (start, end, int(stored[start:end]))


def stored_message(stored: str, text: str) -> StoredMessage:
    """The message of an entry's row: ``stored`` its ``message`` column, ``text`` its
    ``content`` column (as stored)."""
    return stored if _hole(stored) is None else (stored, load_text(text))


def _content(shell: str, text: str) -> tuple[int, int, str]:
    hole = _hole(shell)
    if hole is None:
        raise ValueError("not a hollow message JSON")
    start, end, length = hole
    return start, end, text[:length] if length else text


def full_json(stored: StoredMessage) -> str:
    """The JSON :func:`serialize` made of the message (its text put back, unpacked)."""
    if isinstance(stored, str):
        return unpack(stored)
    start, end, content = _content(*stored)
    return unpack(stored[0][:start] + dumps(content) + stored[0][end:])


def _loads(stored: StoredMessage) -> dict[str, Any]:
    """The parsed JSON of a stored message, its text put back."""
    if isinstance(stored, str):
        parsed: dict[str, Any] = json.loads(unpack(stored))
        return parsed
    *_, content = _content(*stored)
    parsed = json.loads(unpack(stored[0]))
    parsed["data"]["content"] = content  # the key is there: the field order is kept
    return parsed


def _chars(stored: StoredMessage) -> int:
    return len(stored) if isinstance(stored, str) else len(stored[0]) + len(stored[1])


def serialize_metadata(metadata: Mapping[str, Any]) -> str:
    """JSON of user metadata, with the same checks as messages."""
    if type(metadata) is dict and not metadata:  # most appends have none
        return "{}"
    if isinstance(metadata, Mapping):  # anything else is refused below
        check_nesting("metadata", metadata.values())
    try:
        text = dumps(dict(metadata))
    except (TypeError, ValueError) as exc:
        raise InvalidContent(f"metadata is not JSON-serializable: {exc}") from exc
    _check_encodable(text, "metadata", InvalidContent)
    return text


def check_entry_size(message_json: str, metadata_json: str, max_chars: int) -> None:
    """The one size limit of an entry: its message JSON and its metadata JSON
    together hold at most ``max_chars`` characters (``MemoryConfig.max_entry_chars``).

    Raises:
        EntryTooLarge: above the limit.
    """
    size = len(message_json) + len(metadata_json)
    if size > max_chars:
        raise EntryTooLarge(
            f"entry of {size} characters (message and metadata) exceeds "
            f"max_entry_chars={max_chars}",
            size=size,
            limit=max_chars,
        )


def check_message_id(message: BaseMessage) -> None:
    """A message id is stored as text of at most :data:`MESSAGE_ID_MAX` characters
    (an id holding NUL counts as its escaped form, see :func:`store_text`).

    Raises:
        InvalidContent: for a longer id.
    """
    if message.id is not None and len(store_text(message.id)) > MESSAGE_ID_MAX:
        raise InvalidContent(
            f"message id of {len(message.id)} characters exceeds the limit of {MESSAGE_ID_MAX}"
        )


_CACHED_CHARS = 64_000
_CACHE_SIZE = 8192
#: The parse cache keeps at most this many characters of stored JSON in all (the
#: messages parsed from them take about as much again), evicting the least recently
#: used first. Adjustable at run time; it applies from the next insertion.
CACHE_MAX_CHARS = 32 * 2**20
#: Parsed messages by stored message, least recently used first (stored messages
#: never change). Hits read it without a lock; insertions, evictions and clearing
#: take ``_cache_lock``, which keeps ``_cache_chars`` exact.
_CACHE: OrderedDict[StoredMessage, BaseMessage] = OrderedDict()
_cache_lock = threading.Lock()
_cache_chars = 0
#: Message classes :func:`remember` may take as they are: parsing their JSON builds
#: the same class from the same field values.
_PLAIN_TYPES = (HumanMessage, AIMessage, SystemMessage)


def _keep(text: StoredMessage, message: BaseMessage) -> None:
    global _cache_chars
    with _cache_lock:
        if text in _CACHE:  # another thread parsed it first
            return
        _CACHE[text] = message
        _cache_chars += _chars(text)
        while len(_CACHE) > _CACHE_SIZE or _cache_chars > CACHE_MAX_CHARS:
            oldest, _ = _CACHE.popitem(last=False)
            _cache_chars -= _chars(oldest)


def _parse(text: StoredMessage) -> BaseMessage:
    message = _CACHE.get(text)
    if message is None:
        message = messages_from_dict([_loads(text)])[0]
        _keep(text, message)
    else:
        try:
            _CACHE.move_to_end(text)
        except KeyError:  # evicted by another thread since
            pass
    return message


def clear_cache() -> None:
    """Release every parsed message the cache holds (``ConversationMemory.close``)."""
    global _cache_chars
    with _cache_lock:
        _CACHE.clear()
        _cache_chars = 0


def _reset_after_fork() -> None:
    """A forked child starts with an empty cache and its own lock (a thread of the
    parent may have held it at the fork)."""
    global _cache_lock, _cache_chars
    _cache_lock = threading.Lock()
    _CACHE.clear()
    _cache_chars = 0


os.register_at_fork(after_in_child=_reset_after_fork)


def _plain(message: BaseMessage) -> bool:
    """Whether parsing the JSON of ``message`` would give a message equal to it: one
    of the plain classes, text content, and no field but strings, ``None`` and empty
    containers (so no value that JSON would turn into another type)."""
    if type(message) not in _PLAIN_TYPES or message.__pydantic_extra__:
        return False
    for value in message.__dict__.values():
        if value is None or type(value) is str:
            continue
        if type(value) not in (dict, list) or value:
            return False
    return True


def remember(text: StoredMessage, message: BaseMessage) -> None:
    """Seed the parse cache: ``text`` is how the row of ``message`` keeps it.

    Only plain messages are taken (see :func:`_plain`), as a copy sharing no
    container with the caller's object; any other message is parsed on first read.
    The turn that stores a message reads it straight back, so this saves that parse.
    """
    if _chars(text) <= _CACHED_CHARS and text not in _CACHE and _plain(message):
        _keep(text, _fresh_copy(message))


def _copy_json(value: Any) -> Any:
    """A copy of parsed JSON (dicts, lists and scalars) that shares no container."""
    if type(value) is dict:
        return {key: _copy_json(item) for key, item in value.items()}
    if type(value) is list:
        return [_copy_json(item) for item in value]
    return value


_set_attribute = object.__setattr__
#: The containers a field parsed from JSON may hold.
_JSON_CONTAINERS = frozenset((dict, list))


def _fresh_copy(message: BaseMessage, *, every_field_set: bool = False) -> BaseMessage:
    """A copy of a message whose fields came from JSON, sharing no container.

    What ``model_copy()`` does (a new instance with copies of the field dict, the
    extra fields, the set of fields given and the private values), written out: a
    read copies every message of the context, and pydantic's generic ``copy`` of each
    part cost more than the rest of the copy together. ``every_field_set``: the copy
    counts every field (extra ones included) as set, as a message built from its
    JSON does.
    """
    cls = type(message)
    copy = cls.__new__(cls)
    # Every field came from JSON, so copying its containers is a deep copy,
    # several times cheaper than model_copy(deep=True). The dict is copied whole,
    # then its containers replaced (their keys stay: no resize while iterating).
    fields = message.__dict__.copy()
    for key, value in fields.items():
        if type(value) in _JSON_CONTAINERS:
            fields[key] = _copy_json(value) if value else type(value)()
    _set_attribute(copy, "__dict__", fields)
    extra = message.__pydantic_extra__
    # Extra fields came from JSON too: copied as deep (model_copy would share them).
    extra = None if extra is None else (_copy_json(extra) if extra else {})
    _set_attribute(copy, "__pydantic_extra__", extra)
    if every_field_set:
        fields_set = {*fields, *extra} if extra else set(fields)
    else:
        fields_set = set(message.__pydantic_fields_set__)
    _set_attribute(copy, "__pydantic_fields_set__", fields_set)
    private = getattr(message, "__pydantic_private__", None)
    if private is not None:
        private = {key: value for key, value in private.items() if value is not PydanticUndefined}
    _set_attribute(copy, "__pydantic_private__", private)
    return copy


def deserialize(text: StoredMessage, *, fresh: bool = True) -> BaseMessage:
    """The message stored by :func:`serialize` (a fresh object every call).

    Stored messages never change, so parsed messages are cached by their stored
    form; callers get a copy that shares no container with the cached object
    (content blocks, ``additional_kwargs``, tool calls are copied too; a shallow
    copy of the model would let a caller's edit leak into later reads).
    ``fresh=False`` returns the cached object itself, for tiermem's own
    read-only use.
    """
    if _chars(text) > _CACHED_CHARS:
        return messages_from_dict([_loads(text)])[0]
    message = _parse(text)
    return _fresh_copy(message) if fresh else message


#: Message classes :func:`parse_entry` builds from their stored JSON without
#: validating it again: the JSON is a ``message_to_dict`` of a validated message.
_CONSTRUCTED: dict[str, type[BaseMessage]] = {
    "human": HumanMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "tool": ToolMessage,
}
#: Their fields in order, for those whose ``model_construct`` from every field
#: comes down to taking the given values as the field dict (no aliases, no
#: ``model_post_init``, extra fields allowed).
_FIELDS: dict[str, tuple[str, ...]] = {
    kind: tuple(cls.model_fields)
    for kind, cls in _CONSTRUCTED.items()
    if cls.__pydantic_post_init__ is None
    and cls.model_config.get("extra") == "allow"
    and not any(f.alias or f.validation_alias for f in cls.model_fields.values())
}


def _construct(stored: dict[str, Any]) -> BaseMessage:
    """The message of parsed stored JSON. When the JSON holds every field in order
    (as this langchain-core's ``message_to_dict`` writes them), without validation:
    what ``model_construct(**data)`` builds, written out, the parsed dict becoming
    the field dict; any other JSON is validated."""
    kind = str(stored.get("type"))
    cls = _CONSTRUCTED.get(kind)
    if cls is None:
        message: BaseMessage = messages_from_dict([stored])[0]
        return message
    data = stored["data"]
    if tuple(data) != _FIELDS.get(kind):
        # Not as this langchain-core writes the message (an earlier version's JSON,
        # extra fields): validated, so its validators fill what it lacks.
        validated: BaseMessage = messages_from_dict([stored])[0]
        return validated
    message = cls.__new__(cls)
    _set_attribute(message, "__dict__", data)
    _set_attribute(message, "__pydantic_fields_set__", set(data))
    _set_attribute(message, "__pydantic_extra__", {})
    _set_attribute(message, "__pydantic_private__", None)
    return message


def parse_entry(text: StoredMessage) -> BaseMessage:
    """A fresh message from an entry's stored message (:func:`serialize` of a validated
    message), not validated again: a copy of the cached parse when there is one
    (copying is cheaper than parsing), else built from the JSON, and cached when
    plain. Either way every field counts as set, as when it was built from JSON."""
    if _chars(text) > _CACHED_CHARS:
        return _construct(_loads(text))
    cached = _CACHE.get(text)
    if cached is None:
        message = _construct(_loads(text))
        if not _plain(message):
            return message
        _keep(text, message)
        cached = message
    else:
        try:
            _CACHE.move_to_end(text)
        except KeyError:  # evicted by another thread since
            pass
    return _fresh_copy(cached, every_field_set=True)


def _block_text(block: object) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, Mapping):
        return ""
    kind = block.get("type")
    if kind in ("text", "input_text", "output_text"):
        return str(block.get("text", ""))
    if kind in ("image_url", "image"):
        url = block.get("image_url", block.get("url"))
        if isinstance(url, Mapping):
            url = url.get("url")
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            return f"[image: {url}]"
        return "[image]"
    return f"[{kind}]" if isinstance(kind, str) else ""


def render_text(message: BaseMessage) -> str:
    """Plain text of a message, for search, summaries and the context string.

    Media blocks become placeholders (``[image: https://...]``, ``[image]``,
    ``[audio]``), so base64 data never reaches a summarizer or the index.
    """
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        text = "\n".join(part for part in map(_block_text, content) if part)
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = "; ".join(f"{call['name']}({dumps(call['args'])})" for call in message.tool_calls)
        text = f"{text}\n{calls}".strip()
    return text


def tool_call_ids(message: BaseMessage) -> list[str]:
    """Ids of the tool calls an assistant message makes.

    A call without an id (LangChain accepts one) is left out: no result can ever
    answer it, so it takes no part in pairing, grouping or compression rules.
    """
    if isinstance(message, AIMessage):
        return [call["id"] for call in message.tool_calls if call["id"]]
    return []


def tool_call_names(message: BaseMessage) -> list[str]:
    """Tool names of the calls :func:`tool_call_ids` lists, in the same order."""
    if isinstance(message, AIMessage):
        return [call["name"] for call in message.tool_calls if call["id"]]
    return []


def without_idless_calls(message: BaseMessage) -> BaseMessage | None:
    """``message`` as providers accept it: without tool calls that have no id.

    Providers require an id on every call, and a result for each; a call without
    one can never be answered. ``None`` when nothing (no text, no call) is left.
    """
    if not isinstance(message, AIMessage) or all(call["id"] for call in message.tool_calls):
        return message
    calls = [call for call in message.tool_calls if call["id"]]
    if not calls and not message.content:
        return None
    return message.model_copy(update={"tool_calls": calls})
