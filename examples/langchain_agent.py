"""A LangChain agent with durable, searchable, self-edited memory: one middleware.

Offline by default (a scripted model that plays the LLM); with OPENAI_API_KEY set it uses
ChatOpenAI (model from OPENAI_MODEL, default gpt-4o-mini):

    python examples/langchain_agent.py [path/to/memory.db]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage

from langchain_sessions import SessionMemoryMiddleware
from sessions_core import SessionManager


class ScriptedModel(FakeMessagesListChatModel):
    """Plays the LLM offline: answers with the scripted messages in order."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def make_model() -> Any:
    if os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    remember = {"label": "memory", "content": "Sam loves green tea, no sugar.", "action": "append"}
    return ScriptedModel(
        responses=[
            AIMessage("", tool_calls=[{"name": "set_context", "args": remember, "id": "call_1"}]),
            AIMessage("Nice to meet you, Sam! I'll remember that you love green tea."),
            AIMessage("Green tea, no sugar."),
            AIMessage("", tool_calls=[{"name": "session_search", "args": {"query": "green tea"}, "id": "call_2"}]),
            AIMessage("Sam, in another conversation, said they love green tea."),
        ]
    )


def build_agent(db_path: Path, model: Any) -> tuple[Any, SessionManager]:
    """What a process does at start-up: open the memory, add the middleware."""
    manager = SessionManager(db_path).with_context(
        "memory", description="Facts about the user; keep it short", max_tokens=500
    )
    agent = create_agent(
        model,
        system_prompt="You are a friendly assistant. Save lasting facts about the user with set_context.",
        middleware=[SessionMemoryMiddleware(manager)],
    )
    return agent, manager


def show(result: dict[str, Any], since: int) -> None:
    for message in result["messages"][since:]:
        if message.type == "ai" and message.tool_calls:
            for call in message.tool_calls:
                print(f"  ai   -> {call['name']}({call['args']})")
        elif message.text:
            print(f"  {message.type:<5}: {message.text}")


def main(db_path: Path) -> None:
    model = make_model()
    agent, manager = build_agent(db_path, model)
    sam = {"configurable": {"thread_id": "sam"}}

    print("run 1 (thread 'sam'):")
    result = agent.invoke({"messages": [HumanMessage("Hi, I'm Sam and I love green tea.")]}, sam)
    show(result, 0)
    print("memory block:", repr(manager.get_session("sam").get_context_block("memory").content))
    manager.close()

    # A new process: no checkpointer, the history and the memory block come from the file.
    agent, manager = build_agent(db_path, model)
    print("run 2 (same thread, after a restart); the system message now ends with:")
    print("  " + manager.get_session("sam").system_prompt_for_run().replace("\n", "\n  "))
    earlier = manager.get_message_count("sam")
    result = agent.invoke({"messages": [HumanMessage("What do I like to drink?")]}, sam)
    print(f"  (the model was shown the {earlier} earlier messages stored in {db_path.name})")
    show(result, 0)

    print("run 3 (another thread searches past conversations):")
    result = agent.invoke(
        {"messages": [HumanMessage("What do you know about Sam?")]}, {"configurable": {"thread_id": "other"}}
    )
    show(result, 0)

    history = manager.get_history("sam")
    print("stored for 'sam':", len(history), "messages, roles", [m.role for m in history])
    print("sessions:", sorted(info.id for info in manager.list_sessions()))
    print("search 'tea':", [f"{hit.session_id}/{hit.role}" for hit in manager.search("tea")])
    manager.close()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(Path(folder) / "memory.db")
