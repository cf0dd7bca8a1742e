"""After each ported upstream agent test: what the middleware stored is a valid history."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from langchain_sessions import to_langchain_messages

from .memory import SESSIONS


def assert_valid_history(messages) -> None:
    """No message twice, and every tool call of an AI message answered before the next
    non-tool message (a call still pending at the end, as at an interrupt, may wait)."""
    ids = [m.id for m in messages]
    assert len(ids) == len(set(ids)), ids
    for index, message in enumerate(messages):
        if not isinstance(message, AIMessage):
            continue
        calls = [*message.tool_calls, *message.invalid_tool_calls]
        wanted = {c["id"] for c in calls if c["id"] is not None}  # create_agent cannot answer a call without id
        answered, later = set(), messages[index + 1 :]
        for following in later:
            if not isinstance(following, ToolMessage):
                break
            answered.add(following.tool_call_id)
        if any(not isinstance(m, ToolMessage) for m in later):
            assert wanted <= answered, (message, wanted - answered)


@pytest.fixture(autouse=True)
def stored_histories_stay_valid():
    SESSIONS.clear()
    yield
    try:
        for session in SESSIONS:
            assert_valid_history(to_langchain_messages(session.get_history()))
    finally:
        for session in SESSIONS:
            session.close()
        SESSIONS.clear()
