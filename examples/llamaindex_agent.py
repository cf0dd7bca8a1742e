"""A LlamaIndex FunctionAgent with durable memory it edits itself.

Run 1 tells the agent who the user is; the agent saves it with ``set_context``. Run 2 happens
"after a restart" (a new session object on the same SQLite file) and the agent answers from
its memory. Runs offline with a scripted model; set OPENAI_API_KEY to use a real one
(OPENAI_MODEL, default gpt-4o-mini).

    python examples/llamaindex_agent.py [path/to/memory.db]
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent, ToolCall
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock

from llamaindex_sessions import SessionMemory, SessionToolSpec
from sessions_core import Session, StaticContext


def scripted_model() -> Any:
    """An offline stand-in for a tool-calling model: it saves what the user says about
    themselves, and answers questions from the memory block in its system message."""
    from llama_index.core.llms import MockFunctionCallingLLM

    def respond(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        last = messages[-1]
        if last.role == MessageRole.TOOL:
            return ChatMessage(role="assistant", content="Got it, I'll remember that.")
        text = last.content or ""
        fact = re.search(r"my name is (\w+)[^.]*?(?:and )?I (love \w+)", text, re.IGNORECASE)
        if fact:
            note = f"The user's name is {fact.group(1)}. They {fact.group(2)}."
            call = ToolCallBlock(
                tool_call_id="call_1", tool_name="set_context", tool_kwargs={"label": "memory", "content": note}
            )
            return ChatMessage(role="assistant", blocks=[call])
        system = "\n".join(m.content or "" for m in messages if m.role == MessageRole.SYSTEM)
        known = re.search(r"The user's name is (\w+)\. They (love \w+)\.", system)
        if known:
            return ChatMessage(role="assistant", content=f"You're {known.group(1)}, and you {known.group(2)}.")
        return ChatMessage(role="assistant", content="I don't know yet. Tell me about yourself!")

    return MockFunctionCallingLLM(response_generator=respond)


def make_llm() -> Any:
    if os.environ.get("OPENAI_API_KEY"):
        from llama_index.llms.openai import OpenAI

        return OpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    return scripted_model()


def open_session(db_path: Path) -> Session:
    return (
        Session(db_path)
        .for_session("user-42")
        .with_context("soul", provider=StaticContext("You are a friendly assistant. Keep answers short."))
        .with_context("memory", description="Facts about the user; save new ones with set_context", max_tokens=200)
    )


async def run(agent: FunctionAgent, memory: SessionMemory, text: str) -> str:
    handler = agent.run(user_msg=text, memory=memory)
    async for event in handler.stream_events():
        if isinstance(event, ToolCall):
            print(f"  tool call: {event.tool_name}({event.tool_kwargs})")
    return str(await handler)


async def main(db_path: Path) -> None:
    llm = make_llm()

    session = open_session(db_path)
    memory = SessionMemory(session=session)
    agent = FunctionAgent(tools=SessionToolSpec(session).to_tool_list(), llm=llm)
    memory.bind(agent)  # compaction summaries use the agent's own model
    print("run 1: Hi! My name is Ada and I love trams.")
    print("  answer:", await run(agent, memory, "Hi! My name is Ada and I love trams."))
    print("  memory block:", session.get_context_block("memory").content)
    pointer = memory.to_json()
    session.close()

    # A new process: the serialised pointer (what a workflow Context keeps) reopens the file.
    session = open_session(db_path)
    memory = SessionMemory.from_json(pointer, session=session)
    agent = FunctionAgent(tools=SessionToolSpec(session).to_tool_list(), llm=llm)
    memory.bind(agent)
    print("run 2 (after reopening the file): What do you remember about me?")
    print("  answer:", await run(agent, memory, "What do you remember about me?"))

    stored = [f"{m.role}[{', '.join(p.type for p in m.parts)}]" for m in session.get_history()]
    print("stored messages:", " -> ".join(stored))
    for hit in session.search("trams"):
        print(f"search 'trams': [{hit.role}] {hit.content}")
    session.close()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(Path(sys.argv[1])))
    else:
        with tempfile.TemporaryDirectory() as folder:
            asyncio.run(main(Path(folder) / "memory.db"))
