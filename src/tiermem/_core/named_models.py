"""Chat models and embeddings named by a ``"provider:model"`` string.

``ConversationMemory(summarizer="openai:gpt-4o-mini", embeddings="openai:text-embedding-3-small")``
takes the names LangChain's ``create_agent`` and ``SummarizationMiddleware`` take, and
builds them the way those do: with LangChain's own ``init_chat_model`` and
``init_embeddings`` (from the ``langchain`` package, imported only when a name is given).
Whatever stops a model from being made (``langchain`` or the provider's package not
installed, an unknown provider, missing credentials) is an ``InvalidArgument`` saying
what to install or set, raised before anything is stored.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, cast

from ..errors import InvalidArgument

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

__all__ = ["chat_model_from_name", "embeddings_from_name"]

_LANGCHAIN = "the langchain package (pip install langchain) and the provider's package"


def chat_model_from_name(name: str, what: str = "summarizer") -> BaseChatModel:
    """The chat model ``init_chat_model(name)`` makes; ``what`` names where the name
    came from in an error (a setting, an option, an environment variable).

    Raises:
        InvalidArgument: it cannot be made; the message names what to install or set.
    """
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as error:
        raise InvalidArgument(f"{what} {name!r} needs {_LANGCHAIN}") from error
    return cast("BaseChatModel", _made(what, name, "chat model", init_chat_model))


def embeddings_from_name(name: str) -> Embeddings:
    """The embeddings ``init_embeddings(name)`` makes.

    Raises:
        InvalidArgument: they cannot be made; the message names what to install or set.
    """
    try:
        from langchain.embeddings import init_embeddings
    except ImportError as error:
        raise InvalidArgument(f"embeddings {name!r} needs {_LANGCHAIN}") from error
    return cast("Embeddings", _made("embeddings", name, "Embeddings", init_embeddings))


def _made(what: str, name: str, kind: str, init: Any) -> Any:
    """``init(name)``, its failures as one-line ``InvalidArgument`` errors."""
    if not name.strip():
        raise InvalidArgument(f"{what} must name a model as 'provider:model', got {name!r}")
    try:
        return init(name)
    except ImportError as error:  # LangChain's message names the provider's package
        raise InvalidArgument(f"{what} {name!r} needs a package: {_line(error)}") from error
    except Exception as error:  # an unknown provider, missing credentials, a bad option
        raise InvalidArgument(
            f"{what} {name!r} names no {kind} {init.__name__} can make: "
            f"{type(error).__name__}: {_line(error)}"
        ) from error


def _line(error: BaseException) -> str:
    """The error's message on one line."""
    return re.sub(r"\s+", " ", str(error)).strip()
