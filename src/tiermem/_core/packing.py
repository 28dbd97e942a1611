"""Private: an entry's message JSON as its row keeps it, packed.

``message_to_dict`` writes every field of a message, and nearly every message holds
most of them at one value (``"additional_kwargs":{}``, ``"name":null``, ...): about
a sixth of the row of a plain 500-character message. A row keeps each such run as one
control character, which JSON text never holds unescaped, so :func:`unpack` puts
every run back exactly, whatever the JSON holds.
"""

from __future__ import annotations

import re

__all__ = ["pack", "unpack"]

#: Runs of a message's JSON that a row keeps as one control character each: fields
#: at the value nearly every message has (``message_to_dict`` writes every field), and
#: the ``type`` that ``data`` repeats. JSON text never holds a control character
#: unescaped, so each run is put back exactly (:func:`unpack`), whatever the JSON.
_RUNS = (
    ("\x01", ',"additional_kwargs":{},"response_metadata":{}'),
    ("\x02", ',"additional_kwargs":{}'),
    ("\x03", ',"name":null'),
    ("\x04", ',"tool_calls":[],"invalid_tool_calls":[],"usage_metadata":null'),
    ("\x05", ',"invalid_tool_calls":[],"usage_metadata":null'),
    ("\x06", ',"tool_calls":[],"invalid_tool_calls":[]'),
    ("\x07", ',"invalid_tool_calls":[]'),
    ("\x08", ',"artifact":null,"status":"success"'),
    # Whitespace characters (\x09-\x0d) are left out: nothing here may look blank.
    ("\x0e", ',"type":"human"'),
    ("\x0f", ',"type":"ai"'),
    ("\x10", ',"type":"tool"'),
    ("\x11", ',"type":"system"'),
)
#: Any code of :data:`_RUNS`: a row without one was stored before rows were packed.
_PACKED = re.compile("[\x01-\x08\x0e-\x11]")


def pack(message_json: str) -> str:
    """``message_json`` with each run of :data:`_RUNS` as its code: 70 characters
    fewer for a plain human message, 128 for a plain AI message."""
    for code, run in _RUNS:
        message_json = message_json.replace(run, code)
    return message_json


def unpack(stored: str) -> str:
    """The JSON :func:`pack` was given (any JSON is returned as it is)."""
    if _PACKED.search(stored) is None:  # a row stored before rows were packed
        return stored
    for code, run in reversed(_RUNS):
        stored = stored.replace(code, run)
    return stored
