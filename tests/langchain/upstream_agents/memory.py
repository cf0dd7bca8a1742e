"""``create_agent`` with ``SessionMemoryMiddleware`` in the middleware list: the ported upstream
agent tests import it in place of langchain's, so each of them runs with the middleware added.

Each agent gets its own session (an in-memory store, no context blocks: the middleware adds no
tool and no system prompt text, so what upstream asserts about tools and prompts still holds,
while every message is stored and the stored history is loaded). ``SESSIONS`` keeps them so
the conftest can check, after each test, what the middleware stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent as _create_agent

from langchain_sessions import SessionMemoryMiddleware
from sessions_core import Session

SESSIONS: list[Session] = []


def create_agent(model: Any, tools: Sequence[Any] | None = None, *, middleware: Sequence[Any] = (), **kwargs: Any):
    session = Session(":memory:").for_session("upstream")
    SESSIONS.append(session)
    return _create_agent(model, tools, middleware=[*middleware, SessionMemoryMiddleware(session)], **kwargs)
