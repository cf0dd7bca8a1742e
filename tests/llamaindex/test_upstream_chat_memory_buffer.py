"""Port of llama-index-core's ``ChatMemoryBuffer`` tests that apply to any ``BaseMemory``,
over ``SessionMemory``.

Source: run-llama/llama_index, llama-index-core/tests/memory/test_chat_memory_buffer.py
(llama-index-core 0.14; the sdist on PyPI carries no tests). Each test runs over
``ChatMemoryBuffer`` itself (the class users replace, so the expectations are checked against
the installed release) and over ``SessionMemory`` made with the same ``from_defaults`` call,
with compaction off (``ChatMemoryBuffer`` never summarises: the like-for-like setting).

Adapted, and why:
- Upstream passes ``initial_token_count`` positionally, from when it was ``get``'s first
  parameter; in 0.14 the first is ``input``, so the port passes it by keyword.
- Three window tests expected an empty history where the window holds no message; since
  "catch one message longer than token limit" ``ChatMemoryBuffer`` returns the newest message
  instead (so the LLM reports an over-long message rather than failing silently). The port
  expects what the installed class does, the newest message, and ``SessionMemory`` does the same,
  except where that message is an answer: ``SessionMemory`` then keeps the newest turn whole,
  from its user message, as LlamaIndex's ``Memory`` does (a history starting with the assistant
  is refused by providers such as Bedrock; upstream ``test_manage_queue_first_message_must_be_user``).
- ``test_sting_save_load`` / ``test_dict_save_load`` reload with the class's own
  ``from_string`` / ``from_dict``; ``SessionMemory`` reloads from its pointer to the same store.
  ``test_pickle`` is kept as is.
"""

from __future__ import annotations

import pickle

import pytest
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.memory.chat_memory_buffer import ChatMemoryBuffer
from llama_index.core.utils import get_tokenizer

from llamaindex_sessions import SessionMemory

from .reference import skip_if_reference_cannot_serialise

tokenizer = get_tokenizer()

USER_CHAT_MESSAGE = ChatMessage(role=MessageRole.USER, content="first message")
USER_CHAT_MESSAGE_TOKENS = len(tokenizer(str(USER_CHAT_MESSAGE.content)))
SECOND_USER_CHAT_MESSAGE = ChatMessage(role=MessageRole.USER, content="second message")
SECOND_USER_CHAT_MESSAGE_TOKENS = len(tokenizer(str(SECOND_USER_CHAT_MESSAGE.content)))
ASSISTANT_CHAT_MESSAGE = ChatMessage(role=MessageRole.ASSISTANT, content="first answer")
ASSISTANT_CHAT_MESSAGE_TOKENS = len(tokenizer(str(ASSISTANT_CHAT_MESSAGE.content)))
SECOND_ASSISTANT_CHAT_MESSAGE = ChatMessage(role=MessageRole.USER, content="second answer")
SECOND_ASSISTANT_CHAT_MESSAGE_TOKENS = len(tokenizer(str(SECOND_ASSISTANT_CHAT_MESSAGE.content)))
FOUR_MESSAGES = [USER_CHAT_MESSAGE, ASSISTANT_CHAT_MESSAGE, SECOND_USER_CHAT_MESSAGE, SECOND_ASSISTANT_CHAT_MESSAGE]


@pytest.fixture(params=["ChatMemoryBuffer", "SessionMemory"])
def memory_class(request):
    """``from_defaults`` of the class under test (``SessionMemory`` with compaction off)."""
    if request.param == "ChatMemoryBuffer":
        return ChatMemoryBuffer
    return _SessionMemoryWithoutCompaction


class _SessionMemoryWithoutCompaction:
    @staticmethod
    def from_defaults(**kwargs):
        return SessionMemory.from_defaults(compaction=False, **kwargs)

    from_string = staticmethod(SessionMemory.from_string)
    from_dict = staticmethod(SessionMemory.from_dict)


def test_put_get(memory_class) -> None:
    memory = memory_class.from_defaults(chat_history=[USER_CHAT_MESSAGE])

    history = memory.get()

    assert len(history) == 1
    assert history[0].content == USER_CHAT_MESSAGE.content


def test_get_when_initial_tokens_less_than_limit_returns_history(memory_class) -> None:
    initial_tokens = 5
    memory = memory_class.from_defaults(token_limit=1000, chat_history=[USER_CHAT_MESSAGE])

    history = memory.get(initial_token_count=initial_tokens)

    assert len(history) == 1
    assert history[0] == USER_CHAT_MESSAGE


def test_get_when_initial_tokens_exceed_limit_raises_value_error(memory_class) -> None:
    initial_tokens = 50
    memory = memory_class.from_defaults(token_limit=initial_tokens - 1)

    with pytest.raises(ValueError) as error:
        memory.get(initial_token_count=initial_tokens)

    assert str(error.value) == "Initial token count exceeds token limit"


def test_get_when_initial_tokens_same_as_limit_keeps_only_the_newest_message(memory_class) -> None:
    initial_tokens = 5
    memory = memory_class.from_defaults(token_limit=initial_tokens, chat_history=[USER_CHAT_MESSAGE])

    history = memory.get(initial_token_count=initial_tokens)

    assert history == [USER_CHAT_MESSAGE]  # upstream: empty (see the module docstring)


