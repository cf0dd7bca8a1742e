"""What the installed llama-index-core's own classes can do (the ports run over them too)."""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def _own_serialisation_error() -> str | None:
    from llama_index.core.llms import ChatMessage
    from llama_index.core.storage.chat_store import SimpleChatStore

    store = SimpleChatStore()
    store.add_message("k", ChatMessage(role="user", content="x"))
    try:
        store.to_dict()
    except Exception as error:  # the upstream classes' failure, whatever it is
        return f"{type(error).__name__}: {str(error)[:120]}"
    return None


def skip_if_reference_cannot_serialise(instance: object) -> None:
    """Skip a port's run over a llama-index class (not ours) when that class cannot serialise
    with the installed pydantic: llama-index-core 0.14.25's ``ChatMessage`` serialiser fails
    under pydantic 2.14 (``'index_key' is expected to be an integer or a string``)."""
    if type(instance).__module__.startswith("llama_index") and (error := _own_serialisation_error()):
        import pydantic

        pytest.skip(f"llama-index-core cannot serialise its own ChatMessage with pydantic {pydantic.VERSION}: {error}")
