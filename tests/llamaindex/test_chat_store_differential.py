"""``SessionChatStore`` against LlamaIndex's ``SimpleChatStore`` on random operations: the same
``add_message`` (at the end or at an index, in range or not, negative), ``set_messages``,
``delete_message``, ``delete_last_message`` and ``delete_messages`` go to both, and every read
gives the same messages. Where they differ by design (docs/llamaindex.md): ours never deletes a
key, so ``get_keys`` still lists a key whose messages were deleted and ``delete_messages`` of an
empty key returns ``None``; ``SimpleChatStore`` raises ``IndexError`` deleting a message at a
negative index out of range, or the last message of an empty key, where ours returns ``None`` as
for any index out of range (as LlamaIndex's later fix does for the empty key)."""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.llms import ChatMessage
from llama_index.core.storage.chat_store import SimpleChatStore

from llamaindex_sessions import SessionChatStore

KEYS = ("u1", "u2", "ü 3")
STEPS = 250


def _message(rng: random.Random) -> ChatMessage:
    role, content = rng.choice(["user", "assistant", "system"]), rng.choice(["hi", "", "ça va?", "x" * 5])
    return ChatMessage(role=role, content=content)


def _plain(messages: list[ChatMessage] | None) -> list[tuple[str, Any]]:
    return [(message.role.value, message.content) for message in messages or []]


def _outcome(call: Any) -> tuple[str | None, Any]:
    """``(the error's type name or None, the result)`` of ``call()``."""
    try:
        return None, call()
    except Exception as error:  # noqa: BLE001  # compared, not handled
        return type(error).__name__, None


@pytest.mark.parametrize("seed", range(4))
def test_random_operations_read_back_as_simple_chat_store_reads_them(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    ours, theirs = SessionChatStore(tmp_path / "chat.db"), SimpleChatStore()
    for step in range(STEPS):
        key, roll, where = rng.choice(KEYS), rng.random(), f"seed {seed}, step {step}"
        if roll < 0.35:
            message, idx = _message(rng), rng.choice([None, None, 0, 1, 2, 5, -1])
            mine = _outcome(partial(ours.add_message, key, message, idx=idx))
            assert mine == _outcome(partial(theirs.add_message, key, message, idx=idx)), (where, idx)
        elif roll < 0.45:
            messages = [_message(rng) for _ in range(rng.randint(0, 3))]
            ours.set_messages(key, messages)
            theirs.set_messages(key, messages)
        elif roll < 0.6:
            idx = rng.choice([0, 1, 2, 5, -1, -2])
            mine_error, mine = _outcome(partial(ours.delete_message, key, idx))
            their_error, their = _outcome(partial(theirs.delete_message, key, idx))
            if their_error == "IndexError":
                assert (mine_error, mine) == (None, None), (where, idx)  # SimpleChatStore's bug
            else:
                assert (mine_error, _plain([mine] if mine else [])) == (their_error, _plain([their] if their else []))
        elif roll < 0.67:
            assert _plain(ours.delete_messages(key)) == _plain(theirs.delete_messages(key)), where
        else:
            assert _plain(ours.get_messages(key)) == _plain(theirs.get_messages(key)), where
    ours.manager.close()
