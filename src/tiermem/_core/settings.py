"""Settings dataclasses that refuse unknown keywords with ``InvalidArgument``."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable
from typing import Any, Self

from ..errors import InvalidArgument

__all__ = ["KeywordChecked", "check_field_names"]


def check_field_names(cls: type[Any], names: Iterable[str]) -> None:
    """Refuse keywords that name no field of the dataclass ``cls``.

    Raises:
        InvalidArgument: naming the first unknown keyword and the closest field.
    """
    fields = [f.name for f in dataclasses.fields(cls)]
    for name in names:
        if name not in fields:
            close = difflib.get_close_matches(name, fields, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; fields: {', '.join(fields)}"
            raise InvalidArgument(f"{cls.__name__} has no field {name!r}{hint}")


class KeywordChecked:
    """Base of the settings dataclasses: an unknown keyword (a typo such as
    ``max_token=``) raises ``InvalidArgument`` like any other bad setting, where the
    generated ``__init__`` would raise ``TypeError``."""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        check_field_names(cls, kwargs)
        return object.__new__(cls)
