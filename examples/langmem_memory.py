"""LangMem's memory tools on session-memory: LangGraph's store, its checkpointer and the
conversation in one database.

A ``create_agent`` agent gets LangMem's ``manage_memory`` and ``search_memory`` tools, with
``store=SessionStore.from_manager(manager)`` and ``checkpointer=SessionSaver.from_manager(manager)``.
It saves a memory in the thread "morning", finds it in the thread "later", and after a restart
resumes "morning" and updates the memory, whose earlier version stays kept. Offline: a scripted
model plays the LLM.

    python examples/langmem_memory.py [path/to/memory.db]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langmem import create_manage_memory_tool, create_search_memory_tool
from pydantic import Field

from langchain_sessions import SessionMemoryMiddleware, SessionSaver, SessionStore
from sessions_core import SessionManager

MEMORIES = ("memories", "{user_id}")
"""LangMem fills ``{user_id}`` from ``config["configurable"]``: each user's memories apart."""


class ScriptedModel(FakeMessagesListChatModel):
    """Plays the LLM offline: answers with the scripted messages in order, recording what it saw."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def tool_call(name: str, args: dict[str, Any]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{name}"}])


def start(db_path: Path, model: ScriptedModel) -> tuple[Any, SessionManager]:
    """What a process does at start-up: one manager, and the store and checkpointer over it."""
    manager = SessionManager(db_path)
    agent = create_agent(
        model,
        tools=[create_manage_memory_tool(namespace=MEMORIES), create_search_memory_tool(namespace=MEMORIES)],
        system_prompt="Save lasting facts about the user with manage_memory; look them up with search_memory.",
        checkpointer=SessionSaver.from_manager(manager),
        store=SessionStore.from_manager(manager),
        middleware=[SessionMemoryMiddleware(manager)],
    )
    return agent, manager


def ask(agent: Any, text: str, thread_id: str) -> list[BaseMessage]:
    print(f"[{thread_id}] user: {text}")
    config = {"configurable": {"user_id": "sam", "thread_id": thread_id}}
    messages = agent.invoke({"messages": [HumanMessage(text)]}, config)["messages"]
    this_run = messages[max(i for i, m in enumerate(messages) if m.type == "human") :]
    for message in this_run:
        if message.type == "tool":
            print(f"[{thread_id}]   {message.name} -> {message.text}")
    print(f"[{thread_id}] ai: {messages[-1].text}")
    return this_run


def main(db_path: Path, *, kept: bool) -> None:
    model = ScriptedModel(
        responses=[
            tool_call("manage_memory", {"content": "Sam drinks green tea every morning."}),
            AIMessage("Noted: green tea in the morning."),
            tool_call("search_memory", {"query": "tea"}),
            AIMessage("Green tea, every morning."),
        ]
    )
    agent, manager = start(db_path, model)
    morning = ask(agent, "I drink green tea every morning.", "morning")
    key = next(m.text for m in morning if m.type == "tool").removeprefix("created memory ")
    ask(agent, "What do I drink?", "later")
    manager.close()

    print("-- restart: a new manager, store, checkpointer and agent on the same file --")
    update = {"action": "update", "id": key, "content": "Sam drinks oolong now, no more green tea."}
    model = ScriptedModel(responses=[tool_call("manage_memory", update), AIMessage("Updated: oolong.")])
    agent, manager = start(db_path, model)
    ask(agent, "I switched to oolong.", "morning")
    earlier = [m.text for m in model.seen[0][1:-1]]
    print(f"the model saw the thread's {len(earlier)} earlier messages, read from the checkpointer: {earlier}")
    for thread in ("morning", "later"):
        print(f"session {thread!r} stores {manager.get_message_count(thread)} messages, each once")

    store = SessionStore.from_manager(manager)
    namespace = ("memories", "sam")
    versions = store.item_versions(namespace, key)
    print(f"the memory's versions, newest first: {[(v.version, v.value) for v in versions]}")
    print(f"keyword search for 'tea': {[item.value['content'] for item in store.search(namespace, query='tea')]}")
    manager.close()
    if kept:
        print(f"look inside: sessions --store {db_path} list")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]), kept=True)
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(Path(folder) / "memory.db", kept=False)