def test_get_when_space_for_assistant_message_keeps_only_the_newest_message(memory_class) -> None:
    token_limit = 5
    initial_tokens = token_limit - USER_CHAT_MESSAGE_TOKENS
    memory = memory_class.from_defaults(
        token_limit=token_limit, chat_history=[USER_CHAT_MESSAGE, ASSISTANT_CHAT_MESSAGE]
    )

    history = memory.get(initial_token_count=initial_tokens)

    if memory_class is ChatMemoryBuffer:
        assert history == [ASSISTANT_CHAT_MESSAGE]  # upstream: empty (see the module docstring)
    else:  # the newest turn whole, from its user message, as Memory (see the module docstring)
        assert history == [USER_CHAT_MESSAGE, ASSISTANT_CHAT_MESSAGE]


def test_get_when_space_for_second_message_and_answer_removes_only_first_message_and_answer(memory_class) -> None:
    token_limit = 5
    initial_tokens = token_limit - USER_CHAT_MESSAGE_TOKENS - ASSISTANT_CHAT_MESSAGE_TOKENS
    memory = memory_class.from_defaults(
        token_limit=token_limit,
        chat_history=FOUR_MESSAGES,
    )

    history = memory.get(initial_token_count=initial_tokens)

    assert len(history) == 2
    assert history[0] == SECOND_USER_CHAT_MESSAGE
    assert history[1] == SECOND_ASSISTANT_CHAT_MESSAGE


def test_get_when_space_for_all_but_first_message_removes_first_message_and_answer(memory_class) -> None:
    token_limit = 10
    history_tokens = ASSISTANT_CHAT_MESSAGE_TOKENS + USER_CHAT_MESSAGE_TOKENS + SECOND_ASSISTANT_CHAT_MESSAGE_TOKENS
    initial_tokens = token_limit - history_tokens
    memory = memory_class.from_defaults(
        token_limit=token_limit,
        chat_history=FOUR_MESSAGES,
    )

    history = memory.get(initial_token_count=initial_tokens)

    assert len(history) == 2
    assert history[0] == SECOND_USER_CHAT_MESSAGE
    assert history[1] == SECOND_ASSISTANT_CHAT_MESSAGE


def test_set(memory_class) -> None:
    memory = memory_class.from_defaults(chat_history=[USER_CHAT_MESSAGE])

    memory.put(USER_CHAT_MESSAGE)

    assert len(memory.get()) == 2

    memory.set([USER_CHAT_MESSAGE])
    assert len(memory.get()) == 1


def test_max_tokens(memory_class) -> None:
    memory = memory_class.from_defaults(chat_history=[USER_CHAT_MESSAGE], token_limit=5)

    memory.put(USER_CHAT_MESSAGE)
    assert len(memory.get()) == 2

    # do we limit properly
    memory.put(USER_CHAT_MESSAGE)
    memory.put(USER_CHAT_MESSAGE)
    assert len(memory.get()) == 2

    # does get_all work
    assert len(memory.get_all()) == 4

    # does get return in the correct order?
    memory.put(ChatMessage(role=MessageRole.USER, content="test message2"))
    assert memory.get()[-1].content == "test message2"
    assert len(memory.get()) == 2


def test_sting_save_load(memory_class, tmp_path) -> None:
    store = _file_store(memory_class, tmp_path)
    memory = memory_class.from_defaults(chat_history=[USER_CHAT_MESSAGE], token_limit=5, **store)
    skip_if_reference_cannot_serialise(memory)

    json_str = memory.to_string()
    if isinstance(memory, SessionMemory):
        json_str = json_str.replace(memory.handle, "another-process")  # reopen the store, not the live session

    new_memory = memory_class.from_string(json_str)

    assert len(new_memory.get()) == 1
    assert new_memory.token_limit == 5


def test_dict_save_load(memory_class, tmp_path) -> None:
    store = _file_store(memory_class, tmp_path)
    memory = memory_class.from_defaults(chat_history=[USER_CHAT_MESSAGE], token_limit=5, **store)
    skip_if_reference_cannot_serialise(memory)

    json_dict = memory.to_dict()
    if isinstance(memory, SessionMemory):
        json_dict["handle"] = "another-process"  # reopen the store, not the live session

    new_memory = memory_class.from_dict(json_dict)

    assert len(new_memory.get()) == 1
    assert new_memory.token_limit == 5


def test_pickle(memory_class) -> None:
    """Unpickleable tiktoken tokenizer should be circumvented when pickling."""
    memory = memory_class.from_defaults()
    bytes_ = pickle.dumps(memory)
    assert isinstance(pickle.loads(bytes_), (ChatMemoryBuffer, SessionMemory))


def _file_store(memory_class, tmp_path):
    """Nothing for ``ChatMemoryBuffer`` (it serialises its messages); a SQLite file for the
    ``SessionMemory`` case, which serialises a pointer to where its messages are."""
    if memory_class is ChatMemoryBuffer:
        return {}
    return {"store": str(tmp_path / "memory.db"), "session_id": "s"}
